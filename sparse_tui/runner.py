"""Running a preset: the one code path behind ``sparse-tui run --headless`` and the TUI's launch action.

1. ``launch`` records every run of the expanded preset in the store as ``queued`` (one *batch* per launch).
2. ``run_batch`` trains the batch: in this process (``workers == 1``), or by starting worker processes
   (``python -m sparse_tui worker BATCH``) that each claim queued runs from the store until none is left.
   A worker that dies (even by SIGKILL) leaves only its current run behind, which readers then show as failed
   (``RunStore.reap``); the other workers carry on and the coordinator starts a replacement for the queued runs.
3. ``detach`` starts the coordinator itself as a process in its own session (``python -m sparse_tui work BATCH``),
   so quitting the TUI or losing the SSH connection does not stop training.

Ctrl-C / SIGTERM mark the running runs ``interrupted`` (everything logged is kept) and the queued ones
``interrupted`` (reason: never started); the command then exits 130. A cancel request from the TUI sets the run's
``cancel_requested`` flag, which the trainer sees at its next heartbeat and ends the run as ``cancelled``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sparse_tui.presets import LoadedPreset, expand
from sparse_tui.store import TERMINAL, RunStore


@dataclass
class StopFlag:
    """Set by signal handlers; polled by the training loop between steps."""

    status: str | None = None

    def __call__(self) -> str | None:
        return self.status


def install_signal_handlers(flag: StopFlag) -> None:
    def handler(signum, frame):  # noqa: ARG001
        if flag.status is None:
            flag.status = "interrupted"
        else:  # a second Ctrl-C: stop waiting
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, handler)


def launch(loaded: LoadedPreset, store: RunStore) -> tuple[str, list[str]]:
    """Record the runs of a preset as queued. Returns (batch_id, run_ids)."""
    specs = expand(loaded)
    return store.create_runs(specs)


def work(
    store: RunStore,
    batch_id: str,
    *,
    device: str | None = None,
    should_stop: Callable[[], str | None] | None = None,
    group: int = 1,
) -> int:
    """Claim and train queued runs of ``batch_id`` until none is left. Returns the number of runs trained.

    ``group > 1``: claim up to ``group`` runs of one shape at a time and train them stacked (training/stacked.py)."""
    import torch

    if group > 1:
        from sparse_tui.training.stacked import work_stacked

        return work_stacked(store, batch_id, device=device, should_stop=should_stop, max_group=group)

    from sparse_tui.presets import config_from_json
    from sparse_tui.training.trainer import RunLogger, library_versions, resolve_device, train_run

    n = 0
    while True:
        if should_stop is not None and should_stop():
            return n
        # Resolve the device from the next run's config before claiming it (one batch = one preset device).
        queued = store.runs(batch_id=batch_id, status="queued", reap=False)
        if not queued:
            return n
        want = device or queued[-1].config.get("train", {}).get("device", "auto")
        try:
            dev = resolve_device(want)
        except RuntimeError as e:
            rec = store.claim_next(batch_id, device=want, versions={})
            if rec is not None:
                store.finish(rec.run_id, "failed", reason=str(e))
            continue
        rec = store.claim_next(batch_id, device=str(dev), versions=library_versions(dev))
        if rec is None:
            return n
        cfg = config_from_json(rec.config)
        logger = RunLogger(store, rec.run_id)
        try:
            res = train_run(cfg, device=dev, logger=logger, should_stop=should_stop)
            store.finish(
                rec.run_id,
                res.status,
                reason=res.reason,
                plateau_step=res.plateau_step,
                summary=res.summary,
                step=res.step,
            )
        except KeyboardInterrupt:
            store.finish(rec.run_id, "interrupted", reason="interrupted")
            raise
        except Exception as e:  # a crash is recorded, never lost
            tb = traceback.format_exc(limit=6)
            store.finish(rec.run_id, "failed", reason=f"{type(e).__name__}: {e}", summary={"traceback": tb})
            if isinstance(e, torch.cuda.OutOfMemoryError if hasattr(torch.cuda, "OutOfMemoryError") else ()):
                torch.cuda.empty_cache()
        n += 1


def worker_command(
    store: RunStore, batch_id: str, *, device: str | None, threads: int | None, group: int = 1
) -> list[str]:
    cmd = [sys.executable, "-m", "sparse_tui", "worker", batch_id, "--runs-dir", str(store.runs_dir)]
    if device:
        cmd += ["--device", device]
    if threads:
        cmd += ["--threads", str(threads)]
    if group > 1:
        cmd += ["--group", str(group)]
    return cmd


def run_batch(
    store: RunStore,
    batch_id: str,
    *,
    workers: int = 1,
    device: str | None = None,
    flag: StopFlag | None = None,
    poll: Callable[[], None] | None = None,
    group: int = 1,
) -> None:
    """Train every queued run of a batch, in-process or with ``workers`` worker processes (stacks of up to
    ``group`` same-shape runs each)."""
    flag = flag or StopFlag()
    try:
        if workers <= 1:
            work(store, batch_id, device=device, should_stop=flag, group=group)
        else:
            _run_with_workers(store, batch_id, workers=workers, device=device, flag=flag, poll=poll, group=group)
    finally:
        if flag.status:
            store.end_queued(batch_id, flag.status, "never started")


def _run_with_workers(
    store: RunStore,
    batch_id: str,
    *,
    workers: int,
    device: str | None,
    flag: StopFlag,
    poll: Callable[[], None] | None,
    group: int = 1,
) -> None:
    cores = os.cpu_count() or 1
    threads = max(1, cores // workers)
    procs: list[subprocess.Popen] = []
    restarts = 0

    def spawn() -> None:
        procs.append(subprocess.Popen(worker_command(store, batch_id, device=device, threads=threads, group=group)))

    n_queued = len(store.runs(batch_id=batch_id, status="queued", reap=False))
    for _ in range(min(workers, max(1, n_queued))):
        spawn()
    while True:
        time.sleep(0.3)
        if poll is not None:
            poll()
        alive = [p for p in procs if p.poll() is None]
        if flag.status:
            for p in alive:
                try:
                    p.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
            for p in alive:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
            store.reap()
            return
        queued = store.runs(batch_id=batch_id, status="queued", reap=True)
        if not alive and not queued:
            return
        # A worker that died while runs are still queued is replaced (bounded, so a crash loop cannot spin).
        if queued and len(alive) < min(workers, len(queued)) and restarts < 4 * workers:
            restarts += 1
            spawn()
        procs = [p for p in procs if p.poll() is None]


def detach(
    store: RunStore, batch_id: str, *, workers: int = 0, device: str | None = None, group: int = 0,
    schedule: str = "auto",
) -> int:
    """Start ``python -m sparse_tui work BATCH`` in its own session, logging to RUNS_DIR/logs/BATCH.log.

    ``workers`` / ``group`` 0: the coordinator asks the sweep scheduler (``schedule``) when the runs start.
    Returns the coordinator's pid. The process survives the caller (TUI quit, SSH hangup)."""
    logs = store.runs_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "sparse_tui", "work", batch_id, "--runs-dir", str(store.runs_dir)]
    cmd += ["--workers", str(workers), "--group", str(group), "--schedule", schedule]
    if device:
        cmd += ["--device", device]
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
    return proc.pid


