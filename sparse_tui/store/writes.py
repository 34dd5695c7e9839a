"""What the run store records while a run trains and after: metrics, heartbeats, attention snapshots, the end of a
run (``finish``: a terminal status is never rewritten), and the researcher's notes, tags, archive and deletions.
A mixin of ``RunStore``; ``RunSink`` is the part of it a training run writes through."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from typing import Any, Iterable, Protocol

from sparse_tui.store.records import ARRAY_DTYPES, TERMINAL, _finite_or_none, _json


class RunSink(Protocol):
    """Where a training run's records go (``runner.train_claimed``, ``RunLogger``, ``runner.record_end``): the
    ``RunStore``, or a Ray worker's ``ChannelSink``, which sends the same calls to the coordinator to apply to the
    store (executors/channel.py). Both declare it."""

    runs_dir: Path | str  # the store's folder (a worker's sink: the head's, for messages only)

    def log_metrics(self, run_id: str, step: int, metrics: dict[str, float],
                    wall_time: float | None = None) -> None: ...
    def log_metrics_many(self, run_id: str, steps: list[int], series: dict[str, list[float]],
                         wall_time: float | list[float] | None = None) -> None: ...
    def log_plateau(self, run_id: str, step: float) -> None: ...  # the plateau of a run still training
    def log_attention(self, run_id: str, step: int, maps: dict[str, Any], meta: dict) -> None: ...
    def log_array(self, run_id: str, name: str, value: Any) -> None: ...
    def heartbeat(self, run_id: str, step: int) -> bool: ...  # True: the run's cancel was requested
    def finish(self, run_id: str, status: str, **kw: Any) -> Any: ...  # the run's end (a terminal status)
    def get(self, run_id: str) -> Any: ...  # the run's record; what is read of it: ``step``


class Writes:
    """Recording a run (a part of ``RunStore``)."""

    def log_metrics(self, run_id: str, step: int, metrics: dict[str, float], wall_time: float | None = None) -> None:
        """Append metrics at ``step`` and refresh the heartbeat, in one transaction. ``wall_time``: when they were
        measured (seconds since the epoch; default now: a Ray worker's channel passes its own clock's)."""
        self.log_metrics_many(run_id, [step], {name: [v] for name, v in metrics.items()}, wall_time)

    def log_metrics_many(self, run_id: str, steps: list[int], series: dict[str, list[float]],
                         wall_time: float | list[float] | None = None) -> None:
        """Append whole series at once (integrated ODE runs) and refresh the heartbeat, in one transaction.
        ``wall_time``: one time for every point (default now), or one per step."""
        now = time.time()
        times = list(wall_time) if isinstance(wall_time, (list, tuple)) else [wall_time or now] * len(steps)
        rows = [(run_id, name, int(s), _finite_or_none(v), float(t))
                for name, vals in series.items() for s, v, t in zip(steps, vals, times)]
        with self._tx() as con:
            con.executemany("INSERT OR REPLACE INTO metrics (run_id, name, step, value, time) VALUES (?,?,?,?,?)",
                            rows)
            if steps:
                con.execute("UPDATE runs SET step=MAX(step, ?), heartbeat_at=? WHERE run_id=?",
                            (int(max(steps)), now, run_id))

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

    def log_plateau(self, run_id: str, step: float) -> None:
        """The plateau step of a run still training, the moment its detector fires (``runs`` and the console show it
        live; ``finish`` writes the final one). A run with a terminal status is never touched."""
        with self._tx() as con:
            con.execute("UPDATE runs SET plateau_step=? WHERE run_id=? AND status IN ('queued', 'running')",
                        (float(step), run_id))

    def log_attention(self, run_id: str, step: int, maps: dict[str, Any], meta: dict) -> None:
        """Store attention maps (``{'L1': array[H, E, Lq, L], ...}``, saved as float16) with labels in ``meta``."""
        import numpy as np

        buf = io.BytesIO()
        np.savez_compressed(buf, **{k: np.asarray(v, dtype=np.float16) for k, v in maps.items()})
        with self._tx() as con:
            con.execute("INSERT OR REPLACE INTO attention (run_id, step, meta, data) VALUES (?,?,?,?)",
                        (run_id, int(step), _json(meta), buf.getvalue()))

    def log_array(self, run_id: str, name: str, value: Any) -> None:
        """Keep a small named array of a run (``'embed'``: its final token embedding [V, D]) as raw bytes with
        its shape and dtype (float32 unless it is float64 or int64); a second write of the name replaces it."""
        import numpy as np

        a = np.asarray(value)
        a = np.ascontiguousarray(a, dtype=a.dtype if a.dtype.str in ARRAY_DTYPES else "<f4")
        with self._tx() as con:
            con.execute("INSERT OR REPLACE INTO arrays (run_id, name, shape, dtype, data) VALUES (?,?,?,?,?)",
                        (run_id, name, _json(list(a.shape)), a.dtype.str, a.tobytes()))

    def finish(self, run_id: str, status: str, *, reason: str | None = None, plateau_step: float | None = None,
               summary: dict | None = None, step: int | None = None) -> bool:
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
        with self._tx() as con:
            n = 0
            for run_id in run_ids:
                for table in ("metrics", "attention", "arrays"):
                    con.execute(f"DELETE FROM {table} WHERE run_id=?", (run_id,))
                n += con.execute("DELETE FROM runs WHERE run_id=?", (run_id,)).rowcount
        return n
