"""What the console, ``runs``, ``show``, ``export`` and ``fit`` read from the run store: runs (reaped first, damaged
rows skipped and named), the one resolver of user-given ids, metric series and tables, attention snapshots, and a
cheap change counter for live views. A mixin of ``RunStore``."""

from __future__ import annotations

import bisect
import io
import json
import math
import sqlite3
import time
from typing import Any, Callable, Iterable, Iterator

from sparse_tui.store.records import ARRAY_DTYPES, RunRecord, StoreError, _row_to_record, _shown


def step_clock(rec: RunRecord, steps: list[int], times: list[float]) -> tuple[float, float, Callable[[float], float]]:
    """(start, end, the wall-clock time of a step) of a run: its logged times (``Reads.metric_times``), exact at each
    logged step and linear between them; without any (a store from before they were kept), interpolated linearly
    in the step between the run's start and its end (its last heartbeat while it runs), a steady pace. The one
    clock of the console's time axis and the TensorBoard export."""
    start = rec.started_at or rec.created_at or (times[0] if times else time.time())
    end = max(rec.ended_at or rec.heartbeat_at or start, start, times[-1] if times else start)
    if times:
        def at(step: float) -> float:
            i = bisect.bisect_left(steps, step)
            if i < len(steps) and steps[i] == step:
                return times[i]
            if i == 0:  # before the first logged point: from the start
                return start + (times[0] - start) * max(step, 0) / steps[0] if steps[0] > 0 else times[0]
            if i == len(steps):
                return times[-1]
            f = (step - steps[i - 1]) / (steps[i] - steps[i - 1])
            return times[i - 1] + f * (times[i] - times[i - 1])

        return start, end, at
    last = max(rec.step or 0, 1)
    return start, end, lambda step: start + (end - start) * min(max(step, 0), last) / last


class Reads:
    """Reading runs (a part of ``RunStore``)."""

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

    def runs(self, *, status: str | Iterable[str] | None = None, preset: str | None = None,
             batch_id: str | None = None, reap: bool = True) -> list[RunRecord]:
        """All runs, newest first, optionally filtered."""
        if reap:
            self.reap()
        where, args = [], []
        if status:
            sts = [status] if isinstance(status, str) else list(status)
            where.append(f"status IN ({','.join('?' * len(sts))})")
            args += sts
        for col, value in (("preset", preset), ("batch_id", batch_id)):
            if value:
                where.append(f"{col}=?")
                args.append(value)
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
        for kind in kinds:
            if self.con.execute(tables[kind].format(f"{kind}_id=?"), (text,)).fetchone():
                return kind, text
        found = [(kind, r[0]) for kind in kinds for r in self.con.execute(
            tables[kind].format(f"substr({kind}_id, 1, ?) = ?"), (len(text), text))]
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

    def metrics(self, run_id: str, names: Iterable[str] | None = None) -> dict[str, tuple[list[int], list[float]]]:
        """Series per metric name: ``{name: (steps, values)}`` in step order (missing values are NaN)."""
        sql = "SELECT name, step, value FROM metrics WHERE run_id=?"
        args: list[Any] = [run_id]
        if names is not None:
            names = list(names)
            if not names:
                return {}
            sql += f" AND name IN ({','.join('?' * len(names))})"
            args += names
        sql += " ORDER BY name, step"
        out: dict[str, tuple[list[int], list[float]]] = {}
        for name, step, value in self.con.execute(sql, args):
            steps, vals = out.setdefault(name, ([], []))
            steps.append(step)
            vals.append(math.nan if value is None else value)
        return out

    def metric_times(self, run_id: str) -> tuple[list[int], list[float]]:
        """When each step's metrics were logged: ``(steps, wall-clock times)`` in step order (the earliest time of a
        step's points); the points of an older store, which kept no time, are left out."""
        rows = self.con.execute("SELECT step, MIN(time) FROM metrics WHERE run_id=? AND time IS NOT NULL"
                                " GROUP BY step ORDER BY step", (run_id,)).fetchall()
        return [r[0] for r in rows], [r[1] for r in rows]

    def metric_rows(self, run_ids: Iterable[str] | None = None) -> Iterator[tuple[str, int, str, float | None]]:
        """The long metric table ``(run_id, step, name, value)``."""
        if run_ids is None:
            yield from self.con.execute("SELECT run_id, step, name, value FROM metrics ORDER BY run_id, name, step")
            return
        for run_id in run_ids:
            yield from self.con.execute("SELECT run_id, step, name, value FROM metrics WHERE run_id=?"
                                        " ORDER BY name, step", (run_id,))

    def last_metrics(self, run_id: str) -> dict[str, float]:
        """The latest value of every metric of a run."""
        rows = self.con.execute(
            "SELECT m.name, m.value FROM metrics m JOIN (SELECT name, MAX(step) AS s FROM metrics WHERE run_id=?"
            " GROUP BY name) l ON m.name=l.name AND m.step=l.s WHERE m.run_id=?", (run_id, run_id))
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
