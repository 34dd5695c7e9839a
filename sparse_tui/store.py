"""The run store: an SQLite database (WAL mode) in the runs directory, the hub of sparse-tui.

Training processes write to it; the TUI, ``runs``, ``show``, ``export`` and ``fit`` read it. Several processes can
read and write at once (WAL journal, busy timeout, short transactions). Nothing here imports torch or textual.

Tables
    runs       one row per run: config (JSON), flattened params, status, times, device, versions, summary.
    metrics    long form (run_id, step, name, value).
    attention  attention maps of a few fixed test sequences at chosen steps (compressed numpy arrays).

Run lifecycle: ``queued -> running -> finished | diverged | failed | interrupted | cancelled``. A running run writes a
heartbeat; ``reap()`` (called by every reader) marks a running run whose process is gone, or whose heartbeat is older
than ``STALE_AFTER`` seconds, as ``failed`` at its last logged step. A terminal status is never rewritten
(``finish`` refuses); only ``requeue`` (``sparse-tui resume``) puts a failed or interrupted run back in the queue.

A batch has one or more **coordinators** (the processes that train its queued runs: the one that launched it, and
every ``resume`` of it); its queued runs are orphaned only when none of them is alive.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import secrets
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

STATUSES = ("queued", "running", "finished", "diverged", "failed", "interrupted", "cancelled")
TERMINAL = frozenset({"finished", "diverged", "failed", "interrupted", "cancelled"})
STALE_AFTER = 60.0  # seconds without heartbeat before a run (or coordinator) on another host counts as dead
DB_NAME = "runs.db"
# 1: runs, metrics, attention, meta.  2: + batches (each batch's coordinator: pid, host, heartbeat).
# 3: batches -> coordinators (a batch may have several coordinators at once: its launcher and each resume of it).
# 4: + runs.note, runs.tags (edited after launch; NULL: the preset's tags in the config), runs.archived.
# 5: + arrays (small named arrays a run keeps after its checkpoints are gone: its final token embedding).
SCHEMA_VERSION = 5

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    batch_id TEXT NOT NULL,
    preset TEXT NOT NULL,
    preset_path TEXT,
    label TEXT,
    status TEXT NOT NULL,
    reason TEXT,
    config TEXT NOT NULL,
    params TEXT NOT NULL,
    swept TEXT NOT NULL,
    seed INTEGER,
    device TEXT,
    versions TEXT,
    host TEXT,
    pid INTEGER,
    created_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    heartbeat_at REAL,
    step INTEGER NOT NULL DEFAULT 0,
    total_steps INTEGER,
    plateau_step REAL,
    summary TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    position INTEGER NOT NULL DEFAULT 0,
    note TEXT,
    tags TEXT,
    archived INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_batch ON runs (batch_id, status);
CREATE INDEX IF NOT EXISTS runs_status ON runs (status);
CREATE TABLE IF NOT EXISTS metrics (
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    step INTEGER NOT NULL,
    value REAL,
    PRIMARY KEY (run_id, name, step)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS coordinators (
    batch_id TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at REAL,
    heartbeat_at REAL,
    PRIMARY KEY (batch_id, host, pid)
);
CREATE TABLE IF NOT EXISTS attention (
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    meta TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, step)
);
CREATE TABLE IF NOT EXISTS arrays (
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    shape TEXT NOT NULL,
    dtype TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, name)
);
"""


# Schema migrations: the statements that take a store from version N to N + 1 (all additive).
_MIGRATIONS = {
    1: [
        "CREATE TABLE IF NOT EXISTS batches (batch_id TEXT PRIMARY KEY, pid INTEGER, host TEXT, started_at REAL,"
        " heartbeat_at REAL)"
    ],
    2: [
        "CREATE TABLE IF NOT EXISTS coordinators (batch_id TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL,"
        " started_at REAL, heartbeat_at REAL, PRIMARY KEY (batch_id, host, pid))",
        "INSERT OR IGNORE INTO coordinators SELECT batch_id, host, pid, started_at, heartbeat_at FROM batches"
        " WHERE host IS NOT NULL AND pid IS NOT NULL",
        "DROP TABLE batches",
    ],
    3: [
        "ALTER TABLE runs ADD COLUMN note TEXT",
        "ALTER TABLE runs ADD COLUMN tags TEXT",
        "ALTER TABLE runs ADD COLUMN archived INTEGER NOT NULL DEFAULT 0",
    ],
    4: [
        "CREATE TABLE IF NOT EXISTS arrays (run_id TEXT NOT NULL, name TEXT NOT NULL, shape TEXT NOT NULL,"
        " dtype TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (run_id, name))"
    ],
}
# The dtypes ``log_array`` stores (raw little-endian bytes; nothing a file holds is ever unpickled).
ARRAY_DTYPES = ("<f4", "<f8", "<i8")


