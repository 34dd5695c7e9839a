"""The run table and the long per-step metric table, as CSV, JSON lines or Parquet (same code for CLI and TUI).

Run table columns: ``run_id, batch_id, preset, status, reason, name, label, tags, note, seed, device,
plateau_step, step, total_steps, created_at, started_at, ended_at, duration_s``, then ``params.*`` (the flattened
resolved config of
each run), ``final.*`` (the last evaluated value of every metric) and ``best.*`` (best test loss / accuracy).
Times are ISO 8601 UTC. Runs of different presets have different params; columns are the union (empty cells where
a run has no such key).
"""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Iterable

from sparse_tui.base.files import write_file
from sparse_tui.store import RunRecord, RunStore

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


def write_output(path: Path, store: RunStore, runs: list[RunRecord], fmt: str, *, metrics: bool = False) -> int:
    """``export --output PATH`` (and the console's export dialog): the table written by the one file writer
    (files.py: all or nothing, a file keeps its mode, a symlink stays, ``/dev/stdout`` or a pipe is written
    through). Returns the rows written; raises ``files.WriteError`` (one line naming PATH)."""
    return write_file(path, lambda fh: export(store, runs, fmt, fh, metrics=metrics), binary=fmt == "parquet",
                      through=True, flag="--output")


def export(store: RunStore, runs: list[RunRecord], fmt: str, out: IO, *, metrics: bool = False) -> int:
    """Export runs (or their long metric table) to ``out``. Returns the number of rows written."""
    cols, rows = metrics_table(store, runs) if metrics else run_table(store, runs)
    write_table(cols, rows, fmt, out)
    return len(rows)
