"""The one run lifecycle: every step of a run's life, whoever starts it (``run --headless``, ``run --detach``, the
console, ``resume``). docs/ARCHITECTURE.md shows the steps and who calls them.

1. ``Executor.preflight`` checks what cannot be seen in the preset alone, before anything is written: the device
   exists (``--device cuda`` without CUDA is a usage error) and the largest run fits its memory (``resources.check``).
2. ``store.create_runs`` records the runs of the expanded preset as ``queued`` (one *batch*), together
   with the batch's **coordinator** (pid and host) in the same transaction.
3. ``Executor.plan`` asks the sweep scheduler how to train them (workers, threads, stacks).
4. ``coordinate`` trains the batch through an ``Executor`` (executors/: this machine, in this process or with
   worker processes (``python -m sparse_tui worker BATCH``) that each **claim** queued runs (``work``) until none is
   left; or a Ray cluster), every executor claiming its stacks with ``claim_next_stack``.
   A run that has a checkpoint continues from it (training/checkpoint.py).
5. ``train_claimed`` is the one place that decides how a run ended, whoever trains it (this process, a worker
   process, a Ray task), over a ``store.RunSink``: each run gets one terminal status (``record_end`` →
   ``store.finish``, which never rewrites one): finished, diverged, failed (a crash, with its reason; a full disk is
   recorded as "disk full"), interrupted, cancelled. The trial-step fallbacks (smaller stacks, the plain kernel) live
   there too.
6. **Reaping** (``store.reap``, called by every reader: ``runs``, ``show``, ``export``, the console) fails a running
   run whose process is gone, and the queued runs of a batch none of whose coordinators is alive. On the same
   host liveness is the pid (a stopped or slow process is alive); the heartbeat's age counts for other hosts only.
7. ``resume`` checks the runs (``check_resumable``: a writable store, configs that still validate, checkpoints that
   are data), joins the batch's coordinators (one still alive keeps training too), puts failed, interrupted and
   left-queued runs back in the queue and goes through 3-5 again.

A batch starts one of two ways: ``run_headless`` trains it in this process (``run --headless``, ``resume``,
``reproduce`` and a detached batch's coordinator, ``work``); ``start_detached`` records it and ``detach`` starts its
coordinator as a process in its own session (``python -m sparse_tui work BATCH``), so quitting the TUI or losing the
SSH connection does not stop training.

Ctrl-C / SIGTERM / SIGHUP: the training loop sees the stop at its next step and the run ends ``interrupted``
(everything logged is kept, and its checkpoint); a step or an evaluation that takes longer than ``STOP_GRACE``
seconds is cut short by an alarm, so the process always ends within about 2 s. Queued runs end ``interrupted``
(reason: never started) unless another coordinator of the batch is alive; the command exits 130. A cancel request
from the TUI sets the run's ``cancel_requested`` flag, which the trainer sees at its next heartbeat and ends the
run as ``cancelled``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Protocol, Sequence

from sparse_tui.base.devices import resolve
from sparse_tui.lifecycle.signals import StopFlag, _training_section, install_signal_handlers
from sparse_tui.store import RunRecord, RunSink, RunStore, StoreError, is_disk_full
from sparse_tui.training.checkpoint import remove_stale_temporaries
from sparse_tui.training.runlog import RunLogger

if TYPE_CHECKING:
    import torch

    from sparse_tui.presets.loading import RunSpec
    from sparse_tui.presets.schema import RunConfig


@dataclass(frozen=True)
class ExecutorOptions:
    """Where a batch trains, as one value: the ``--executor`` flag (``kind``, a key of ``executors.EXECUTORS``) and
    the values of the executor's own flags (``values``: (flag, value) pairs; the executor declares its flags in its
    ``OPTIONS``). It travels unchanged from the CLI or the console through ``detach`` (as flags: ``flags()``) to the
    detached coordinator (``sparse-tui work``). A new executor's option is one ``Option`` in its own class."""

    kind: str = "local"
    values: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.values, str) or any(not isinstance(v, tuple) or len(v) != 2 for v in self.values):
            raise TypeError(f"ExecutorOptions.values: (flag, value) pairs, got {self.values!r}")

    def get(self, flag: str) -> str | None:
        """The value given to ``flag`` (``"--ray-address"``), None when none was."""
        return dict(self.values).get(flag)

    def flags(self) -> list[str]:
        """The command-line flags that give this value back (none for the default, ``local``)."""
        if self.kind == "local":
            return []
        return ["--executor", self.kind, *(x for pair in self.values for x in pair)]