def start_detached(
    store: RunStore,
    specs: list,
    *,
    schedule: str = "auto",
    workers: int | None = None,
    device: str | None = None,
) -> tuple[str, list[str], int]:
    """Record ``specs`` as a new batch and start it in the background; the coordinator asks the sweep scheduler
    for the plan when the runs start (it may time a few training steps: ``scheduler.plan``), and writes it as
    the first line of the batch's log.

    The one launch path of ``sparse-tui run --detach`` and of the console. Returns (batch_id, run_ids, pid)."""
    from sparse_tui.training.scheduler import SCHEDULES

    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    batch_id, ids = store.create_runs(specs)
    pid = detach(store, batch_id, workers=workers or 0, device=device, schedule=schedule)
    return batch_id, ids, pid


def batch_specs(store: RunStore, batch_id: str) -> list:
    """The queued runs of a batch as objects with a ``.config`` (what ``scheduler.plan`` reads)."""
    from types import SimpleNamespace

    from sparse_tui.presets import config_from_json

    return [SimpleNamespace(config=config_from_json(r.config))
            for r in store.runs(batch_id=batch_id, status="queued", reap=False)]


def batch_done(store: RunStore, batch_id: str) -> bool:
    return all(r.status in TERMINAL for r in store.runs(batch_id=batch_id))


def log_path(store: RunStore, batch_id: str) -> Path:
    return store.runs_dir / "logs" / f"{batch_id}.log"