def stale_after() -> float:
    """Seconds without a heartbeat after which a run or coordinator on *another host* counts as dead
    (``$SPARSE_TUI_STALE_AFTER``, default 60). On this host liveness is decided by the pid alone."""
    try:
        return float(os.environ.get("SPARSE_TUI_STALE_AFTER") or STALE_AFTER)
    except ValueError:
        return STALE_AFTER


def is_disk_full(exc: BaseException) -> bool:
    """Whether an exception says the disk (or the database's quota) is full."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc).lower()
    return isinstance(exc, sqlite3.Error) and ("disk is full" in text or "database or disk is full" in text)


def _read_only_fs(path: Path) -> bool:
    """Whether ``path`` lies on a file system mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def default_runs_dir() -> Path:
    """``$SPARSE_TUI_RUNS`` or ``./runs``."""
    return Path(os.environ.get("SPARSE_TUI_RUNS") or "runs")


def new_id(nbytes: int = 4) -> str:
    return secrets.token_hex(nbytes)


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().split(b")")[-1].split()[0]
        return state != b"Z"
    except OSError:
        return True


@dataclass
class RunRecord:
    """One row of the runs table, with JSON columns decoded."""

    run_id: str
    batch_id: str
    preset: str
    preset_path: str | None
    label: str
    status: str
    reason: str | None
    config: dict
    params: dict
    swept: dict
    seed: int | None
    device: str | None
    versions: dict
    host: str | None
    pid: int | None
    created_at: float
    started_at: float | None
    ended_at: float | None
    heartbeat_at: float | None
    step: int
    total_steps: int | None
    plateau_step: float | None
    summary: dict = field(default_factory=dict)
    cancel_requested: bool = False
    position: int = 0  # index of the run in its batch (sweep order)
    note: str | None = None  # the researcher's note (sparse-tui note, n in the console)
    tags: list = field(default_factory=list)  # the preset's tags, or as edited since (sparse-tui tag, T)
    archived: bool = False  # hidden from runs and the console unless asked for (sparse-tui archive)

    @property
    def duration(self) -> float | None:
        if self.started_at is None:
            return None
        end = self.ended_at or (self.heartbeat_at if self.status != "running" else time.time())
        return max(0.0, (end or time.time()) - self.started_at)

    @property
    def name(self) -> str:
        """What tells a run apart (tables, legends, exports, the compare view): its preset and its label (the swept
        values and the keys edited away from the preset file, then the seed)."""
        return f"{self.preset} {self.label or ''}".strip()

    @property
    def final(self) -> dict:
        return self.summary.get("final", {}) if self.summary else {}

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _row_to_record(row: sqlite3.Row) -> RunRecord:
    """A row as a record. Columns this version does not know (added by a newer or patched sparse-tui at the same
    schema version) are ignored."""
    d = {k: row[k] for k in row.keys() if k in _FIELDS}
    for key in ("config", "params", "swept", "versions", "summary"):
        d[key] = json.loads(d[key]) if d.get(key) else {}
    d["cancel_requested"] = bool(d["cancel_requested"])
    d["archived"] = bool(d.get("archived"))
    tags = json.loads(d["tags"]) if d.get("tags") is not None else (d["config"] or {}).get("tags")
    d["tags"] = [str(t) for t in tags] if isinstance(tags, list) else []
    return RunRecord(**d)


_FIELDS = frozenset(RunRecord.__dataclass_fields__)


def _json(obj: Any) -> str:
    return json.dumps(obj, default=_json_default, allow_nan=True)


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


class StoreError(Exception):
    """A problem with the run store (missing directory, unknown run id, damaged or foreign file, ...)."""