class Executor(Protocol):
    """What the runner and the CLI ask of an executor (``executors.EXECUTORS[kind](options)``; docs/ARCHITECTURE.md,
    "A new executor"). Making one is cheap and imports nothing heavy; only ``preflight`` may reach out (Ray: join
    the cluster as a driver).

    The lifecycle around it is the runner's, whatever the executor: the runs are recorded (``store.create_runs``)
    after ``preflight``, ``runner.coordinate`` makes this process a coordinator of the batch and calls
    ``run_batch`` through ``runner.run_batch``, which ends the queued runs when the batch is stopped. An executor
    claims its stacks with ``claim_next_stack`` and trains each through ``train_claimed`` (the one training loop,
    the one place a run's end is recorded); only the coordinator's process writes the store."""

    options: ExecutorOptions

    def probe(self) -> str | None:
        """None, or the one line why it cannot be used now (nothing heavy imported, nothing written)."""

    def where(self) -> str:
        """Where the runs train, for people: "this machine", "the Ray cluster (auto)"."""

    def preflight(self, specs: list, device: str | None, source: str, *, detached: bool = False) -> None:
        """Refuse (``ExecutorError``, one line) a batch of ``specs`` it cannot train, before anything is written;
        ``device``: the ``--device`` flag; ``source`` names the preset; ``detached``: a detached coordinator trains."""

    def plan(self, specs: list, schedule: str, workers: int, device: str | None,
             say: Callable[[str], None]) -> tuple[int, int]:
        """(workers, runs per stack) for ``specs`` (``workers`` > 0: the user's), said in one line through ``say``."""

    def describe(self, workers: int) -> str:
        """The batch's header line: where it trains, with ``workers`` from ``plan``."""

    def run_batch(self, store: RunStore, batch_id: str, *, workers: int, device: str | None, flag: StopFlag,
                  poll: Callable[[], None] | None, group: int) -> None:
        """Train every queued run of ``batch_id`` until none is left or ``flag`` says stop (``flag.status``; the
        executor may set it, e.g. on Ctrl-C); ``poll`` is called as it waits (the progress display)."""


# -- 4. claim and train -------------------------------------------------------------------------------------------


def work(
    store: RunStore,
    batch_id: str,
    *,
    device: str | None = None,
    should_stop: Callable[[], str | None] | None = None,
    group: int = 1,
) -> int:
    """Claim and train queued runs of ``batch_id`` on this machine until none is left (``claim_next_stack``, then
    ``train_claimed``). Returns the number of runs trained.

    ``group > 1``: claim up to ``group`` runs of one shape at a time (and as many as fit the device memory) and
    train them as one stack; the stacks are said on stderr before the first."""
    from sparse_tui.training.scheduler import device_budget
    from sparse_tui.training.trainer import library_versions

    def here(want: str) -> tuple[Any, int | None, dict]:
        dev = resolve(want)
        return dev, device_budget(dev) if group > 1 else None, library_versions(dev)

    n = 0
    while should_stop is None or not should_stop():
        stack = claim_next_stack(store, batch_id, group=group, device=device, place=here, say_plan=n == 0)
        if stack is None:
            return n
        train_claimed(store, *stack, should_stop)
        n += len(stack[0])
    return n


