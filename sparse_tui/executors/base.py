"""What an executor is: the one options value that names it, and the operations the CLI, the console and the
runner ask of it (docs/ARCHITECTURE.md, "A new executor"). Nothing here imports anything of sparse_tui, Ray, torch
or Textual: ``runner.detach`` turns the options back into command-line flags without importing an executor.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Callable, Protocol

INSTALL_HINT = 'pip install "sparse-tui[ray]"'
BEAT_SECONDS = 5.0  # how often a coordinator beats its heartbeat (what other hosts judge it by)


class ExecutorError(Exception):
    """An executor that cannot take a batch (Ray missing, an unreachable address, a device that is not there, a run
    too large for it): one line, naming the flag or the preset key; raised before anything is written."""


@dataclass(frozen=True)
class ExecutorOptions:
    """Where a batch trains, as one value: the ``--executor`` flag (``kind``, a key of ``executors.EXECUTORS``) and
    the executor's own flags, each field with its flag in ``metadata``. It travels unchanged from the CLI or the
    console through ``runner.detach`` (as flags: ``flags()``) to the detached coordinator (``sparse-tui work``).
    A new executor's option is one field here plus its flag on the commands that take ``--executor``."""

    kind: str = "local"
    address: str | None = field(default=None, metadata={"flag": "--ray-address"})  # ray: auto, local or HOST:PORT

    def flags(self) -> list[str]:
        """The command-line flags that give this value back (none for the default, ``local``)."""
        if self.kind == "local":
            return []
        out = ["--executor", self.kind]
        for f in fields(self):
            value = getattr(self, f.name)
            if "flag" in f.metadata and value is not None:
                out += [f.metadata["flag"], str(value)]
        return out


class Executor(Protocol):
    """What the runner and the CLI ask of an executor (``EXECUTORS[kind](options)``). Making one is cheap and
    imports nothing heavy; only ``preflight`` may reach out (Ray: join the cluster as a driver).

    The lifecycle around it is the runner's, whatever the executor: the runs are recorded (``store.create_runs``)
    after ``preflight``, ``runner.coordinate`` makes this process a coordinator of the batch and calls
    ``run_batch`` through ``runner.run_batch``, which ends the queued runs when the batch is stopped. Every run an
    executor trains goes through ``runner._train_claimed`` (the one training loop, the one place a run's end is
    recorded), and only the coordinator's process writes the store."""

    options: ExecutorOptions

    def probe(self) -> str | None:
        """Whether the executor can be used now, without importing anything heavy or writing anything: None, or
        the one-line problem (the console's check before a launch, ``doctor``)."""

    def where(self) -> str:
        """Where the runs train, for people: "this machine", "the Ray cluster (auto)"."""

    def preflight(self, specs: list, device: str | None, source: str, *, detached: bool = False) -> None:
        """Refuse (``ExecutorError``, one line) a batch of ``specs`` this executor cannot train, before anything is
        written. ``device`` is the ``--device`` flag (None: each run's ``train.device``); ``source`` names the
        preset in messages; ``detached``: a detached coordinator will train it (check what can be checked from
        here)."""

    def plan(self, specs: list, schedule: str, workers: int, device: str | None,
             say: Callable[[str], None]) -> tuple[int, int]:
        """(workers, runs per stack) for ``specs`` under ``schedule`` (``workers`` > 0: the user's number), said
        in one line through ``say`` (the batch log's first line)."""

    def describe(self, workers: int) -> str:
        """The batch's header line: where it trains, with ``workers`` from ``plan``."""

    def run_batch(self, store, batch_id: str, *, workers: int, device: str | None, flag: Callable[[], str | None],
                  poll: Callable[[], None] | None, group: int) -> None:
        """Train every queued run of ``batch_id`` until none is left or ``flag()`` says stop; ``poll`` is called
        as it waits (the progress display)."""
