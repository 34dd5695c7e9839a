"""The checks of ``sparse-tui doctor`` (cli/doctor.py imports this module when it runs): that this machine trains
correctly, with every schedule, before a real sweep.

It prints the device, the torch and CUDA versions, the free memory and whether a Ray cluster runs here (for
``--executor ray``, docs/CLUSTER.md; information only), then trains a tiny recall sweep (three runs
of mixed widths and sequence lengths, so that a stack has to pad) through the run store with each schedule:

* ``sequential``: one run at a time, eager (the reference);
* ``stacked``: the three runs as one stack (models/stack.py), eager;
* ``graphed``: the same stack with its training step captured as a CUDA graph (CUDA only).

Each schedule must finish every run without falling back (a trial-step fallback is reported as a failure here,
since it would make a sweep slower than it should be), and its final test losses must agree with the sequential
ones to 1e-3 relative. Exit status 0 when everything holds, 1 otherwise.
"""

from __future__ import annotations

import copy
import os
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Callable

from sparse_tui.base.devices import resolve as resolve_device
from sparse_tui.executors import ExecutorOptions, LocalExecutor, executor_for
from sparse_tui.executors.address import current_cluster
from sparse_tui.executors.base import INSTALL_HINT
from sparse_tui.lifecycle import runner
from sparse_tui.presets.resources import meminfo
from sparse_tui.store import RunStore

TOLERANCE = 1e-3  # relative, on each run's final test loss

_TINY = {
    "name": "doctor",
    "task": {"kind": "recall", "n_tokens": 16, "n_pairs": 3},
    "model": {"kind": "transformer", "n_layers": 2, "n_heads": 1, "d_model": 16},
    "train": {"lr": 3e-3, "batch_size": 16, "steps": 40},
    "eval": {"every": 20, "test_size": 64},
    "plateau": {"metric": "test/acc", "mode": "above", "value": 0.5},
}
# (seed, d_model, n_pairs, lr): mixed widths and lengths, so the stack pads
_RUNS = [(0, 16, 3, 3e-3), (1, 24, 5, 3e-3), (2, 16, 5, 1e-3)]


def tiny_configs(device: str, cuda_graph: str) -> list:
    from sparse_tui.presets.schema import RunConfig

    cfgs = []
    for seed, d, pairs, lr in _RUNS:
        raw = copy.deepcopy(_TINY)
        raw["seed"] = seed
        raw["model"]["d_model"] = d
        raw["task"]["n_pairs"] = pairs
        raw["train"].update(lr=lr, device=device, cuda_graph=cuda_graph)
        cfgs.append(RunConfig.model_validate(raw))
    return cfgs


def _memory(dev) -> str:
    import torch

    if dev.type == "cuda":
        free, total = torch.cuda.mem_get_info(dev)
        return f"{free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB"
    try:
        info = meminfo()
        return f"{info['MemAvailable'] / 2**30:.1f} GiB available of {info['MemTotal'] / 2**30:.1f} GiB"
    except (OSError, KeyError, ValueError, IndexError):
        return "unknown"


def _schedule(store, cfgs, group: int) -> tuple[float, list]:
    from sparse_tui.presets.loading import RunSpec

    specs = [RunSpec("doctor", "doctor.toml", c, {"seed": c.seed, "model.d_model": c.model.d_model}) for c in cfgs]
    batch, ids = store.create_runs(specs)
    t = time.perf_counter()
    runner.run_batch(store, batch, LocalExecutor(), workers=1, group=group)
    return time.perf_counter() - t, [store.get(i) for i in ids]


def ray_line() -> str:
    """Information, never a failure: the Ray extra's version and whether ``--executor ray`` (``auto``) would find a
    cluster on this machine (docs/CLUSTER.md). Ray is not imported."""

    try:
        version = metadata.version("ray")
    except metadata.PackageNotFoundError:
        return f"ray: not installed (optional, for --executor ray: {INSTALL_HINT})"
    problem = executor_for(ExecutorOptions("ray")).probe()
    if problem:
        return f"ray {version}; --executor ray: {problem}"
    return f"ray {version}; --executor ray (auto): the cluster at {current_cluster()} answers"


def diagnose(device: str = "auto", say: Callable[[str], None] = print) -> int:
    """Run the checks on ``device``; print a report through ``say``; return the exit status (0 = all good)."""
    import torch

    try:
        dev = resolve_device(device)
    except RuntimeError as e:
        say(f"FAIL device: {e}")
        return 1
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU ({os.cpu_count()} logical cores)"
    say(f"device: {dev} - {name}")
    say(f"torch {torch.__version__}, CUDA {torch.version.cuda or 'none (CPU build)'}; memory: {_memory(dev)}")
    say(ray_line())
    schedules = [("sequential", "off", 1), ("stacked", "off", 8)]
    if dev.type == "cuda":
        schedules.append(("graphed", "on", 8))
    failures = 0
    reference: list[float] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(Path(tmp) / "runs")
        for label, graph, group in schedules:
            cfgs = tiny_configs(str(dev), graph)
            try:
                wall, recs = _schedule(store, cfgs, group)
            except Exception as e:  # noqa: BLE001 - the report is the point
                say(f"FAIL {label}: {type(e).__name__}: {e}")
                failures += 1
                continue
            problems = [f"{r.seed}: {r.status} ({r.reason})" for r in recs if r.status != "finished"]
            problems += [f"{r.seed}: fell back ({r.summary['notes'][-1]})" for r in recs
                         if r.status == "finished" and r.summary.get("notes")]
            if group > 1:
                problems += [f"{r.seed}: not stacked" for r in recs
                             if r.status == "finished" and r.summary.get("stacked_with") != len(cfgs)]
            if graph == "on":
                problems += [f"{r.seed}: not graphed" for r in recs
                             if r.status == "finished" and not r.summary.get("cuda_graph")]
            losses = [r.summary.get("final", {}).get("test/loss", float("nan")) for r in recs]
            if reference is None and not problems:
                reference = losses
            elif reference is not None:
                for r, a, b in zip(recs, reference, losses):
                    if not abs(b - a) <= TOLERANCE * abs(a):
                        problems.append(f"{r.seed}: final test loss {b:.6g}, sequential {a:.6g}")
            steps = sum(c.train.steps for c in cfgs)
            head = f"{label:10s} {wall:6.2f} s  {steps / wall:7.1f} model-steps/s  final test losses " + ", ".join(
                f"{x:.5f}" for x in losses)
            if problems:
                failures += 1
                say(f"FAIL {head}")
                for p in problems:
                    say(f"     run seed {p}")
            else:
                say(f"ok   {head}")
        store.close()
    if dev.type != "cuda":
        say("graphed   skipped: CUDA graphs need a CUDA device")
    say("all checks passed" if not failures else f"{failures} check(s) failed")
    return 0 if not failures else 1