def claim_next_stack(store: RunStore, batch_id: str, *, group: int, device: str | None,
                     place: Callable[[str], tuple[Any, int | None, dict]], say_plan: bool = False
                     ) -> tuple[list[RunRecord], list[RunConfig], Any] | None:
    """Claim the next stack of ``batch_id``'s queued runs (``next_stack``), the one rule of every executor: (their
    records, their configs, their device); None when none is left. A run whose stored config no longer validates is
    recorded failed with the reason (``stored_configs``). ``place(want)`` says where a stack whose first run wants
    the device ``want`` (``device``, the ``--device`` flag, or its ``train.device``) trains: (device, a stack's
    memory budget in bytes or None, the library versions to record); its ``RuntimeError`` (no such device) fails
    that run. ``say_plan``: say the stacks the batch will form first (``plan_lines``; group > 1)."""
    planned = not say_plan
    while True:
        queued = [r for r in store.runs(batch_id=batch_id, status="queued", reap=False) if not r.cancel_requested]
        if not queued:
            return None
        cfgs, bad = stored_configs(queued)
        for rec in store.claim_runs(list(bad), device=device or "-", versions={}) if bad else []:
            record_end(store, rec.run_id, "failed", reason=bad[rec.run_id])
        queued = [r for r in queued if r.run_id in cfgs]
        if not queued:
            continue
        first = min(queued, key=lambda r: r.position).run_id
        want = device or cfgs[first].train.device
        try:
            dev, budget, versions = place(want)
        except RuntimeError as e:
            for rec in store.claim_runs([first], device=want, versions={}):
                record_end(store, rec.run_id, "failed", reason=str(e))
            continue
        if group > 1 and not planned:
            planned = True
            for line in plan_lines(queued, cfgs, group, budget):
                say(line)
        ids = next_stack(queued, cfgs, group, budget)
        stacked = {**versions, "stack": len(ids)} if versions else versions  # stacked or sequential (issue 42)
        recs = store.claim_runs(ids, device=str(dev), versions=stacked)
        if recs:
            return recs, [cfgs[r.run_id] for r in recs], dev


def stored_configs(recs: list[RunRecord]) -> tuple[dict, dict]:
    """The configs of stored runs by run id, and for those that no longer validate (a run stored by another
    version of sparse-tui, or edited by hand) the one-line reason by run id."""
    from pydantic import ValidationError

    from sparse_tui.presets.errors import format_validation_error
    from sparse_tui.presets.loading import config_from_json

    cfgs, bad = {}, {}
    for r in recs:
        try:
            cfgs[r.run_id] = config_from_json(r.config)
        except ValidationError as e:
            lines = format_validation_error(e, f"run {r.run_id}: stored config")
            more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
            bad[r.run_id] = f"{lines[0]}{more}; this sparse-tui cannot train it"
    return cfgs, bad


def next_stack(queued: list[RunRecord], cfgs: dict, group: int, budget: int | None) -> list[str]:
    """The run ids of the next stack to train from the ``queued`` runs of a batch (``cfgs``: their configs by run
    id): the first queued run and those of the following ones that share its ``grouping.group_key`` and its part
    of ``scheduler.partition`` (at most ``group`` runs, as many as fit ``budget`` bytes (None: no memory limit),
    and no more padding than ``scheduler.PADDING_CAP``). The one stack-forming rule of every executor
    (``claim_next_stack``)."""
    from sparse_tui.training.grouping import group_key
    from sparse_tui.training.scheduler import MAX_GROUP, partition

    ordered = sorted(queued, key=lambda r: r.position)
    first = ordered[0].run_id
    key = group_key(cfgs[first])
    if group <= 1 or key is None:
        return [first]
    pick = [first] + [r.run_id for r in ordered[1:] if group_key(cfgs[r.run_id]) == key]
    parts = partition([cfgs[i] for i in pick], max_group=group or MAX_GROUP, budget_bytes=budget)
    return [pick[i] for i in next(p for p in parts if 0 in p)]


def plan_lines(queued: list[RunRecord], cfgs: dict, group: int, budget: int | None) -> list[str]:
    """The batch log's view of the stacks ``next_stack`` will form from ``queued`` (one line per stack)."""
    from sparse_tui.training.scheduler import MAX_GROUP, describe_groups, group_runs

    cl = [cfgs[r.run_id] for r in sorted(queued, key=lambda r: r.position)]
    return describe_groups(cl, group_runs(cl, max_group=group or MAX_GROUP, budget_bytes=budget))


