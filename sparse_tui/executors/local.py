"""The ``local`` executor (the default): this machine trains the batch, in the coordinator's process
(``runner.work``) or in worker processes it starts (``python -m sparse_tui worker BATCH``), as the sweep scheduler
plans (training/scheduler.py, docs/PERFORMANCE.md)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from typing import Callable

from sparse_tui.base.devices import DeviceError, resolve
from sparse_tui.executors.base import BEAT_SECONDS, ExecutorError
from sparse_tui.lifecycle import runner
from sparse_tui.lifecycle.signals import StopFlag
from sparse_tui.store import RunStore


class LocalExecutor:
    """This machine (``--executor local``)."""

    def __init__(self, options: runner.ExecutorOptions = runner.ExecutorOptions()):
        self.options = options

    def probe(self) -> str | None:
        return None

    def where(self) -> str:
        return "this machine"

    def preflight(self, specs: list, device: str | None, source: str, *, detached: bool = False) -> None:
        """The device of ``specs`` exists and the largest run fits its memory (``resources.check``).
        ``device`` is the ``--device`` flag (None: each run's ``train.device``)."""
        from sparse_tui.presets.resources import ResourceError, check

        wanted: dict[str, list] = {}
        for spec in specs:
            wanted.setdefault(device or spec.config.train.device, []).append(spec.config)
        for want, cfgs in wanted.items():
            where = "--device" if device else f"{source}: train.device"
            if want == "cpu":  # no torch import for a CPU-only batch
                resolved = "cpu"
            else:
                try:
                    dev = resolve(want)
                except DeviceError as e:
                    raise ExecutorError(f"{where}: {e}") from None
                resolved = "cpu" if dev.type == "mps" else str(dev)  # no memory query for mps: it shares the CPU's
            try:
                check(cfgs, resolved, source)
            except ResourceError as e:
                raise ExecutorError(str(e)) from None

    def plan(self, specs: list, schedule: str, workers: int, device: str | None,
             say: Callable[[str], None]) -> tuple[int, int]:
        """The sweep scheduler's plan (``workers`` > 0 overrides its worker count), said through ``say``; this
        process's torch threads are set when it trains in-process. The one planning step of ``run --headless``, of
        detached coordinators (``work``) and of ``resume``."""
        from sparse_tui.training.scheduler import plan

        the_plan = plan(specs, schedule, device)
        workers = workers or the_plan.workers
        say(the_plan.describe())
        if workers == 1 and the_plan.threads:  # in-process training: the plan's thread count
            import torch

            torch.set_num_threads(the_plan.threads)
        return workers, the_plan.group

    def describe(self, workers: int) -> str:
        return f"{max(1, workers)} worker(s)"

    def run_batch(self, store: RunStore, batch_id: str, *, workers: int = 1, device: str | None = None,
                  flag: StopFlag, poll: Callable[[], None] | None = None, group: int = 1) -> None:
        """In this process (``workers`` <= 1), or with ``workers`` worker processes (stacks of up to ``group``
        same-shape runs each) that it replaces when they die and stops on ``flag``."""
        if workers <= 1:
            runner.work(store, batch_id, device=device, should_stop=flag, group=group)
            return
        cmd = [sys.executable, "-m", "sparse_tui", "worker", batch_id, "--runs-dir", str(store.runs_dir),
               "--threads", str(max(1, (os.cpu_count() or 1) // workers)), "--group", str(group)]
        cmd += ["--device", device] if device else []
        restarts = 0
        n_queued = len(store.runs(batch_id=batch_id, status="queued", reap=False))
        procs = [subprocess.Popen(cmd) for _ in range(min(workers, max(1, n_queued)))]
        last_beat = time.monotonic()
        while True:
            time.sleep(0.3)
            if poll is not None:
                poll()
            if time.monotonic() - last_beat > BEAT_SECONDS:
                last_beat = time.monotonic()
                try:
                    store.beat_batch(batch_id)
                except sqlite3.Error:
                    pass
            alive = [p for p in procs if p.poll() is None]
            if flag.status:
                for p in alive:
                    try:
                        p.send_signal(signal.SIGTERM)
                    except ProcessLookupError:
                        pass
                for p in alive:
                    try:
                        p.wait(timeout=5)
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
                procs.append(subprocess.Popen(cmd))
            procs = [p for p in procs if p.poll() is None]
