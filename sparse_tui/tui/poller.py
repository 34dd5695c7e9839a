"""The store poller: the one thread that reads the run store for the console (after toolong's file watcher).

Every ``interval`` seconds it asks SQLite whether anything changed (``PRAGMA data_version``, a no-op query when
nothing did), reaps dead runs about once a second (``RunStore.reap``: a run whose process died is shown failed), and
posts what it read: ``RunsUpdated`` (the run table) when the store changed and ``CurvesData`` (the metric series of
the watched runs) when the store or the watched runs changed. It reads; the science (the theory overlay) is the
core's, asked for by the Curves panel (``TheoryRequested``).
Both messages coalesce (``can_replace``), so a slow UI thread draws only the newest. The loop checks the worker's
cancellation at every turn (a thread worker cannot be killed) and never touches a widget.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from textual.message import Message
from textual.worker import get_current_worker

from sparse_tui.base.plotting import downsample
from sparse_tui.science.forecast import forecasts
from sparse_tui.store import RunRecord, RunStore
from sparse_tui.tui.messages import CurvesData, Problem, RunsUpdated

CURVE_POINTS = 1500  # points per series kept (the plot downsamples further to its width)


class StorePoller:
    """Reads ``store`` for the console and posts what it read with ``post`` (the app's ``post_message``).

    ``watch`` (UI thread) says whose curves to read; ``wake`` asks for a read now (after a launch, a delete ...).
    ``run`` is the body of a thread worker."""

    def __init__(self, store: RunStore, post: Callable[[Message], object], interval: float = 0.3) -> None:
        self.store = store
        self.post = post
        self.interval = interval
        self._watch: tuple[str, ...] = ()
        self._wake = threading.Event()

    def watch(self, run_ids: list[str]) -> None:
        """Read the curves of these runs from now on (the marked runs, or the current one)."""
        new = tuple(run_ids)
        if new != self._watch:
            self._watch = new
            self.wake()

    def wake(self) -> None:
        self._wake.set()

    def run(self) -> None:
        worker = get_current_worker()
        store = self.store
        last_version = None
        last_reap = 0.0
        sent_watch: tuple[str, ...] | None = None
        failures = 0
        while not worker.is_cancelled:
            woken = self._wake.is_set()
            self._wake.clear()
            try:
                reaped: list[str] = []
                now = time.monotonic()
                if now - last_reap >= 1.0:
                    reaped = store.reap()
                    last_reap = now
                version = store.data_version()
                watch = self._watch
                changed = version != last_version or bool(reaped)
                if changed:
                    records = store.runs(reap=False)
                    # latest values of running runs, and of ended runs without final metrics (a failed run's are
                    # stored: the table shows them, not "-")
                    last = {r.run_id: store.last_metrics(r.run_id) for r in records
                            if r.status == "running" or (not r.final and r.status != "queued")}
                    if worker.is_cancelled:
                        break
                    # the emergence forecasts too: a preset's first forecast is a least-squares fit per run, which
                    # must not run on the UI thread (forecast.py caches them for the next reads)
                    self.post(RunsUpdated(records, last, forecasts(records)))
                    last_version = version
                if changed or woken or watch != sent_watch:
                    curves = self.curves(watch)
                    if worker.is_cancelled:
                        break
                    self.post(curves)
                    sent_watch = watch
                failures = 0
            except Exception as e:  # noqa: BLE001 - reported, then retried with back-off
                failures += 1
                if failures in (1, 10) or failures % 100 == 0:
                    self.post(Problem(f"reading the run store failed: {e}", error=e))
                self._wake.wait(min(5.0, self.interval * failures))
                continue
            self._wake.wait(self.interval)

    def curves(self, watch: tuple[str, ...]) -> CurvesData:
        """The metric series (downsampled, per-head series left out), plateau steps and names of the watched runs; a
        run deleted meanwhile is skipped."""
        recs: dict[str, RunRecord] = {}
        series: dict[str, dict] = {}
        for rid in watch:
            try:
                recs[rid] = self.store.get(rid)
            except Exception:  # noqa: BLE001 - deleted meanwhile
                continue
            series[rid] = {k: tuple(map(list, downsample(v[0], v[1], CURVE_POINTS)))
                           for k, v in self.store.metrics(rid).items() if "/H" not in k}
        return CurvesData(list(recs), series, {r: rec.plateau_step for r, rec in recs.items()},
                          {r: rec.name for r, rec in recs.items()}, {r: dict(rec.params) for r, rec in recs.items()})