def train_claimed(store: RunSink, recs: Sequence[Any], cfgs: Sequence[RunConfig], dev: torch.device,
                  should_stop: Callable[[], str | None] | None, notes: Sequence[str] | None = None) -> None:
    """Train claimed runs (one alone, several as one stack) and record how each of them ended: the one place that
    decides it, for every executor. Each run is recorded once, as soon as it ends (``record_end``); a run that
    ended (diverged, stopped after its plateau, cancelled) keeps its record whatever happens to the others after.

    * A stack whose trial step fails (``loop.StackFailed``: an unsupported kernel, out of memory) is split in
      halves and each half tried again, down to one run, which is retried once on the plainest attention kernel
      with no CUDA graph; a run that fails that too is recorded failed. Each fallback is said on stderr (the batch
      log) and kept in the runs' summaries (``notes``).
    * Ctrl-C / SIGTERM (``KeyboardInterrupt``): the runs still training are recorded ``interrupted at step N``;
      the interrupt goes on up (the batch stops).
    * A crash: the runs still training are recorded ``failed`` with the error and its traceback; the batch goes on.
    * A full disk: the runs still training are recorded ``failed`` (``disk full at step N``) where the disk
      allows, and ``DiskFull`` stops the batch, saying which runs could not be recorded.

    ``store`` is where the records go (``RunSink``): the ``RunStore``, or a Ray worker's channel to it
    (executors/channel.py). ``recs``: the claimed runs' records (anything with a ``run_id``: a Ray worker has no
    store to read them from). ``notes`` go into every run's summary (e.g. that a Ray retry resumed it)."""
    import torch

    from sparse_tui.training.cudagraph import free_cached_memory

    notes_of = {r.run_id: list(notes or []) for r in recs}
    ended: set[str] = set()
    lost: list[str] = []  # ended, but the disk did not let the end be recorded

    def end(rec, status: str, **kw) -> None:
        if rec.run_id in ended:
            return
        if not record_end(store, rec.run_id, status, **kw):  # (an error here leaves it to the crash handler)
            lost.append(rec.run_id)
        ended.add(rec.run_id)

    _training_section(True)
    try:
        _train_or_split(store, recs, cfgs, dev, should_stop, notes_of, ended, end)
    except KeyboardInterrupt:
        _training_section(False)
        # the runs of a stack step together: the furthest step any of them reported is where they all stopped
        step = max((_step(store, r.run_id) for r in recs if r.run_id not in ended), default=0)
        for r in recs:
            end(r, "interrupted", reason=f"interrupted at step {step}", step=step)
        raise
    except Exception as e:  # a crash is recorded, never lost
        _training_section(False)
        full = is_disk_full(e)
        tb = None if full else traceback.format_exc(limit=6)
        for r in recs:
            if r.run_id in ended:
                continue
            if full:
                end(r, "failed", reason=f"disk full at step {_step(store, r.run_id)}")
            else:
                extra = {"notes": notes_of[r.run_id]} if notes_of[r.run_id] else {}
                end(r, "failed", reason=f"{type(e).__name__}: {e}", summary={"traceback": tb, **extra})
        if isinstance(e, getattr(torch.cuda, "OutOfMemoryError", ())):
            free_cached_memory(dev)
        if full or lost:  # whatever failed first, a store that cannot record the runs' ends stops the batch
            raise DiskFull(store.runs_dir, getattr(recs[0], "batch_id", None), lost) from None
    else:
        if lost:  # every run ended, but the disk did not let some of the ends be recorded
            raise DiskFull(store.runs_dir, getattr(recs[0], "batch_id", None), lost)
    finally:
        _training_section(False)


