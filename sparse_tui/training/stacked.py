"""Stacked training of a batch in the run store: train each group of claimed runs that can share a stack
(training/grouping.py; ``runner.work`` claims them, the run lifecycle lives there) as one stack
(training/loop.py), record every run as it ends.

Never lose a sweep to an optimisation: every stack takes a trial step before training (``loop.trial_step``). If it
fails (an unsupported kernel, out of memory), the group is split in halves and each half tried again, down to
one run at a time, which ``trainer.train_run`` retries once on the plainest attention kernel with no CUDA graph.
Each fallback is printed to the batch log (stderr) and written into the affected runs' summaries (``notes``).
"""

from __future__ import annotations

import sys
from typing import Callable

import torch

from sparse_tui.training.grouping import group_key, stackable, task_dims  # noqa: F401  (re-exported)
from sparse_tui.training.loop import StackFailed, train_stack
from sparse_tui.training.cudagraph import free_cached_memory
from sparse_tui.training.runlog import RunLogger, RunResult

GroupTooLarge = StackFailed  # the old name of a failed trial step


def say(msg: str) -> None:
    """A line for the batch log (the coordinator's stderr goes to RUNS_DIR/logs/BATCH.log when detached)."""
    print(f"sparse-tui: {msg}", file=sys.stderr, flush=True)


def train_stacked(
    cfgs: list,
    *,
    device: torch.device | str = "cpu",
    loggers: list[RunLogger] | None = None,
    should_stop: Callable[[], str | None] | None = None,
    on_done: Callable[[int, RunResult], None] | None = None,
    on_step: Callable[[int], None] | None = None,
    kernel: str = "auto",
    graph: str | None = None,
    dtype: torch.dtype | None = None,
    notes: list[str] | None = None,
) -> list[RunResult]:
    """Train the runs ``cfgs`` (all with one ``group_key``) as one stack; one ``RunResult`` per run.

    The arguments are those of ``loop.train_stack``; raises ``ValueError`` when the runs cannot share a stack and
    ``StackFailed`` when its trial step fails."""
    if not cfgs:
        return []
    if not stackable(cfgs):
        raise ValueError("train_stacked: the runs do not share one group key (structure / optimiser / steps)")
    return train_stack(cfgs, device=device, loggers=loggers, should_stop=should_stop, on_done=on_done,
                       on_step=on_step, kernel=kernel, graph=graph, dtype=dtype, notes=notes)


def _train_group(store, recs, cfgs, dev, should_stop, notes: list[str] | None = None) -> None:
    """Train claimed runs (one alone via train_run, several as one stack) and record each as it ends. A stack
    whose trial step fails is split in halves (the reason is logged and kept in each run's summary)."""
    import traceback

    from sparse_tui.training.trainer import train_run

    notes = list(notes or [])
    done: set[int] = set()

    def finish(i: int, res: RunResult) -> None:
        done.add(i)
        store.finish(
            recs[i].run_id, res.status, reason=res.reason, plateau_step=res.plateau_step, summary=res.summary,
            step=res.step,
        )

    loggers = [RunLogger(store, r.run_id) for r in recs]
    try:
        if len(recs) == 1:
            finish(0, train_run(cfgs[0], device=dev, logger=loggers[0], should_stop=should_stop, notes=notes))
        else:
            train_stacked(cfgs, device=dev, loggers=loggers, should_stop=should_stop, on_done=finish, notes=notes)
    except StackFailed as e:
        free_cached_memory(dev)
        if len(recs) == 1:  # train_run already retried it on the plain kernel: nothing smaller to try
            summary = {"notes": notes + [f"trial step failed on every kernel ({e.reason})"]}
            store.finish(recs[0].run_id, "failed", reason=f"trial step failed: {e.reason}", summary=summary)
            say(f"run {recs[0].run_id} failed: its trial step failed on every kernel ({e.reason})")
            return
        half = len(recs) // 2
        why = f"a stack of {len(recs)} runs failed its trial step ({e.reason}); split into {half} + {len(recs) - half}"
        say(f"{why}: {', '.join(r.run_id for r in recs)}")
        _train_group(store, recs[:half], cfgs[:half], dev, should_stop, notes + [why])
        _train_group(store, recs[half:], cfgs[half:], dev, should_stop, notes + [why])
    except KeyboardInterrupt:
        for i, r in enumerate(recs):
            if i not in done:
                store.finish(r.run_id, "interrupted", reason="interrupted")
        raise
    except Exception as e:  # a crash is recorded, never lost
        tb = traceback.format_exc(limit=6)
        for i, r in enumerate(recs):
            if i not in done:
                summary = {"traceback": tb, **({"notes": notes} if notes else {})}
                store.finish(r.run_id, "failed", reason=f"{type(e).__name__}: {e}", summary=summary)
        free_cached_memory(dev)