class RunStore:
    """Access to ``RUNS_DIR/runs.db``. Cheap to create; one SQLite connection per thread.

    Opening checks the file before anything is written: a file that is not SQLite, a SQLite database of another
    program, or a store written by a newer sparse-tui (``meta.schema_version``) raises ``StoreError`` with one line
    and is left byte for byte as it was. An older store is migrated. ``create=False`` (the read-only commands)
    never creates a store."""

    def __init__(self, runs_dir: str | Path | None = None, *, create: bool = True):
        self.runs_dir = Path(runs_dir) if runs_dir is not None else default_runs_dir()
        self.path = self.runs_dir / DB_NAME
        self.warnings: list[str] = []  # damaged rows skipped while reading (shown by the CLI)
        self._overrides: dict[str, tuple[str, str, float]] = {}  # reaped in memory when the store can't be written
        self._local = threading.local()
        self._host = socket.gethostname()
        self.read_only = False  # set when the store can only be read (read-only mount or permissions)
        if self.runs_dir.exists() and not self.runs_dir.is_dir():
            raise StoreError(f"{self.runs_dir}: not a directory (--runs-dir must name a directory)")
        if self.path.exists() and not self.path.is_file():
            raise StoreError(f"{self.path}: not a file")
        if not self.path.exists():
            if not create:
                raise StoreError(f"{self.path}: no run store here (run a preset first, or pass --runs-dir)")
            try:
                self.runs_dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"{self.runs_dir}: cannot create the run store directory: {e.strerror}") from None
            if not os.access(self.runs_dir, os.W_OK | os.X_OK):
                raise StoreError(f"{self.runs_dir}: directory is not writable; cannot create a run store here")
        version = self._inspect(create)
        if self.read_only:
            if version is not None and version < SCHEMA_VERSION:
                raise StoreError(f"{self.path}: an older store (schema {version}) on read-only media; copy it to a"
                                 " writable directory to upgrade it")
            return
        try:
            if version is None:
                self.con.executescript(_SCHEMA)  # executescript manages its own transaction
                with self._tx() as con:
                    con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif version < SCHEMA_VERSION:
                self._migrate(version)
            else:
                self.con  # WAL mode and pragmas
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: cannot open the run store: {e}") from None

    def _inspect(self, create: bool) -> int | None:
        """The store's schema version, read without writing anything (None: an empty file, to be created).
        Raises StoreError for a file that is not a sparse-tui store or is newer than this version."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            if not create:
                raise StoreError(f"{self.path}: empty file, not a run store (run a preset first)")
            return None
        uri = self.path.resolve().as_uri()
        try:
            con = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30.0)
            con.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError as e:
            if "unable to open" not in str(e) or os.access(self.runs_dir, os.W_OK) and not _read_only_fs(self.runs_dir):
                raise StoreError(f"{self.path}: cannot open: {e}") from None
            if create:  # a WAL store on read-only media can be read, never written
                raise StoreError(f"{self.path}: the run store is read-only (read-only file system or permissions);"
                                 " cannot record runs here (pass another --runs-dir)") from None
            self.read_only = True
            con = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, timeout=30.0)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: not a sparse-tui run store, or damaged ({e})") from None
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables:
                if not create:
                    raise StoreError(f"{self.path}: empty database, not a run store (run a preset first)")
                return None
            if not {"meta", "runs", "metrics"} <= tables:
                shown = ", ".join(sorted(tables)[:4]) + (", ..." if len(tables) > 4 else "")
                raise StoreError(f"{self.path}: not a sparse-tui run store (an SQLite database with tables {shown})")
            row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: not a sparse-tui run store, or damaged ({e})") from None
        finally:
            con.close()
        try:
            version = int(row[0]) if row is not None else 1
        except (TypeError, ValueError):
            raise StoreError(f"{self.path}: damaged run store (schema_version {row[0]!r} is not a number)") from None
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: written by a newer sparse-tui (store schema {version}; this version reads up to"
                f" {SCHEMA_VERSION}); upgrade sparse-tui"
            )
        return version

    def _migrate(self, version: int) -> None:
        """Bring an older store up to ``SCHEMA_VERSION`` (one transaction per step)."""
        for v in range(version, SCHEMA_VERSION):
            with self._tx() as con:
                for stmt in _MIGRATIONS[v]:
                    try:
                        con.execute(stmt)
                    except sqlite3.OperationalError as e:  # a column a partly upgraded store already has
                        if "duplicate column" not in str(e):
                            raise
                con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(v + 1),))

    # -- connections -------------------------------------------------------------------------------------------
    @property
    def con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None or getattr(self._local, "pid", None) != os.getpid():
            if self.read_only:  # a store on read-only media: read as an immutable file (no -wal / -shm needed)
                con = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro&immutable=1", uri=True, timeout=30.0,
                                      isolation_level=None, check_same_thread=False)
                con.row_factory = sqlite3.Row
                self._local.con, self._local.pid = con, os.getpid()
                return con
            con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            con.row_factory = sqlite3.Row
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("PRAGMA busy_timeout=30000")
            con.execute("PRAGMA foreign_keys=ON")
            self._local.con = con
            self._local.pid = os.getpid()
        return con

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    class _Tx:
        def __init__(self, con: sqlite3.Connection):
            self.con = con

        def __enter__(self) -> sqlite3.Connection:
            self.con.execute("BEGIN IMMEDIATE")
            return self.con

        def __exit__(self, exc_type, exc, tb) -> None:
            if exc_type is None:
                self.con.execute("COMMIT")
            else:
                self.con.execute("ROLLBACK")

    def _tx(self) -> "RunStore._Tx":
        return RunStore._Tx(self.con)

    # -- creating and claiming runs ------------------------------------------------------------------------------
    def create_runs(
        self, specs: Iterable[Any], batch_id: str | None = None, *, coordinator: int | None = None
    ) -> tuple[str, list[str]]:
        """Record the runs of one launch as ``queued``, with the batch's coordinator (``coordinator``: its pid,
        default this process) in the same transaction. ``specs`` are ``presets.RunSpec``. Returns (batch, ids)."""
        batch_id = batch_id or new_id(3)
        now = time.time()
        ids = []
        rows = []
        for i, spec in enumerate(specs):
            run_id = new_id()
            ids.append(run_id)
            cfg = spec.config.model_dump(mode="json")
            rows.append(
                (
                    run_id,
                    batch_id,
                    spec.preset,
                    spec.preset_path,
                    spec.label(),
                    "queued",
                    _json(cfg),
                    _json(spec.params),
                    _json(spec.swept),
                    spec.seed,
                    now,
                    spec.config.train.steps,
                    i,
                )
            )
        with self._tx() as con:
            con.executemany(
                "INSERT INTO runs (run_id, batch_id, preset, preset_path, label, status, config, params, swept, seed,"
                " created_at, total_steps, position) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                rows,
            )
            self._add_coordinator(con, batch_id, coordinator or os.getpid(), now)
        return batch_id, ids

    def _add_coordinator(self, con: sqlite3.Connection, batch_id: str, pid: int, now: float) -> None:
        con.execute(
            "INSERT OR REPLACE INTO coordinators (batch_id, host, pid, started_at, heartbeat_at) VALUES (?,?,?,?,?)",
            (batch_id, self._host, pid, now, now),
        )

    def add_coordinator(self, batch_id: str, pid: int | None = None) -> None:
        """Record ``pid`` (default: this process) on this host as one of the processes that train ``batch_id``'s
        queued runs (the launcher, a ``resume``). While any of them is alive, readers leave those runs queued."""
        with self._tx() as con:
            self._add_coordinator(con, batch_id, pid or os.getpid(), time.time())

    def hand_over(self, batch_id: str, pid: int) -> None:
        """This process stops coordinating ``batch_id`` and ``pid`` (a detached coordinator it started) takes over,
        in one transaction (so the batch is never without a coordinator in between)."""
        with self._tx() as con:
            self._add_coordinator(con, batch_id, pid, time.time())
            con.execute("DELETE FROM coordinators WHERE batch_id=? AND host=? AND pid=?",
                        (batch_id, self._host, os.getpid()))

    def drop_coordinator(self, batch_id: str, pid: int | None = None) -> None:
        """``pid`` (default: this process) no longer coordinates ``batch_id`` (it ended)."""
        with self._tx() as con:
            con.execute("DELETE FROM coordinators WHERE batch_id=? AND host=? AND pid=?",
                        (batch_id, self._host, pid or os.getpid()))

    def coordinators(self, batch_id: str) -> list[tuple[int, str]]:
        """(pid, host) of every recorded coordinator of a batch, newest first."""
        return [(r["pid"], r["host"]) for r in self.con.execute(
            "SELECT pid, host FROM coordinators WHERE batch_id=? ORDER BY started_at DESC", (batch_id,))]

    def other_coordinators_alive(self, batch_id: str, now: float | None = None) -> bool:
        """Whether a coordinator of ``batch_id`` other than this process is alive (``reap``'s rule)."""
        now = now or time.time()
        return any(self._alive(r, now) for r in self.con.execute(
            "SELECT pid, host, heartbeat_at FROM coordinators WHERE batch_id=? AND NOT (host=? AND pid=?)",
            (batch_id, self._host, os.getpid())))

    def _alive(self, row, now: float) -> bool:
        """A coordinator (or run) row's process is alive: by its pid on this host, by its heartbeat elsewhere."""
        if row["host"] == self._host:
            return pid_alive(row["pid"])
        return row["heartbeat_at"] is not None and now - row["heartbeat_at"] <= stale_after()

    def beat_batch(self, batch_id: str) -> None:
        """This coordinator's heartbeat (what other hosts judge it by)."""
        with self._tx() as con:
            con.execute("UPDATE coordinators SET heartbeat_at=? WHERE batch_id=? AND host=? AND pid=?",
                        (time.time(), batch_id, self._host, os.getpid()))

    def requeue(self, run_ids: Iterable[str]) -> list[str]:
        """Put failed, interrupted or queued runs back in the queue (``sparse-tui resume``); returns those re-queued.
        Their metrics stay; a run with a checkpoint continues from it (training/checkpoint.py)."""
        got = []
        with self._tx() as con:
            for run_id in run_ids:
                cur = con.execute(
                    "UPDATE runs SET status='queued', reason=NULL, ended_at=NULL, cancel_requested=0"
                    " WHERE run_id=? AND status IN ('failed', 'interrupted', 'queued')",
                    (run_id,),
                )
                if cur.rowcount:
                    got.append(run_id)
        for run_id in got:
            self._overrides.pop(run_id, None)
        return got

    def claim_next(self, batch_id: str, *, device: str, versions: dict, pid: int | None = None) -> RunRecord | None:
        """Take the next queued run of a batch and mark it running (``claim_runs`` of one)."""
        row = self.con.execute("SELECT run_id FROM runs WHERE batch_id=? AND status='queued' AND cancel_requested=0"
                               " ORDER BY position LIMIT 1", (batch_id,)).fetchone()
        got = [] if row is None else self.claim_runs([row["run_id"]], device=device, versions=versions, pid=pid)
        return got[0] if got else None

    def claim_runs(
        self, run_ids: Iterable[str], *, device: str, versions: dict, pid: int | None = None
    ) -> list[RunRecord]:
        """Atomically mark those of ``run_ids`` that are still queued as running; returns them (a stacked group)."""
        pid = pid or os.getpid()
        now = time.time()
        got = []
        with self._tx() as con:
            for run_id in run_ids:
                cur = con.execute(
                    "UPDATE runs SET status='running', pid=?, host=?, device=?, versions=?, started_at=?,"
                    " heartbeat_at=? WHERE run_id=? AND status='queued' AND cancel_requested=0",
                    (pid, self._host, device, _json(versions), now, now, run_id),
                )
                if cur.rowcount:
                    got.append(run_id)
        return [self.get(r) for r in got]

    def mark_running(self, run_id: str, *, device: str, versions: dict, pid: int | None = None) -> None:
        """Record where a claimed run trains (a Ray worker's first record); a run that has ended meanwhile (its
        task was cancelled and the run recorded) keeps its terminal status."""
        now = time.time()
        with self._tx() as con:
            con.execute(
                "UPDATE runs SET status='running', pid=?, host=?, device=?, versions=?, started_at=?, heartbeat_at=?"
                " WHERE run_id=? AND status IN ('queued', 'running')",
                (pid or os.getpid(), self._host, device, _json(versions), now, now, run_id),
            )

    # -- writing while a run trains -------------------------------------------------------------------------------
    def log_metrics(self, run_id: str, step: int, metrics: dict[str, float]) -> None:
        """Append metrics at ``step`` and refresh the heartbeat, in one transaction."""
        rows = [(run_id, name, int(step), _finite_or_none(v)) for name, v in metrics.items()]
        now = time.time()
        with self._tx() as con:
            con.executemany("INSERT OR REPLACE INTO metrics (run_id, name, step, value) VALUES (?,?,?,?)", rows)
            con.execute("UPDATE runs SET step=MAX(step, ?), heartbeat_at=? WHERE run_id=?", (int(step), now, run_id))

    def log_metrics_many(self, run_id: str, steps: list[int], series: dict[str, list[float]]) -> None:
        """Append whole series at once (used for integrated ODE runs)."""
        rows = [
            (run_id, name, int(s), _finite_or_none(v)) for name, vals in series.items() for s, v in zip(steps, vals)
        ]
        with self._tx() as con:
            con.executemany("INSERT OR REPLACE INTO metrics (run_id, name, step, value) VALUES (?,?,?,?)", rows)
            if steps:
                con.execute(
                    "UPDATE runs SET step=MAX(step, ?), heartbeat_at=? WHERE run_id=?",
                    (int(max(steps)), time.time(), run_id),
                )

    def heartbeat(self, run_id: str, step: int) -> bool:
        """Refresh the heartbeat and progress step. Returns True when a cancel was requested for this run."""
        now = time.time()
        with self._tx() as con:
            con.execute("UPDATE runs SET step=MAX(step, ?), heartbeat_at=? WHERE run_id=?", (int(step), now, run_id))
            row = con.execute("SELECT cancel_requested, batch_id FROM runs WHERE run_id=?", (run_id,)).fetchone()
            if row is not None:  # a coordinator training in-process beats as its runs do
                con.execute("UPDATE coordinators SET heartbeat_at=? WHERE batch_id=? AND host=? AND pid=?",
                            (now, row[1], self._host, os.getpid()))
        return bool(row and row[0])

    def log_attention(self, run_id: str, step: int, maps: dict[str, Any], meta: dict) -> None:
        """Store attention maps (``{'L1': array[H, E, Lq, L], ...}``, saved as float16) with labels in ``meta``."""
        import numpy as np

        buf = io.BytesIO()
        np.savez_compressed(buf, **{k: np.asarray(v, dtype=np.float16) for k, v in maps.items()})
        with self._tx() as con:
            con.execute(
                "INSERT OR REPLACE INTO attention (run_id, step, meta, data) VALUES (?,?,?,?)",
                (run_id, int(step), _json(meta), buf.getvalue()),
            )

    def log_array(self, run_id: str, name: str, value: Any) -> None:
        """Keep a small named array of a run (``'embed'``: its final token embedding [V, D]) as raw bytes with
        its shape and dtype (float32 unless it is float64 or int64); a second write of the name replaces it."""
        import numpy as np

        a = np.asarray(value)
        a = np.ascontiguousarray(a, dtype=a.dtype if a.dtype.str in ARRAY_DTYPES else "<f4")
        with self._tx() as con:
            con.execute("INSERT OR REPLACE INTO arrays (run_id, name, shape, dtype, data) VALUES (?,?,?,?,?)",
                        (run_id, name, _json(list(a.shape)), a.dtype.str, a.tobytes()))

    def finish(
        self,
        run_id: str,
        status: str,
        *,
        reason: str | None = None,
        plateau_step: float | None = None,
        summary: dict | None = None,
        step: int | None = None,
    ) -> bool:
        """Give a queued or running run its terminal status. A run that already has one keeps it, with its reason,
        summary and plateau step: nothing is written and False is returned (a terminal status is never
        rewritten; ``requeue`` is the only way back)."""
        if status not in TERMINAL:
            raise ValueError(f"not a terminal status: {status}")
        now = time.time()
        with self._tx() as con:
            cur = con.execute(
                "UPDATE runs SET status=?, reason=?, plateau_step=?, summary=?, ended_at=?, heartbeat_at=?,"
                " step=MAX(step, COALESCE(?, step)) WHERE run_id=? AND status IN ('queued', 'running')",
                (status, reason, plateau_step, _json(summary or {}), now, now, step, run_id),
            )
        if cur.rowcount:
            self._overrides.pop(run_id, None)
        return bool(cur.rowcount)

    def end_queued(self, batch_id: str, status: str, reason: str) -> int:
        """Give queued runs of a batch a terminal status (e.g. interrupted before they started)."""
        with self._tx() as con:
            cur = con.execute(
                "UPDATE runs SET status=?, reason=?, ended_at=? WHERE batch_id=? AND status='queued'",
                (status, reason, time.time(), batch_id),
            )
            return cur.rowcount

    def request_cancel(self, run_ids: Iterable[str]) -> list[RunRecord]:
        """Ask runs to stop: queued runs become cancelled at once, running ones at their next heartbeat.

        Returns the running records (their worker pids may also be signalled by the caller)."""
        ids = list(run_ids)
        running = []
        now = time.time()
        with self._tx() as con:
            for run_id in ids:
                con.execute("UPDATE runs SET cancel_requested=1 WHERE run_id=?", (run_id,))
                con.execute(
                    "UPDATE runs SET status='cancelled', reason='cancelled before start', ended_at=?"
                    " WHERE run_id=? AND status='queued'",
                    (now, run_id),
                )
        for run_id in ids:
            rec = self.get(run_id)
            if rec.status == "running":
                running.append(rec)
        return running

    # -- what the researcher adds after launch ---------------------------------------------------------------------
    def set_note(self, run_id: str, note: str | None) -> None:
        """Replace a run's note (None or blank: none)."""
        note = (note or "").strip() or None
        with self._tx() as con:
            con.execute("UPDATE runs SET note=? WHERE run_id=?", (note, run_id))

    def set_tags(self, run_id: str, tags: list[str]) -> None:
        """Replace a run's tags (checked by the caller: ``presets.tag_problem``)."""
        with self._tx() as con:
            con.execute("UPDATE runs SET tags=? WHERE run_id=?", (json.dumps(list(tags)), run_id))

    def set_archived(self, run_ids: Iterable[str], archived: bool = True) -> int:
        """Archive runs (hidden from ``runs`` and the console unless asked for; nothing is deleted), or bring them
        back. Returns how many runs changed."""
        with self._tx() as con:
            return sum(con.execute("UPDATE runs SET archived=? WHERE run_id=? AND archived<>?",
                                   (int(archived), r, int(archived))).rowcount for r in run_ids)

    def delete(self, run_ids: Iterable[str]) -> int:
        ids = list(run_ids)
        with self._tx() as con:
            n = 0
            for run_id in ids:
                con.execute("DELETE FROM metrics WHERE run_id=?", (run_id,))
                con.execute("DELETE FROM attention WHERE run_id=?", (run_id,))
                con.execute("DELETE FROM arrays WHERE run_id=?", (run_id,))
                n += con.execute("DELETE FROM runs WHERE run_id=?", (run_id,)).rowcount
        return n

    # -- reading --------------------------------------------------------------------------------------------------
    def reap(self, now: float | None = None) -> list[str]:
        """Fail the runs whose process is gone, and the queued runs of a coordinator that is gone.

        On this host a process is alive while its pid is (a stopped or slow process is alive); a run or coordinator
        on another host is judged by its heartbeat, older than ``stale_after()`` seconds = gone. The verdict is
        written when the store can be written; when it cannot (a full disk, a read-only mount) readers still show
        it, from memory. Returns the run ids found dead."""
        now = now or time.time()
        dead: list[tuple[str, str]] = []  # (run_id, reason)
        fresh_batches = set()
        for row in self.con.execute(
            "SELECT run_id, batch_id, pid, host, heartbeat_at, step FROM runs WHERE status='running'"
        ):
            # on another host a run that has not beaten yet is not judged
            gone = (row["host"] == self._host or row["heartbeat_at"] is not None) and not self._alive(row, now)
            why = "process died" if row["host"] == self._host else "heartbeat lost"
            if gone:
                full = " (disk full)" if why == "process died" and self._disk_nearly_full() else ""
                dead.append((row["run_id"], f"{why} at step {row['step']}{full}"))
            elif row["batch_id"]:
                fresh_batches.add(row["batch_id"])
        queued_batches = [r[0] for r in self.con.execute("SELECT DISTINCT batch_id FROM runs WHERE status='queued'")]
        for batch_id in queued_batches:
            if batch_id in fresh_batches:  # a live run of the batch: its coordinator is at work
                continue
            rows = self.con.execute(
                "SELECT pid, host, heartbeat_at FROM coordinators WHERE batch_id=? ORDER BY started_at DESC",
                (batch_id,)).fetchall()
            if any(self._alive(r, now) for r in rows):
                continue
            who = f"its coordinator (pid {rows[0]['pid']} on {rows[0]['host']}) is gone" if rows else "no coordinator"
            for r in self.con.execute("SELECT run_id FROM runs WHERE batch_id=? AND status='queued'", (batch_id,)):
                dead.append((r["run_id"], f"never started: {who}"))
        if dead:
            try:
                with self._tx() as con:
                    for run_id, why in dead:
                        con.execute(
                            "UPDATE runs SET status='failed', reason=?, ended_at=COALESCE(heartbeat_at, ?)"
                            " WHERE run_id=? AND status IN ('running', 'queued')",
                            (why, now, run_id),
                        )
            except sqlite3.OperationalError:  # cannot write (disk full, read-only): show the verdict anyway
                for run_id, why in dead:
                    self._overrides[run_id] = ("failed", why, now)
        return [d[0] for d in dead]

    def _disk_nearly_full(self) -> bool:
        try:
            st = os.statvfs(self.runs_dir)
        except OSError:
            return False
        return st.f_bavail * st.f_frsize < 1024 * 1024

    def _record(self, row: sqlite3.Row) -> RunRecord | None:
        """A row as a record, with an in-memory reaping verdict applied; None (and a warning) for a damaged row."""
        try:
            rec = _row_to_record(row)
        except (ValueError, TypeError, KeyError) as e:
            try:
                rid = row["run_id"]
            except (IndexError, KeyError):
                rid = "?"
            msg = f"warning: {self.path}: run {rid}: damaged row skipped ({type(e).__name__}: {e})"
            if msg not in self.warnings:
                self.warnings.append(msg)
            return None
        if rec.run_id in self._overrides and rec.status in ("running", "queued"):
            rec.status, rec.reason, rec.ended_at = self._overrides[rec.run_id]
        return rec

    def runs(
        self,
        *,
        status: str | Iterable[str] | None = None,
        preset: str | None = None,
        batch_id: str | None = None,
        reap: bool = True,
    ) -> list[RunRecord]:
        """All runs, newest first, optionally filtered."""
        if reap:
            self.reap()
        where, args = [], []
        if status:
            sts = [status] if isinstance(status, str) else list(status)
            where.append(f"status IN ({','.join('?' * len(sts))})")
            args += sts
        if preset:
            where.append("preset=?")
            args.append(preset)
        if batch_id:
            where.append("batch_id=?")
            args.append(batch_id)
        sql = "SELECT * FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, position ASC"
        recs = [self._record(r) for r in self.con.execute(sql, args)]
        if status and self._overrides:  # a verdict held in memory changes the status filter's answer
            sts = {status} if isinstance(status, str) else set(status)
            recs = [r for r in recs if r is None or r.status in sts]
        return [r for r in recs if r is not None]

    def find(self, text: str, kinds: tuple[str, ...] = ("run",), what: str = "run id") -> tuple[str, str]:
        """The one resolver of user-given ids, for every command: ``text`` is a run id or a batch id (``kinds``), or
        a unique prefix of one (matched literally: ``_`` and ``%`` are characters, not wildcards). An exact id wins
        over a prefix. Returns (kind, id); StoreError (one line, naming ``what``) when ``text`` is empty, names
        nothing, or is the prefix of several ids (they are listed)."""
        if not text:
            raise StoreError(f"{what}: must not be empty")
        tables = {"run": "SELECT run_id FROM runs WHERE {} LIMIT 5",
                  "batch": "SELECT DISTINCT batch_id FROM runs WHERE {} LIMIT 5"}
        col = {"run": "run_id", "batch": "batch_id"}
        for kind in kinds:
            if self.con.execute(tables[kind].format(f"{col[kind]}=?"), (text,)).fetchone():
                return kind, text
        found = [(kind, r[0]) for kind in kinds for r in self.con.execute(
            tables[kind].format(f"substr({col[kind]}, 1, ?) = ?"), (len(text), text))]
        if len(found) == 1:
            return found[0]
        nouns = " or ".join(kinds)
        if not found:
            raise StoreError(f"no {nouns} {_shown(text)} in {self.path}")
        listed = ", ".join(f"{kind} {i}" for kind, i in found[:4]) + (", ..." if len(found) > 4 else "")
        raise StoreError(f"{what} {_shown(text)} is ambiguous: it starts {listed}")

    def get(self, run_id: str) -> RunRecord:
        """A run by id or unique id prefix (``find``)."""
        _, rid = self.find(run_id)
        row = self.con.execute("SELECT * FROM runs WHERE run_id=?", (rid,)).fetchone()
        if row is None:  # deleted since
            raise StoreError(f"no run {_shown(run_id)} in {self.path}")
        rec = self._record(row)
        if rec is None:
            raise StoreError(self.warnings[-1].removeprefix("warning: "))
        return rec

    def metrics(
        self, run_id: str, names: Iterable[str] | None = None, since_step: int | None = None
    ) -> dict[str, tuple[list[int], list[float]]]:
        """Series per metric name: ``{name: (steps, values)}`` in step order (missing values are NaN)."""
        sql = "SELECT name, step, value FROM metrics WHERE run_id=?"
        args: list[Any] = [run_id]
        if names is not None:
            names = list(names)
            if not names:
                return {}
            sql += f" AND name IN ({','.join('?' * len(names))})"
            args += names
        if since_step is not None:
            sql += " AND step>?"
            args.append(int(since_step))
        sql += " ORDER BY name, step"
        out: dict[str, tuple[list[int], list[float]]] = {}
        for name, step, value in self.con.execute(sql, args):
            steps, vals = out.setdefault(name, ([], []))
            steps.append(step)
            vals.append(math.nan if value is None else value)
        return out

    def metric_rows(self, run_ids: Iterable[str] | None = None) -> Iterator[tuple[str, int, str, float | None]]:
        """The long metric table ``(run_id, step, name, value)``."""
        if run_ids is None:
            yield from self.con.execute("SELECT run_id, step, name, value FROM metrics ORDER BY run_id, name, step")
            return
        for run_id in run_ids:
            yield from self.con.execute(
                "SELECT run_id, step, name, value FROM metrics WHERE run_id=? ORDER BY name, step", (run_id,)
            )

    def last_metrics(self, run_id: str) -> dict[str, float]:
        """The latest value of every metric of a run."""
        rows = self.con.execute(
            "SELECT m.name, m.value FROM metrics m JOIN (SELECT name, MAX(step) AS s FROM metrics WHERE run_id=?"
            " GROUP BY name) l ON m.name=l.name AND m.step=l.s WHERE m.run_id=?",
            (run_id, run_id),
        )
        return {name: (math.nan if v is None else v) for name, v in rows}

    def attention_steps(self, run_id: str) -> list[int]:
        return [r[0] for r in self.con.execute("SELECT step FROM attention WHERE run_id=? ORDER BY step", (run_id,))]

    def attention(self, run_id: str, step: int) -> tuple[dict[str, Any], dict]:
        """Attention maps at a step: ``({'L1': float32 array [H, E, Lq, L], ...}, meta)``."""
        import numpy as np

        row = self.con.execute("SELECT meta, data FROM attention WHERE run_id=? AND step=?", (run_id, step)).fetchone()
        if row is None:
            raise StoreError(f"run {run_id} has no attention snapshot at step {step}")
        with np.load(io.BytesIO(row["data"])) as z:
            maps = {k: z[k].astype(np.float32) for k in z.files}
        return maps, json.loads(row["meta"])

    def array(self, run_id: str, name: str) -> Any:
        """A run's stored array (numpy, read from its raw bytes), or None when the run has none of that name."""
        import numpy as np

        row = self.con.execute("SELECT shape, dtype, data FROM arrays WHERE run_id=? AND name=?",
                               (run_id, name)).fetchone()
        if row is None:
            return None
        try:
            shape = [int(n) for n in json.loads(row["shape"])]
            if row["dtype"] not in ARRAY_DTYPES:
                raise ValueError(f"dtype {row['dtype']!r}")
            return np.frombuffer(row["data"], dtype=np.dtype(row["dtype"])).reshape(shape).copy()
        except (ValueError, TypeError) as e:
            raise StoreError(f"{self.path}: damaged array {name!r} of run {run_id} ({e})") from None

    def data_version(self) -> int:
        """Changes whenever any connection commits (cheap polling for live views)."""
        return int(self.con.execute("PRAGMA data_version").fetchone()[0])


def _shown(text: str) -> str:
    """A user-given id in quotes, control characters escaped."""
    return "'" + "".join(c if c.isprintable() else repr(c)[1:-1] for c in text) + "'"


def _finite_or_none(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
