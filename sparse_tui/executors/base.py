"""What the executors share: their one-line error and their constants. What an executor is (``runner.Executor``)
and the value that names it (``runner.ExecutorOptions``) are the runner's, which asks them of it (docs/ARCHITECTURE.md,
"A new executor"). Nothing here imports anything of sparse_tui, Ray, torch or Textual."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

INSTALL_HINT = 'pip install "sparse-tui[ray]"'
BEAT_SECONDS = 5.0  # how often a coordinator beats its heartbeat (what other hosts judge it by)


@dataclass(frozen=True)
class Option:
    """A flag an executor declares for itself (its class's ``OPTIONS``): the commands that take ``--executor`` offer
    it (cli.common.executor_flags), ``executors.options`` checks it (``check``: raises ExecutorError, one line) and
    ``runner.ExecutorOptions`` carries its value to the executor, as harlequin's adapters declare their options."""

    flag: str  # "--ray-address"
    help: str
    check: Callable[[str], Any] | None = None


class ExecutorError(Exception):
    """An executor that cannot take a batch (Ray missing, an unreachable address, a device that is not there, a run
    too large for it): one line, naming the flag or the preset key; raised before anything is written."""