def _train_or_split(store, recs, cfgs, dev, should_stop, notes_of: dict, ended: set, end,
                    kernel: str = "auto", graph: str | None = None) -> None:
    """One try at training ``recs`` as one stack (``train_run`` for one run, ``loop.train_stack`` for several),
    then the trial-step fallbacks of ``train_claimed``."""
    from sparse_tui.training.cudagraph import free_cached_memory
    from sparse_tui.training.grouping import stackable
    from sparse_tui.training.loop import StackFailed, train_stack
    from sparse_tui.training.trainer import train_run

    def done(i: int, res) -> None:
        end(recs[i], res.status, reason=res.reason, plateau_step=res.plateau_step, summary=res.summary, step=res.step)

    notes = notes_of[recs[0].run_id]
    loggers = [RunLogger(store, r.run_id) for r in recs]
    try:
        if len(recs) == 1:
            train_run(cfgs[0], device=dev, logger=loggers[0], should_stop=should_stop, on_done=done, kernel=kernel,
                      graph=graph, notes=notes)
        elif not stackable(cfgs):
            raise ValueError("the runs do not share one stack (grouping.group_key: structure, optimiser, steps)")
        else:
            train_stack(cfgs, device=dev, loggers=loggers, should_stop=should_stop, on_done=done, kernel=kernel,
                        graph=graph, notes=notes)
    except StackFailed as e:
        free_cached_memory(dev)
        left = [i for i, r in enumerate(recs) if r.run_id not in ended]
        recs, cfgs = [recs[i] for i in left], [cfgs[i] for i in left]
        if not recs:
            return
        if len(recs) > 1:
            half = len(recs) // 2
            why = (f"a stack of {len(recs)} runs failed its trial step ({e.reason}); split into {half} +"
                   f" {len(recs) - half}")
            say(f"{why}: {', '.join(r.run_id for r in recs)}")
            for r in recs:
                notes_of[r.run_id] = notes + [why]
            _train_or_split(store, recs[:half], cfgs[:half], dev, should_stop, notes_of, ended, end)
            _train_or_split(store, recs[half:], cfgs[half:], dev, should_stop, notes_of, ended, end)
        elif kernel != "math" or graph != "off":
            why = (f"trial step failed on the default kernels ({e.reason}); trained on the plain attention kernel,"
                   " eager")
            say(f"run {recs[0].run_id}: {why}")
            notes_of[recs[0].run_id] = notes + [why]
            _train_or_split(store, recs, cfgs, dev, should_stop, notes_of, ended, end, kernel="math", graph="off")
        else:
            summary = {"notes": notes + [f"trial step failed on every kernel ({e.reason})"]}
            end(recs[0], "failed", reason=f"trial step failed: {e.reason}", summary=summary)
            say(f"run {recs[0].run_id} failed: its trial step failed on every kernel ({e.reason})")


def say(msg: str) -> None:
    """A line for the batch log (the coordinator's stderr goes to RUNS_DIR/logs/BATCH.log when detached)."""
    print(f"sparse-tui: {msg}", file=sys.stderr, flush=True)


class DiskFull(StoreError):
    """The run store's disk is full: training stops. The message says which runs could not be recorded."""

    def __init__(self, runs_dir: Path, batch_id: str | None = None, lost: list[str] | None = None):
        self.lost = list(lost or [])
        where = ("the runs that were training are recorded as failed (reason: disk full)" if not self.lost else
                 f"{len(self.lost)} run(s) could not be recorded ({', '.join(self.lost[:4])}"
                 f"{', ...' if len(self.lost) > 4 else ''}: readers show them failed once this process ends)")
        super().__init__(f"{runs_dir}: disk full; {where}; free space and run 'sparse-tui resume"
                         f" {batch_id or 'BATCH'}'")


def _step(store: RunSink, run_id: str) -> int:
    try:
        return store.get(run_id).step
    except (StoreError, sqlite3.Error):
        return 0


def record_end(store: RunSink, run_id: str, status: str, **kw: Any) -> bool:
    """Record that a run ended, and how: ``store.finish`` (which never rewrites a terminal status), surviving a full
    disk: retried without the summary (a smaller write), then given up (readers then reap the run as dead, with
    '(disk full)' in its reason). Every end of a run goes through here (the Ray coordinator's too). Returns False
    when the disk did not allow the record."""
    try:
        store.finish(run_id, status, **kw)
    except sqlite3.Error as e:
        if not is_disk_full(e):
            raise
        try:
            store.finish(run_id, status, reason=kw.get("reason"), step=kw.get("step"))
        except sqlite3.Error:
            return False
    return True


