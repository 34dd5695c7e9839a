"""The sweep scheduler: how a batch's runs are spread over processes, threads and stacks on a device.

A sweep is many small runs. Trained one at a time they are dominated by per-step overhead, so ``plan`` picks one
of three schedules (``sparse-tui run --schedule auto|sequential|processes|stacked``):

* ``sequential``: one process trains the runs one after another (torch's default thread count; a lone run on a
  CPU gets the idle cores, ``resources.lone_run_threads``).
* ``processes``: one worker process per idle core, one torch thread each; every worker claims runs from the
  store and trains them alone. On CPUs this pays for small models (docs/PERFORMANCE.md), which do not use
  several threads well. Whether it pays is measured, not assumed: ``auto`` times a few training steps of a
  typical run of the batch with one thread and with one thread per idle core (``measure_thread_speedup``) and
  keeps one process with all those threads when that is predicted to finish first (large models, e.g. the
  paper's 4-layer d_model 256 Transformer, use the threads almost perfectly). Two threads (or two processes)
  on cores other processes keep busy oversubscribe them, so a busy machine (fewer than 2 idle cores, measured
  over 0.3 s from /proc/stat) gets a single single-thread process.
* ``stacked``: runs that can share a stack (``grouping.group_key``: same structure, optimiser kind, batch size
  and step count; any seed, lr, schedule, clipping, weight decay, betas, data, and on Transformers any width,
  sequence length or vocabulary, padded exactly) are trained together as one native stack of models
  (models/stack.py, training/loop.py). On GPUs this is the default: one process, stacks as large as fit the device
  memory (``group_runs``, padded shapes counted), split further if a trial step fails. On CPUs stacking is slower
  (stacked attention tensors fall out of the caches; measured in docs/PERFORMANCE.md), so ``auto`` never stacks on
  a CPU.

Every run still gets its own record, metrics, plateau step and attention snapshots, as if trained alone.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

from sparse_tui.base import devices
from sparse_tui.presets.loading import RunSpec
from sparse_tui.presets.resources import MEMORY_FRACTION, dims, lone_run_threads, step_bytes
from sparse_tui.presets.schema import RunConfig
from sparse_tui.training.flops import stack_flops, step_flops
from sparse_tui.training.grouping import group_key, padded_config

SCHEDULES = ("auto", "sequential", "processes", "stacked")

# Upper bound on models per stack: past this, a step is already large enough to fill a GPU.
MAX_GROUP = 256
# Seconds a worker process needs before its first step (interpreter, torch import, store): charged to the
# ``processes`` schedule when ``auto`` compares it with one multi-threaded process.
WORKER_START_SECONDS = 2.5


@dataclass
class Plan:
    """How to train a batch: ``workers`` processes with ``threads`` torch threads each (None = torch default),
    each training stacks of at most ``group`` runs (1 = every run alone)."""

    schedule: str
    workers: int
    threads: int | None
    group: int
    reason: str

    def describe(self) -> str:
        th = "default" if self.threads is None else str(self.threads)
        return (
            f"schedule {self.schedule}: {self.workers} worker(s) x {th} thread(s), up to {self.group} run(s) per "
            f"stack ({self.reason})"
        )


def cpu_cores() -> int:
    """Cores this process may run on (the affinity mask, which containers restrict, else the CPU count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _device_type(specs: list[RunSpec], device: str | None) -> str:
    want = device or (specs[0].config.train.device if specs else "auto")
    if want == "auto":
        return devices.resolve(want).type
    return "cuda" if want.startswith("cuda") else want


def _cpu_times() -> tuple[float, float] | None:
    """(idle, total) jiffies summed over all CPUs, from /proc/stat; None where unavailable."""
    try:
        with open("/proc/stat") as fh:
            vals = [float(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0.0)  # idle + iowait
    return idle, sum(vals[:8])


def idle_cores(cores: int | None = None, window: float = 0.3) -> int:
    """Cores other processes leave idle, measured now: the idle share of all CPUs over ``window`` seconds
    (/proc/stat) times the usable cores, rounded; the 1-minute load average where /proc/stat is missing.

    Measured on a shared 2-core machine (docs/PERFORMANCE.md): with the cores already busy, a second worker or a
    second thread slows everything down (threads wait for each other at every op), so a busy machine gets one
    single-thread process. (The load average is a poor guide: it lags by a minute and counts our own runs that
    just ended.)"""
    cores = cores or cpu_cores()
    a = _cpu_times()
    if a is not None:
        time.sleep(window)
        b = _cpu_times()
        if b is not None and b[1] > a[1]:
            share = (b[0] - a[0]) / (b[1] - a[1])  # idle share of all the machine's CPUs
            total = os.cpu_count() or cores
            return max(0, min(cores, int(round(share * total))))
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - not Unix
        return cores
    return max(0, min(cores, cores - int(round(load))))


def measure_thread_speedup(
    cfg: RunConfig, threads: int, steps: int = 3, rounds: int = 2, budget: float = 0.6
) -> tuple[float, float]:
    """Seconds per training step of ``cfg``'s model on the CPU with one torch thread and with ``threads``, timed now
    (the best of ``rounds`` blocks of ``steps`` steps each, the two settings alternated so that drift hits both).
    Large models get fewer steps per block, so that the timed part stays near ``budget`` seconds.

    The step of ``train_run`` itself (``loop.Prepared.step_fn``: a stack of one, the preset's optimiser,
    denormals flushed as the run would), on the run's own batches. Leaves the global RNG, the thread count and
    the float mode as it found them; trains nothing that is kept."""
    import torch

    from sparse_tui.training.loop import Prepared
    from sparse_tui.training.precision import cpu_float_mode

    old_threads, rng = torch.get_num_threads(), torch.get_rng_state()
    try:
        with cpu_float_mode(cfg.train.flush_denormal, torch.device("cpu")):
            prep = Prepared([cfg], torch.device("cpu"))
            prep.opt.set_lr(1, prep.lr_dev)

            def timed(th: int, n: int) -> float:
                torch.set_num_threads(th)
                t = time.perf_counter()
                for _ in range(n):
                    prep.step_fn()
                return (time.perf_counter() - t) / n

            warm = timed(1, 1) + timed(threads, 1)  # allocations, kernel choice
            n = max(1, min(steps, int(budget / max(1e-9, rounds * warm))))
            best = {1: math.inf, threads: math.inf}
            for _ in range(rounds):
                for th in (1, threads):
                    best[th] = min(best[th], timed(th, n))
            return best[1], best[threads]
    finally:
        torch.set_num_threads(old_threads)
        torch.set_rng_state(rng)


def _typical(cfgs: list[RunConfig]) -> RunConfig:
    """The run of median estimated size (``resources.step_bytes``): what the calibration times."""
    return sorted(cfgs, key=step_bytes)[len(cfgs) // 2]


def _cpu_plan(specs: list[RunSpec], cores: int, free: int, speedup: float | None) -> Plan:
    """``auto`` on a CPU with at least 2 idle cores and 2 runs: one single-thread process per idle core, or one
    process with one thread per idle core, whichever the measured thread speed-up predicts to finish first."""
    n = len(specs)
    w = min(free, n)
    cfgs = [s.config for s in specs]
    idle_txt = f"CPU, {free} of {cores} cores idle"
    if speedup is None and any(c.model.kind != "transformer" for c in cfgs):  # toy / ODE runs: too small for threads
        return Plan("processes", w, 1, 1, f"{idle_txt}: one single-thread process each")
    typical = _typical(cfgs)
    start = 0.0  # worker start-up, in units of one typical run on one thread
    if speedup is None:
        t1, tk = measure_thread_speedup(typical, free)
        speedup = t1 / tk
        start = WORKER_START_SECONDS / max(1e-9, typical.train.steps * t1)
        measured = f"; a typical step {t1 * 1e3:.0f} ms on 1 thread, {tk * 1e3:.0f} ms on {free} (x{speedup:.2f})"
    else:
        measured = f"; thread speed-up x{speedup:.2f} (given)"
    # Predicted wall time, in units of one typical run on one thread: `processes` trains ceil(n / w) runs per
    # worker after its start-up; one process with `free` threads trains the n runs `speedup` times faster each.
    procs = math.ceil(n / w) + start
    threads = n / max(speedup, 1e-9)
    if procs < threads:
        return Plan("processes", w, 1, 1, f"{idle_txt}: one single-thread process each{measured}")
    return Plan("sequential", 1, free, 1, f"{idle_txt}: one process with {free} threads{measured}")


def plan(
    specs: list[RunSpec],
    schedule: str = "auto",
    device: str | None = None,
    cores: int | None = None,
    idle: int | None = None,
    speedup: float | None = None,
) -> Plan:
    """The schedule for a batch of runs (see the module docstring). ``cores`` / ``idle`` override the measured
    core count and idle cores, ``speedup`` the measured thread speed-up (tests)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    n = len(specs)
    cores = cores or cpu_cores()
    dev = _device_type(specs, device)
    keys = [group_key(s.config) for s in specs]
    biggest = max((keys.count(k) for k in set(keys) if k is not None), default=0)
    if schedule == "auto":
        if n <= 1:
            if dev != "cpu" or not specs:
                return Plan("sequential", 1, None, 1, "one run")
            free = idle_cores(cores) if idle is None else idle
            th = lone_run_threads(specs[0].config, free)
            return Plan("sequential", 1, th, 1, f"one run; CPU, {free} of {cores} cores idle: {th} thread(s)")
        if dev == "cuda":
            if biggest >= 2:
                return Plan("stacked", 1, None, MAX_GROUP, f"GPU, up to {biggest} runs share shapes")
            return Plan("sequential", 1, None, 1, "GPU, no two runs share shapes")
        free = idle_cores(cores) if idle is None else idle
        if free >= 2:
            return _cpu_plan(specs, cores, free, speedup)
        return Plan("sequential", 1, 1, 1, f"CPU, {free} of {cores} cores idle: one single-thread process")
    if schedule == "sequential":
        return Plan("sequential", 1, None, 1, "requested")
    if schedule == "processes":
        w = max(1, min(cores, n))
        return Plan("processes", w, max(1, cores // w), 1, "requested")
    return Plan("stacked", 1, None, MAX_GROUP, "requested")


# --------------------------------------------------------------------------------------------------------------
# Grouping: by shape, then by memory and by the work padding wastes
# --------------------------------------------------------------------------------------------------------------


def stack_member_bytes(cfgs: list[RunConfig]) -> int:
    """Device memory one model of a stack of ``cfgs`` takes (``resources.step_bytes``, the one memory model): a
    stack pads every model to the largest shape."""
    return max(step_bytes(padded_config(cfgs)), max(step_bytes(c) for c in cfgs))

# A stack's predicted time per step is STACK_OVERHEAD_FLOPS plus its padded training FLOPs (every member at the
# stack's largest width and length): a stack pays a fixed cost per step (its kernels, each member's sampling) and
# then its FLOPs, padding included. Fitted on an H100 (torch 2.11, float32, graphed steps, 2026-11-26) over 18 stacks
# of the blog_nembd and Fig. 4 sweeps: 1.8 ms + 0.044 ms per GFLOP, i.e. about 40 GFLOP of overhead per stack.
# What it decides, measured on that card: the 24-run blog sweep trains fastest as one stack although padding to
# width 80 costs 2.9x its own FLOPs (6.1 ms per step, against 10.7 ms as 5 stacks each within 1.25x of their own
# FLOPs, and 13.9 ms as one stack per width); the Fig. 4 sweep as one stack per sequence length (13.0 ms against
# 14.4 ms as one stack padded to length 65: 1.7x its own FLOPs). docs/PERFORMANCE.md has the table.
STACK_OVERHEAD_FLOPS = 4.0e10
# An optional hard limit on padding: a stack may cost at most this many times its members' own FLOPs (None: the
# predicted time alone decides; ``partition(cap=...)``).
PADDING_CAP: float | None = None


def padding_overhead(cfgs: list[RunConfig]) -> float:
    """A stack's FLOPs over the sum of its members' own (1.0: no padding)."""
    return stack_flops(cfgs) / max(1.0, sum(step_flops(c) for c in cfgs))


def partition(cfgs: list[RunConfig], *, max_group: int = MAX_GROUP, budget_bytes: int | None = None,
              cap: float | None = None) -> list[list[int]]:
    """Indices of ``cfgs`` (one ``group_key``) split into stacks: each stack at most ``max_group`` runs, small
    enough for ``budget_bytes`` and, with a ``cap`` (default ``PADDING_CAP``), costing at most ``cap`` times its
    members' own FLOPs; among such splits the one predicted fastest (per stack ``STACK_OVERHEAD_FLOPS`` plus its
    padded FLOPs: runs share a stack when the padding costs less than another stack would). Runs are ordered by
    size, and stacks are runs of consecutive sizes (an exact dynamic programme over those); a run that fits
    nothing stacks alone."""
    cap = PADDING_CAP if cap is None else cap
    n = len(cfgs)
    if n <= 1:
        return [list(range(n))]
    order = sorted(range(n), key=lambda i: (step_flops(cfgs[i]), step_bytes(cfgs[i]), i))
    own = [step_flops(cfgs[i]) for i in order]
    best = [0.0] + [float("inf")] * n  # best[j]: cost of stacking order[:j]
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j - 1, max(-1, j - 1 - max_group), -1):  # the last stack is order[i:j]
            members = [cfgs[k] for k in order[i:j]]
            if j - i > 1:
                if budget_bytes is not None and (j - i) * stack_member_bytes(members) > budget_bytes:
                    break  # a larger stack only needs more memory
                if cap is not None and stack_flops(members) > cap * sum(own[i:j]):
                    continue
            cost = best[i] + STACK_OVERHEAD_FLOPS + stack_flops(members)
            if cost < best[j]:
                best[j], cut[j] = cost, i
    stacks, j = [], n
    while j > 0:
        stacks.append(sorted(order[cut[j]:j]))
        j = cut[j]
    return sorted(stacks, key=lambda g: g[0])


def group_runs(
    cfgs: list[RunConfig], *, max_group: int = MAX_GROUP, budget_bytes: int | None = None, cap: float | None = None
) -> list[list[int]]:
    """Indices of ``cfgs`` split into stacks: equal ``group_key`` (first-appearance order), then ``partition``
    (size, memory, padding). Runs that never stack (ODE) are groups of one."""
    by_key: dict = {}
    groups: list[list[int]] = []
    for i, c in enumerate(cfgs):
        k = group_key(c)
        if k is None:
            groups.append([i])
            continue
        by_key.setdefault(k, []).append(i)
    for idx in by_key.values():
        for part in partition([cfgs[i] for i in idx], max_group=max_group, budget_bytes=budget_bytes, cap=cap):
            groups.append([idx[k] for k in part])
    return sorted(groups, key=lambda g: g[0])


def describe_groups(cfgs: list[RunConfig], groups: list[list[int]]) -> list[str]:
    """One line per planned stack for the batch log: its runs, their widths and lengths, the padding overhead."""
    lines = []
    for g in groups:
        members = [cfgs[i] for i in g]
        if len(g) == 1:
            continue
        widths = sorted({c.model.d_model for c in members if c.model.kind == "transformer"})
        lens = sorted({dims(c)["seq_len"] for c in members})
        lines.append(f"stack of {len(g)} runs (d_model {'/'.join(map(str, widths)) or '-'}, length "
                     f"{'/'.join(map(str, lens))}): padded FLOPs x{padding_overhead(members):.2f} of their own")
    return lines


def device_budget(device) -> int | None:
    """Bytes a stack may plan to use on ``device``: ``resources.MEMORY_FRACTION`` of the free memory on CUDA; None
    on CPU."""
    import torch

    if getattr(device, "type", str(device)) != "cuda" or not torch.cuda.is_available():
        return None
    free, _total = torch.cuda.mem_get_info(device)
    return int(free * MEMORY_FRACTION)
