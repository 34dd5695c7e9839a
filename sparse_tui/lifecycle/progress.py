"""Progress of a batch of runs on stderr, read from the run store (so it works for in-process and worker runs).

On a terminal: a Rich progress bar per run (step, train loss, test accuracy, ETA). Otherwise (a log file, CI): a
plain line per run every ``interval`` seconds while it moves, and one line when it ends.
"""

from __future__ import annotations

import math
import threading
import time

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from sparse_tui.base.numbers import fmt_or
from sparse_tui.store import TERMINAL, RunRecord, RunStore

# The metrics a run's progress line shows, with their format.
_LINE_METRICS = (("train/loss", ".4g"), ("test/loss", ".4g"), ("test/acc", ".3f"))


def run_line(rec: RunRecord, last: dict[str, float]) -> str:
    parts = [f"[{rec.run_id}] {rec.label}", f"{rec.status}", f"step {rec.step}/{rec.total_steps}"]
    parts += [f"{name} {fmt_or(last[name], spec)}" for name, spec in _LINE_METRICS if name in last]
    if rec.status == "running" and rec.duration and rec.step:
        rate = rec.step / rec.duration
        eta = (rec.total_steps - rec.step) / rate if rate > 0 else math.nan
        parts.append(f"ETA {fmt_or(eta, '.0f')}s")
    if rec.status in TERMINAL:
        if rec.plateau_step is not None:
            parts.append(f"plateau {rec.plateau_step:g}")
        if rec.reason:
            parts.append(f"({rec.reason})")
    return "  ".join(parts)


class BatchProgress:
    """Polls the store from a background thread and renders the batch's progress to ``console``."""

    def __init__(self, store: RunStore, batch_id: str, console: Console, *, interval: float = 10.0, poll: float = 0.5):
        self.store, self.batch_id, self.console = store, batch_id, console
        self.interval, self.poll = interval, poll
        self.tty = console.is_terminal
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tasks: dict[str, TaskID] = {}
        self._printed_end: set[str] = set()
        self._last_print: dict[str, float] = {}
        self._progress = Progress(
            TextColumn("[bold]{task.fields[rid]}[/] {task.description}"), BarColumn(bar_width=24),
            TextColumn("{task.completed:>6.0f}/{task.total:<6.0f}"), TextColumn("{task.fields[stats]}"),
            TimeRemainingColumn(), console=console, transient=False, refresh_per_second=4,
        ) if self.tty else None

    def __enter__(self) -> "BatchProgress":
        if self._progress is not None:
            self._progress.start()
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.update()
        except Exception:  # noqa: BLE001 - progress must never break a run
            pass
        if self._progress is not None:
            self._progress.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self.update()
            except Exception:  # noqa: BLE001 - a locked database or a race must not kill the display
                pass

    def update(self) -> None:
        runs = sorted(self.store.runs(batch_id=self.batch_id, reap=False), key=lambda r: r.created_at)
        now = time.time()
        for rec in runs:
            last = self.store.last_metrics(rec.run_id) if rec.status != "queued" else {}
            if self._progress is not None:
                stats = [f"{k.split('/')[1]} {fmt_or(last[k], spec)}" for k, spec in (("train/loss", ".4g"),
                                                                                    ("test/acc", ".3f")) if k in last]
                if rec.status != "running":
                    stats.append(rec.status)
                tid = self._tasks.get(rec.run_id)
                if tid is None:
                    tid = self._progress.add_task(rec.label, total=rec.total_steps or 1, rid=rec.run_id, stats="")
                    self._tasks[rec.run_id] = tid
                self._progress.update(tid, completed=rec.step, stats="  ".join(stats))
            elif rec.status in TERMINAL and rec.run_id not in self._printed_end:
                self._printed_end.add(rec.run_id)
                self.console.print(run_line(rec, last), highlight=False, soft_wrap=True, markup=False)
            elif rec.status == "running" and now - self._last_print.get(rec.run_id, 0) >= self.interval:
                self._last_print[rec.run_id] = now
                self.console.print(run_line(rec, last), highlight=False, soft_wrap=True, markup=False)
