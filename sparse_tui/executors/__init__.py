"""Executors: where the stacks of a batch are trained (docs/ARCHITECTURE.md, "A new executor"). ``local`` (the
default) is this machine, in-process or with worker processes (executors/local.py); ``ray`` is a Ray cluster
(executors/ray_executor.py; docs/CLUSTER.md). An executor is one module plus one entry in ``EXECUTORS``; what it
implements is ``runner.Executor``, and ``runner.ExecutorOptions`` is the one value that names it and its flags.

Whatever the executor, the coordinator claims the stacks (``runner.claim_next_stack``), every stack is trained by
the one training loop (training/loop.py) through ``runner.train_claimed``, and the coordinator's process alone
writes the run store on its machine. Nothing here imports Ray, torch or Textual: ``ray`` is imported when the Ray
executor
connects (``sparse-tui --help`` stays light; tests/test_cli.py).
"""

from __future__ import annotations

from typing import Mapping

from sparse_tui.executors.base import ExecutorError, Option
from sparse_tui.executors.local import LocalExecutor
from sparse_tui.executors.ray_executor import RayExecutor
from sparse_tui.lifecycle.runner import Executor, ExecutorOptions

EXECUTORS: dict[str, type] = {"local": LocalExecutor, "ray": RayExecutor}


def declared() -> dict[str, tuple[str, Option]]:
    """Every executor's own flags (its class's ``OPTIONS``): flag -> (the executor that declares it, its Option)."""
    return {o.flag: (kind, o) for kind, cls in EXECUTORS.items() for o in getattr(cls, "OPTIONS", ())}


def options(kind: str = "local", values: Mapping[str, str | None] | None = None) -> ExecutorOptions:
    """The ``--executor`` flag and the executors' own flags (``values``: flag -> value, None where not given) as one
    value, checked without importing anything heavy; ``ExecutorError`` (one line, naming the flag) for a bad value."""
    if kind not in EXECUTORS:
        raise ExecutorError(f"--executor: must be one of {', '.join(EXECUTORS)}, got {kind!r}")
    given = {flag: v for flag, v in (values or {}).items() if v is not None}
    owners = declared()
    for flag, value in given.items():
        owner, opt = owners[flag]
        if owner != kind:
            raise ExecutorError(f"{flag}: only with --executor {owner}")
        if opt.check is not None:
            opt.check(value)
    return ExecutorOptions(kind, tuple(given.items()))


def executor_for(opts: ExecutorOptions) -> Executor:
    """The executor ``opts`` names (cheap: nothing is joined or imported until its ``preflight``)."""
    return EXECUTORS[opts.kind](opts)
