"""Where a run's records go while it trains: ``RunLogger`` (the run store, a callback, or nowhere) and the
``RunResult`` the training loop returns for each run."""

from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Callable

HEARTBEAT_SECONDS = 1.0


@dataclass
class RunResult:
    status: str
    reason: str | None = None
    plateau_step: float | None = None
    summary: dict = field(default_factory=dict)
    step: int = 0


class RunLogger:
    """Where a run's records go: the run store (``store`` + ``run_id``), or nowhere (tests, benchmarks)."""

    def __init__(self, store=None, run_id: str | None = None, on_eval: Callable[[int, dict], None] | None = None):
        self.store, self.run_id, self.on_eval = store, run_id, on_eval
        self._last_beat = 0.0

    def metrics(self, step: int, values: dict[str, float]) -> None:
        if self.store is not None:
            self.store.log_metrics(self.run_id, step, values)
        if self.on_eval is not None:
            self.on_eval(step, values)

    def series(self, steps: list[int], series: dict[str, list[float]]) -> None:
        """Whole metric series at once (integrated ODE runs)."""
        if self.store is not None:
            self.store.log_metrics_many(self.run_id, steps, series)
        if self.on_eval is not None and steps:
            self.on_eval(steps[-1], {k: v[-1] for k, v in series.items()})

    def plateau(self, step: float) -> None:
        """The run left its plateau at ``step`` (written at once: the plateau of a run still training shows live)."""
        if self.store is not None:
            self.store.log_plateau(self.run_id, step)

    def attention(self, step: int, maps: dict, meta: dict) -> None:
        if self.store is not None:
            self.store.log_attention(self.run_id, step, maps, meta)

    def array(self, name: str, value) -> None:
        """A small array the run keeps after its checkpoints are gone (its final token embedding)."""
        if self.store is not None:
            self.store.log_array(self.run_id, name, value)

    def beat_due(self) -> bool:
        """Whether a heartbeat is due (one per ``HEARTBEAT_SECONDS``; never without a store)."""
        return self.store is not None and time.monotonic() - self._last_beat >= HEARTBEAT_SECONDS

    def heartbeat(self, step: int, force: bool = False) -> bool:
        """Rate-limited heartbeat; True when the store says this run should be cancelled."""
        if self.store is None or not (force or self.beat_due()):
            return False
        self._last_beat = time.monotonic()
        return self.store.heartbeat(self.run_id, step)


def heartbeat_all(loggers: list[RunLogger], step: int, force: bool = False) -> set[int]:
    """The heartbeats of a stack's runs that are due, in one store transaction (``together``; before, one per run
    per second); returns the indices of the loggers whose run the store says to cancel."""
    due = [i for i, lg in enumerate(loggers) if lg.store is not None and (force or lg.beat_due())]
    if not due:
        return set()
    with together([loggers[i] for i in due]):
        return {i for i in due if loggers[i].heartbeat(step, force=True)}


@contextmanager
def together(loggers: list[RunLogger]):
    """The records of ``loggers`` written inside in one store transaction (one evaluation of a stack), when they
    share one run store; otherwise (no store, a worker's channel that batches records itself) as they come."""
    stores = {id(lg.store): lg.store for lg in loggers if lg.store is not None}
    store = next(iter(stores.values())) if len(stores) == 1 else None
    with store.transaction() if hasattr(store, "transaction") else nullcontext():
        yield