def coordinate(store: RunStore, batch_id: str, executor: Executor, **how) -> None:
    """Record this process as one of ``batch_id``'s coordinators and train every queued run of it through
    ``executor`` (``run_batch``, with its keywords ``how``); it stops being one when it returns. Checkpoint
    temporaries left by killed processes are removed first."""
    store.add_coordinator(batch_id)
    remove_stale_temporaries(store.runs_dir)
    try:
        run_batch(store, batch_id, executor, **how)
    finally:
        try:
            store.drop_coordinator(batch_id)
        except sqlite3.Error:  # a full disk: the row stays, and counts as gone once this process is
            pass


def run_batch(
    store: RunStore,
    batch_id: str,
    executor: Executor,
    *,
    workers: int = 1,
    device: str | None = None,
    flag: StopFlag | None = None,
    poll: Callable[[], None] | None = None,
    group: int = 1,
) -> None:
    """Train every queued run of a batch through ``executor`` (executors/: this machine, with ``workers``
    processes and stacks of up to ``group`` same-shape runs, or a Ray cluster), and end the queued runs it leaves
    when the batch stops (Ctrl-C, a full disk): the lifecycle is the same whatever the executor."""
    flag = flag or StopFlag()
    try:
        executor.run_batch(store, batch_id, workers=workers, device=device, flag=flag, poll=poll, group=group)
    except DiskFull:
        end_unstarted(store, batch_id, "failed", "never started: disk full")
        raise
    finally:
        if flag.status:
            end_unstarted(store, batch_id, flag.status, "never started")


def end_unstarted(store: RunStore, batch_id: str, status: str, reason: str) -> int:
    """End the queued runs of a batch this coordinator stops training (Ctrl-C, a full disk), unless another
    coordinator of the batch is alive (a ``resume`` of it, or the process a ``resume`` joined): that one trains
    them. Returns how many were ended (0 also when the disk did not allow it)."""
    try:
        if store.other_coordinators_alive(batch_id):
            return 0
        return store.end_queued(batch_id, status, reason)
    except sqlite3.Error as e:
        if not is_disk_full(e):
            raise
        return 0


def detach(
    store: RunStore, batch_id: str, *, workers: int = 0, device: str | None = None, group: int = 0,
    schedule: str = "auto", executor: ExecutorOptions | None = None,
) -> int:
    """Start ``python -m sparse_tui work BATCH`` in its own session, logging to RUNS_DIR/logs/BATCH.log.

    ``workers`` / ``group`` 0: the coordinator asks the sweep scheduler (``schedule``) when the runs start.
    ``executor``: where the coordinator trains the stacks (None: this machine), handed over as its flags.
    Returns the coordinator's pid. The process survives the caller (TUI quit, SSH hangup)."""
    logs = store.runs_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "sparse_tui", "work", batch_id, "--runs-dir", str(store.runs_dir)]
    cmd += ["--workers", str(workers), "--group", str(group), "--schedule", schedule]
    if device:
        cmd += ["--device", device]
    cmd += executor.flags() if executor is not None else []
    log = open(logs / f"{batch_id}.log", "ab")
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        close_fds=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    log.close()
    store.hand_over(batch_id, proc.pid)  # the launcher (recorded so far) hands the batch to the process
    return proc.pid


def start_detached(
    store: RunStore,
    specs: list,
    *,
    schedule: str = "auto",
    workers: int | None = None,
    device: str | None = None,
    executor: ExecutorOptions | None = None,
) -> tuple[str, list[str], int]:
    """Record ``specs`` as a new batch and start it in the background; the coordinator asks the sweep scheduler
    for the plan when the runs start (it may time a few training steps: ``scheduler.plan``), and writes it as
    the first line of the batch's log. ``executor``: where it trains (None: this machine); the caller has probed
    it (``Executor.probe``) or run its preflight before calling.

    The one launch path of ``sparse-tui run --detach`` and of the console. Returns (batch_id, run_ids, pid)."""
    from sparse_tui.training.scheduler import SCHEDULES

    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    batch_id, ids = store.create_runs(specs)
    pid = detach(store, batch_id, workers=workers or 0, device=device, schedule=schedule, executor=executor)
    return batch_id, ids, pid


