"""The run store's queue: a launch records its runs ``queued`` with the batch's coordinator; coordinators come, go
and beat; runs are claimed (``running``), put back (``requeue``), cancelled or ended while queued; and ``reap`` fails
the runs whose process is gone. A mixin of ``RunStore``."""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any, Iterable

from sparse_tui.store.records import RunRecord, _json, new_id, pid_alive, stale_after


class Claims:
    """Launching, claiming and reaping runs (a part of ``RunStore``)."""

    def create_runs(self, specs: Iterable[Any], batch_id: str | None = None, *,
                    coordinator: int | None = None) -> tuple[str, list[str]]:
        """Record the runs of one launch as ``queued``, with the batch's coordinator (``coordinator``: its pid,
        default this process) in the same transaction. ``specs`` are ``presets.RunSpec``. Returns (batch, ids)."""
        batch_id = batch_id or new_id(3)
        now = time.time()
        ids = []
        rows = []
        for i, spec in enumerate(specs):
            run_id = new_id()
            ids.append(run_id)
            rows.append((run_id, batch_id, spec.preset, spec.preset_path, spec.label(), "queued",
                         _json(spec.config.model_dump(mode="json")), _json(spec.params), _json(spec.swept), spec.seed,
                         now, spec.config.train.steps, i))
        with self._tx() as con:
            con.executemany(
                "INSERT INTO runs (run_id, batch_id, preset, preset_path, label, status, config, params, swept, seed,"
                " created_at, total_steps, position) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            self._add_coordinator(con, batch_id, coordinator or os.getpid(), now)
        return batch_id, ids

    def _add_coordinator(self, con: sqlite3.Connection, batch_id: str, pid: int, now: float) -> None:
        con.execute(
            "INSERT OR REPLACE INTO coordinators (batch_id, host, pid, started_at, heartbeat_at) VALUES (?,?,?,?,?)",
            (batch_id, self._host, pid, now, now))

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
        got = self._update_each(
            run_ids, "UPDATE runs SET status='queued', reason=NULL, ended_at=NULL, cancel_requested=0"
            " WHERE run_id=? AND status IN ('failed', 'interrupted', 'queued')", ())
        for run_id in got:
            self._overrides.pop(run_id, None)
        return got

    def claim_runs(self, run_ids: Iterable[str], *, device: str, versions: dict,
                   pid: int | None = None) -> list[RunRecord]:
        """Atomically mark those of ``run_ids`` that are still queued as running; returns them (a stacked group)."""
        pid = pid or os.getpid()
        now = time.time()
        got = self._update_each(
            run_ids, "UPDATE runs SET status='running', pid=?, host=?, device=?, versions=?, started_at=?,"
            " heartbeat_at=? WHERE run_id=? AND status='queued' AND cancel_requested=0",
            (pid, self._host, device, _json(versions), now, now))
        return [self.get(r) for r in got]

    def _update_each(self, run_ids: Iterable[str], sql: str, params: tuple) -> list[str]:
        """Run ``sql`` (its last placeholder is the run id) for each run in one transaction; the ids it changed."""
        with self._tx() as con:
            return [r for r in run_ids if con.execute(sql, (*params, r)).rowcount]

    def mark_running(self, run_id: str, *, device: str, versions: dict, pid: int | None = None) -> None:
        """Record where a claimed run trains (a Ray worker's first record); a run that has ended meanwhile (its
        task was cancelled and the run recorded) keeps its terminal status."""
        now = time.time()
        with self._tx() as con:
            con.execute(
                "UPDATE runs SET status='running', pid=?, host=?, device=?, versions=?, started_at=?, heartbeat_at=?"
                " WHERE run_id=? AND status IN ('queued', 'running')",
                (pid or os.getpid(), self._host, device, _json(versions), now, now, run_id))

    def end_queued(self, batch_id: str, status: str, reason: str) -> int:
        """Give queued runs of a batch a terminal status (e.g. interrupted before they started)."""
        with self._tx() as con:
            return con.execute("UPDATE runs SET status=?, reason=?, ended_at=? WHERE batch_id=? AND status='queued'",
                               (status, reason, time.time(), batch_id)).rowcount

    def request_cancel(self, run_ids: Iterable[str]) -> list[RunRecord]:
        """Ask runs to stop: queued runs become cancelled at once, running ones at their next heartbeat.

        Returns the running records (their worker pids may also be signalled by the caller)."""
        ids = list(run_ids)
        now = time.time()
        with self._tx() as con:
            for run_id in ids:
                con.execute("UPDATE runs SET cancel_requested=1 WHERE run_id=?", (run_id,))
                con.execute("UPDATE runs SET status='cancelled', reason='cancelled before start', ended_at=?"
                            " WHERE run_id=? AND status='queued'", (now, run_id))
        return [rec for rec in map(self.get, ids) if rec.status == "running"]

    def reap(self, now: float | None = None) -> list[str]:
        """Fail the runs whose process is gone, and the queued runs of a coordinator that is gone.

        On this host a process is alive while its pid is (a stopped or slow process is alive); a run or coordinator
        on another host is judged by its heartbeat, older than ``stale_after()`` seconds = gone. The verdict is
        written when the store can be written; when it cannot (a full disk, a read-only mount) readers still show
        it, from memory. Returns the run ids found dead."""
        now = now or time.time()
        dead: list[tuple[str, str]] = []  # (run_id, reason)
        fresh_batches = set()
        for row in self.con.execute("SELECT run_id, batch_id, pid, host, heartbeat_at, step FROM runs"
                                    " WHERE status='running'"):
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
            dead += [(r["run_id"], f"never started: {who}") for r in self.con.execute(
                "SELECT run_id FROM runs WHERE batch_id=? AND status='queued'", (batch_id,))]
        if dead:
            try:
                with self._tx() as con:
                    for run_id, why in dead:
                        con.execute("UPDATE runs SET status='failed', reason=?, ended_at=COALESCE(heartbeat_at, ?)"
                                    " WHERE run_id=? AND status IN ('running', 'queued')", (why, now, run_id))
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
