"""The run table and the long per-step metric table, as CSV, JSON lines or Parquet (same code for CLI and TUI).

Run table columns: ``run_id, batch_id, preset, status, reason, name, label, tags, note, seed, device,
plateau_step, step, total_steps, created_at, started_at, ended_at, duration_s``, then ``params.*`` (the flattened resolved config of
each run), ``final.*`` (the last evaluated value of every metric) and ``best.*`` (best test loss / accuracy).
Times are ISO 8601 UTC. Runs of different presets have different params; columns are the union (empty cells where
a run has no such key).
"""

from __future__ import annotations

import csv
import ctypes
import ctypes.util
import io
import json
import math
import os
import stat
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Callable, Iterable

from sparse_tui.store import RunRecord, RunStore, is_disk_full

FORMATS = ("csv", "jsonl", "parquet")
LEAD = [
    "run_id",
    "batch_id",
    "preset",
    "status",
    "reason",
    "name",
    "label",
    "tags",
    "note",
    "seed",
    "device",
    "plateau_step",
    "step",
    "total_steps",
    "created_at",
    "started_at",
    "ended_at",
    "duration_s",
]


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds")


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return v


def run_row(rec: RunRecord, store: RunStore | None = None) -> dict[str, Any]:
    """One row of the run table."""
    row: dict[str, Any] = {
        "run_id": rec.run_id,
        "batch_id": rec.batch_id,
        "preset": rec.preset,
        "status": rec.status,
        "reason": rec.reason,
        "label": rec.label,
        "name": rec.name,
        "tags": list(rec.tags),
        "note": rec.note,
        "seed": rec.seed,
        "device": rec.device,
        "plateau_step": _plateau(rec.plateau_step),
        "step": rec.step,
        "total_steps": rec.total_steps,
        "created_at": _iso(rec.created_at),
        "started_at": _iso(rec.started_at),
        "ended_at": _iso(rec.ended_at),
        "duration_s": None if rec.duration is None else round(rec.duration, 3),
    }
    final = rec.final or (store.last_metrics(rec.run_id) if store is not None else {})
    row.update({f"params.{k}": _clean(v) for k, v in sorted(rec.params.items())})
    # per-head probes stay in the long table; the run table keeps per-layer means
    row.update({f"final.{k}": _clean(v) for k, v in sorted(final.items()) if "/H" not in k})
    row.update({f"best.{k}": _clean(v) for k, v in sorted((rec.summary.get("best") or {}).items())})
    return row


def _plateau(v: float | None) -> float | int | None:
    if v is None:
        return None
    return int(v) if float(v).is_integer() else v


def run_table(store: RunStore, runs: Iterable[RunRecord]) -> tuple[list[str], list[dict[str, Any]]]:
    rows = [run_row(r, store) for r in runs]
    keys = {k for row in rows for k in row}
    return LEAD + [k for prefix in ("params.", "final.", "best.") for k in sorted(keys) if k.startswith(prefix)], rows


def metrics_table(store: RunStore, runs: Iterable[RunRecord]) -> tuple[list[str], list[dict[str, Any]]]:
    cols = ["run_id", "step", "name", "value"]
    rows = [
        {"run_id": r, "step": s, "name": n, "value": v} for r, s, n, v in store.metric_rows([x.run_id for x in runs])
    ]
    return cols, rows


def _csv_cell(v: Any) -> Any:
    """A CSV cell: empty for None, a list (the tags) as its words joined by spaces."""
    if v is None:
        return ""
    return " ".join(map(str, v)) if isinstance(v, list) else v