def run_headless(
    store: RunStore,
    executor: Executor,
    specs: Sequence[RunSpec] = (),
    *,
    batch_id: str | None = None,
    resume: Sequence[str] = (),
    schedule: str = "auto",
    workers: int = 0,
    group: int = 0,
    device: str | None = None,
    preflight: bool = False,
    say: Callable[[str], None] = say,
    progress: Callable[[str], ContextManager[Any]] | None = None,
) -> tuple[str, list[str] | None, str | None]:
    """Train a batch in this process, the twin of ``start_detached``: ``run --headless`` and ``reproduce``
    (``specs``: a new batch), ``resume`` (``batch_id`` and the runs to ``resume``, re-queued) and a detached batch's
    coordinator, ``work`` (``batch_id`` alone; with ``preflight``: the executor's, whose refusal ends the queued runs
    ``failed``). Otherwise the caller ran the preflight before opening the store. ``workers`` / ``group`` 0: as the
    executor plans; the plan and the batch's header go to ``say``; ``progress(batch_id)`` is shown while it trains.
    Ctrl-C / SIGTERM stop it (the runs training end ``interrupted``, the queued ones too unless another coordinator
    is alive). Returns (batch_id, the runs asked for (None: all of the batch), the stop or None)."""
    run_ids = list(resume) or None
    if batch_id is not None and not resume:
        store.add_coordinator(batch_id)
        specs = batch_specs(store, batch_id)
        if preflight:
            try:
                executor.preflight(specs, device, f"batch {batch_id}")
            except Exception as e:  # refused (a token) or gone since the launcher's check: the runs say why
                end_unstarted(store, batch_id, "failed", f"never started: {e}")
                raise
    if specs and (workers == 0 or group == 0):
        workers, planned = executor.plan(list(specs), schedule, workers, device, say=say)
        group = group or planned
    if batch_id is None:
        batch_id, run_ids = store.create_runs(list(specs))
    elif resume:
        requeue_for_resume(store, batch_id, list(resume))
    flag = StopFlag()
    install_signal_handlers(flag)
    group = max(1, group)
    n = len(store.runs(batch_id=batch_id, status="queued", reap=False))
    stacks = f", stacks of up to {group} run(s)" if group > 1 else ""
    say(f"batch {batch_id}: {n} run(s), {executor.describe(workers)}{stacks}, store {store.path}")
    try:
        with progress(batch_id) if progress is not None else contextlib.nullcontext():
            coordinate(store, batch_id, executor, workers=workers, device=device, flag=flag, group=group)
    except KeyboardInterrupt:
        flag.status = flag.status or "interrupted"
        end_unstarted(store, batch_id, "interrupted", "never started")
    return batch_id, run_ids, flag.status


def requeue_for_resume(store: RunStore, batch_id: str, run_ids: list[str], coordinator: int | None = None) -> list[str]:
    """Make this process (or ``coordinator``) one of the batch's coordinators and put ``run_ids`` back in the
    queue. A coordinator still alive keeps coordinating: both train the queued runs."""
    store.add_coordinator(batch_id, coordinator)
    return store.requeue(run_ids)


def batch_specs(store: RunStore, batch_id: str) -> list:
    """The queued runs of a batch as objects with a ``.config`` (what ``scheduler.plan`` reads)."""
    cfgs, _ = stored_configs(store.runs(batch_id=batch_id, status="queued", reap=False))
    return [SimpleNamespace(config=c) for c in cfgs.values()]


def log_path(store: RunStore, batch_id: str) -> Path:
    return store.runs_dir / "logs" / f"{batch_id}.log"
