"""The run store: an SQLite database (WAL mode) in the runs directory, the hub of sparse-tui.

Training processes write to it; the TUI, ``runs``, ``show``, ``export`` and ``fit`` read it. Several processes can
read and write at once (WAL journal, busy timeout, short transactions). Nothing here imports torch or textual.

Tables
    runs       one row per run: config (JSON), flattened params, status, times, device, versions, summary.
    metrics    long form (run_id, step, name, value).
    attention  attention maps of a few fixed test sequences at chosen steps (compressed numpy arrays).

Run lifecycle: ``queued -> running -> finished | diverged | failed | interrupted | cancelled``. A running run writes a
heartbeat; ``reap()`` (called by every reader) marks a running run whose process is gone, or whose heartbeat is older
than ``STALE_AFTER`` seconds, as ``failed`` at its last logged step.
"""

from __future__ import annotations

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
STALE_AFTER = 60.0  # seconds without heartbeat before a running run on another host counts as dead
DB_NAME = "runs.db"
SCHEMA_VERSION = 1

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
    position INTEGER NOT NULL DEFAULT 0
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
CREATE TABLE IF NOT EXISTS attention (
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    meta TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, step)
);
"""


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

    @property
    def duration(self) -> float | None:
        if self.started_at is None:
            return None
        end = self.ended_at or (self.heartbeat_at if self.status != "running" else time.time())
        return max(0.0, (end or time.time()) - self.started_at)

    @property
    def final(self) -> dict:
        return self.summary.get("final", {}) if self.summary else {}

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _row_to_record(row: sqlite3.Row) -> RunRecord:
    d = dict(row)
    for key in ("config", "params", "swept", "versions", "summary"):
        d[key] = json.loads(d[key]) if d.get(key) else {}
    d["cancel_requested"] = bool(d["cancel_requested"])
    return RunRecord(**d)


def _json(obj: Any) -> str:
    return json.dumps(obj, default=_json_default, allow_nan=True)


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


class StoreError(Exception):
    """A problem with the run store (missing directory, unknown run id, ...)."""


class RunStore:
    """Access to ``RUNS_DIR/runs.db``. Cheap to create; one SQLite connection per thread."""

    def __init__(self, runs_dir: str | Path | None = None, *, create: bool = True):
        self.runs_dir = Path(runs_dir) if runs_dir is not None else default_runs_dir()
        self.path = self.runs_dir / DB_NAME
        if not self.path.exists():
            if not create:
                raise StoreError(f"{self.path}: no run store here (run a preset first, or pass --runs-dir)")
            self.runs_dir.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._host = socket.gethostname()
        self.con.executescript(_SCHEMA)  # executescript manages its own transaction
        with self._tx() as con:
            con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    # -- connections -------------------------------------------------------------------------------------------
    @property
    def con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None or getattr(self._local, "pid", None) != os.getpid():
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
    def create_runs(self, specs: Iterable[Any], batch_id: str | None = None) -> tuple[str, list[str]]:
        """Record the runs of one launch as ``queued``. ``specs`` are ``presets.RunSpec``. Returns (batch, ids)."""
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
        return batch_id, ids

    def claim_next(self, batch_id: str, *, device: str, versions: dict, pid: int | None = None) -> RunRecord | None:
        """Atomically take the next queued run of a batch and mark it running (for worker processes)."""
        pid = pid or os.getpid()
        now = time.time()
        with self._tx() as con:
            row = con.execute(
                "SELECT run_id FROM runs WHERE batch_id=? AND status='queued' AND cancel_requested=0"
                " ORDER BY position LIMIT 1",
                (batch_id,),
            ).fetchone()
            if row is None:
                return None
            con.execute(
                "UPDATE runs SET status='running', pid=?, host=?, device=?, versions=?, started_at=?, heartbeat_at=?"
                " WHERE run_id=?",
                (pid, self._host, device, _json(versions), now, now, row["run_id"]),
            )
        return self.get(row["run_id"])

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
        now = time.time()
        with self._tx() as con:
            con.execute(
                "UPDATE runs SET status='running', pid=?, host=?, device=?, versions=?, started_at=?, heartbeat_at=?"
                " WHERE run_id=?",
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
        with self._tx() as con:
            con.execute("UPDATE runs SET step=MAX(step, ?), heartbeat_at=? WHERE run_id=?", (int(step), time.time(), run_id))
            row = con.execute("SELECT cancel_requested FROM runs WHERE run_id=?", (run_id,)).fetchone()
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

    def finish(
        self,
        run_id: str,
        status: str,
        *,
        reason: str | None = None,
        plateau_step: float | None = None,
        summary: dict | None = None,
        step: int | None = None,
    ) -> None:
        if status not in TERMINAL:
            raise ValueError(f"not a terminal status: {status}")
        now = time.time()
        with self._tx() as con:
            con.execute(
                "UPDATE runs SET status=?, reason=?, plateau_step=?, summary=?, ended_at=?, heartbeat_at=?,"
                " step=MAX(step, COALESCE(?, step)) WHERE run_id=?",
                (status, reason, plateau_step, _json(summary or {}), now, now, step, run_id),
            )

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

    def delete(self, run_ids: Iterable[str]) -> int:
        ids = list(run_ids)
        with self._tx() as con:
            n = 0
            for run_id in ids:
                con.execute("DELETE FROM metrics WHERE run_id=?", (run_id,))
                con.execute("DELETE FROM attention WHERE run_id=?", (run_id,))
                n += con.execute("DELETE FROM runs WHERE run_id=?", (run_id,)).rowcount
        return n

    # -- reading --------------------------------------------------------------------------------------------------
    def reap(self, now: float | None = None) -> list[str]:
        """Mark running runs whose process died (same host) or whose heartbeat is stale as failed."""
        now = now or time.time()
        dead = []
        for row in self.con.execute("SELECT run_id, pid, host, heartbeat_at, step FROM runs WHERE status='running'"):
            same_host = row["host"] == self._host
            gone = same_host and not pid_alive(row["pid"])
            stale = row["heartbeat_at"] is not None and now - row["heartbeat_at"] > STALE_AFTER
            if gone or stale:
                dead.append((row["run_id"], row["step"], "process died" if gone else "heartbeat lost"))
        if dead:
            with self._tx() as con:
                for run_id, step, why in dead:
                    con.execute(
                        "UPDATE runs SET status='failed', reason=?, ended_at=COALESCE(heartbeat_at, ?)"
                        " WHERE run_id=? AND status='running'",
                        (f"{why} at step {step}", now, run_id),
                    )
        return [d[0] for d in dead]

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
        return [_row_to_record(r) for r in self.con.execute(sql, args)]

    def get(self, run_id: str) -> RunRecord:
        """A run by id or unique id prefix."""
        row = self.con.execute("SELECT * FROM runs WHERE run_id=?", (run_id,)).fetchone()
        if row is None:
            rows = self.con.execute("SELECT * FROM runs WHERE run_id LIKE ? LIMIT 2", (run_id + "%",)).fetchall()
            if len(rows) == 1:
                row = rows[0]
            elif len(rows) > 1:
                raise StoreError(f"run id prefix '{run_id}' is ambiguous")
            else:
                raise StoreError(f"no run '{run_id}' in {self.path}")
        return _row_to_record(row)

    def resolve(self, run_id: str) -> str:
        return self.get(run_id).run_id

    def metric_names(self, run_id: str) -> list[str]:
        return [r[0] for r in self.con.execute("SELECT DISTINCT name FROM metrics WHERE run_id=? ORDER BY name", (run_id,))]

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

    def data_version(self) -> int:
        """Changes whenever any connection commits (cheap polling for live views)."""
        return int(self.con.execute("PRAGMA data_version").fetchone()[0])


def _finite_or_none(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