def write_table(cols: list[str], rows: list[dict[str, Any]], fmt: str, out: IO) -> None:
    """Write a table to a text stream (csv, jsonl) or a binary stream (parquet)."""
    if fmt == "csv":
        w = csv.DictWriter(out, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for row in rows:
            w.writerow({k: _csv_cell(row.get(k)) for k in cols})
    elif fmt == "jsonl":
        for row in rows:
            out.write(json.dumps({k: row.get(k) for k in cols}) + "\n")
    elif fmt == "parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise RuntimeError("parquet export needs pyarrow: pip install 'sparse-tui[parquet]'") from None
        table = pa.Table.from_pylist([{k: row.get(k) for k in cols} for row in rows])
        buf = io.BytesIO()
        pq.write_table(table, buf)
        out.write(buf.getvalue())
    else:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


class ExportError(Exception):
    """An export that could not be written (one line, naming the file). ``disk_full``: the disk was full."""

    def __init__(self, message: str, disk_full: bool = False):
        super().__init__(message)
        self.disk_full = disk_full


def output_problem(path: Path) -> str | None:
    """Why ``--output PATH`` cannot be written (one line, naming it), None when it can: checked before any work.
    A symlink is judged by its target; a character device or a FIFO (``/dev/stdout``, a named pipe) is written
    through; a block device, a socket or a directory is refused."""
    path = Path(path)
    try:
        st = os.stat(path)  # follows a symlink
    except FileNotFoundError:
        st = None
    except OSError as e:
        return f"--output {path}: {e.strerror or e}"
    if st is not None and stat.S_ISDIR(st.st_mode):
        return f"--output {path}: is a directory"
    if st is not None and (stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode)):
        return f"--output {path}: a {'block device' if stat.S_ISBLK(st.st_mode) else 'socket'}, not a file to write"
    if st is not None and not stat.S_ISREG(st.st_mode):
        return None  # a character device or a FIFO: written through
    real = Path(os.path.realpath(path))
    if not real.parent.is_dir():
        return f"--output {path}: directory {real.parent} does not exist"
    if not os.access(real.parent, os.W_OK):
        return f"--output {path}: directory {real.parent} is not writable"
    return None


def write_atomic(path: Path, write: Callable[[IO], int], *, binary: bool = False) -> int:
    """Write ``path`` all or nothing: ``write(fh)`` fills a file that has no name until it is complete (Linux
    ``O_TMPFILE``: even ``kill -9`` leaves nothing behind), which then atomically replaces ``path``. Elsewhere a
    ``.part`` file is used and removed on every error. Returns what ``write`` returns.

    What is replaced keeps what it was: an existing file keeps its permissions (and, where allowed, its owner); a
    symlink stays and its target is replaced; a character device or a FIFO (``/dev/stdout``, ``/dev/null``, a
    named pipe) is written through, never replaced by a regular file. A new file gets the umask's permissions."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise _export_error(path, e) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        return _write_through(path, write, binary)
    target = Path(os.path.realpath(path))  # a symlink: its target is replaced, the link stays
    directory = target.parent
    tmp_name = target.with_name(f".{target.name}.{os.getpid()}.part")
    fd = None
    try:
        fd = os.open(directory, os.O_TMPFILE | os.O_WRONLY, 0o666) if hasattr(os, "O_TMPFILE") else None
    except OSError:
        fd = None
    named = fd is None
    try:
        if named:
            fd = os.open(tmp_name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        if st is not None:  # the replaced file's permissions and owner, not the umask's
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
            try:
                os.fchown(fd, st.st_uid, st.st_gid)
            except PermissionError:
                pass
        mode = "wb" if binary else "w"
        with open(fd, mode, newline=None if binary else "", closefd=True) as fh:
            fd = None
            n = write(fh)
            fh.flush()
            os.fsync(fh.fileno())
            if not named:  # give the finished file a (temporary) name, then move it over the target
                _link_fd(fh.fileno(), tmp_name)
        os.replace(tmp_name, target)
        return n
    except OSError as e:
        raise _export_error(path, e) from None
    finally:
        if fd is not None:
            os.close(fd)
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass


def _write_through(path: Path, write: Callable[[IO], int], binary: bool) -> int:
    """Write into a character device or a FIFO as a shell's ``>`` would (nothing is replaced)."""
    try:
        with open(path, "wb" if binary else "w", newline=None if binary else "") as fh:
            n = write(fh)
            fh.flush()
        return n
    except OSError as e:
        raise _export_error(path, e) from None


def _export_error(path: Path, e: OSError) -> ExportError:
    return ExportError(f"--output {path}: cannot write: {e.strerror or e}", disk_full=is_disk_full(e))


def _link_fd(fd: int, name: Path) -> None:
    """Give the unnamed (``O_TMPFILE``) file ``fd`` the name ``name``: ``linkat`` following /proc/self/fd/N."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    AT_FDCWD, AT_SYMLINK_FOLLOW = -100, 0x400
    if libc.linkat(AT_FDCWD, f"/proc/self/fd/{fd}".encode(), AT_FDCWD, os.fsencode(name), AT_SYMLINK_FOLLOW) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(name))


def export(store: RunStore, runs: list[RunRecord], fmt: str, out: IO, *, metrics: bool = False) -> int:
    """Export runs (or their long metric table) to ``out``. Returns the number of rows written."""
    cols, rows = metrics_table(store, runs) if metrics else run_table(store, runs)
    write_table(cols, rows, fmt, out)
    return len(rows)
