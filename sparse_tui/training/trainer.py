"""Training one run: ``train_run``, the entry point every caller uses (headless CLI, TUI, worker processes).

A Transformer or toy run is trained by the one training loop (training/loop.py) as a stack of one model; an ODE
run is integrated (models/ode.py) and recorded the same way. The step is a plain function of the stack's parameters
and a batch, with data made on the device and no host synchronisation except where a metric is read.

A NaN or infinite training loss stops the run with status ``diverged`` at that step (checked every step on CPU, at
every evaluation on GPUs to avoid per-step syncs). ``should_stop`` is polled every step; when it returns a
status (``interrupted`` / ``cancelled``) the run ends with that status and keeps everything logged so far.
"""

from __future__ import annotations

import platform
import sys
import time
from typing import Callable

import torch

from sparse_tui.presets import RunConfig, eval_steps  # noqa: F401  (eval_steps: re-exported for callers)
from sparse_tui.training.loop import (  # noqa: F401  (re-exported: the loop's helpers, by their old names)
    attention_snapshot,
    cpu_float_mode,
    denormals_flushed,
    StackFailed,
    snapshot_steps,
    train_stack,
)
from sparse_tui.training.cudagraph import free_cached_memory
from sparse_tui.training.runlog import HEARTBEAT_SECONDS, RunLogger, RunResult  # noqa: F401
from sparse_tui.training.schedule import lr_factor  # noqa: F401




def resolve_device(name: str) -> torch.device:
    """``auto`` → first CUDA device if available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {name} requested but CUDA is not available")
    return dev


def library_versions(device: torch.device | None = None) -> dict:
    import numpy

    import sparse_tui

    v = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "sparse_tui": sparse_tui.__version__,
        "platform": platform.platform(),
    }
    if device is not None and device.type == "cuda":
        v["cuda"] = torch.version.cuda
        v["gpu"] = torch.cuda.get_device_name(device)
    return v


def train_run(
    cfg: RunConfig,
    *,
    device: torch.device | str = "cpu",
    logger: RunLogger | None = None,
    should_stop: Callable[[], str | None] | None = None,
    on_step: Callable[[int], None] | None = None,
    notes: list[str] | None = None,
) -> RunResult:
    """Train one run to completion (or divergence / interruption) and return its result.

    Every evaluation is written through ``logger`` as it happens, so another process can follow the run live.
    If the run's trial step fails on the default kernels (loop.trial_step), it is retried once with the plainest
    attention kernel (explicit softmax) and no CUDA graph; the reason is printed and kept in ``summary["notes"]``.
    """
    logger = logger or RunLogger()
    device = torch.device(device) if isinstance(device, str) else device
    if cfg.model.kind == "ode":
        return _integrate_ode_run(cfg, logger)
    kw = dict(device=device, loggers=[logger], should_stop=should_stop, on_step=on_step)
    try:
        return train_stack([cfg], notes=notes, **kw)[0]
    except StackFailed as e:
        if e.oom:
            free_cached_memory(device)
        why = f"trial step failed on the default kernels ({e.reason}); trained on the plain attention kernel, eager"
        print(f"sparse-tui: run {getattr(logger, 'run_id', None) or cfg.name}: {why}", file=sys.stderr, flush=True)
        return train_stack([cfg], notes=list(notes or []) + [why], kernel="math", graph="off", **kw)[0]


def _integrate_ode_run(cfg: RunConfig, logger: RunLogger) -> RunResult:
    """Record the reduced gradient-flow dynamics (paper Eqs. 12-14 / 17-21) as an ordinary run."""
    from sparse_tui.models.ode import simulate_run

    t0 = time.perf_counter()
    sim = simulate_run(cfg)
    steps = [int(s) for s in sim.steps]
    logger.series(steps, {k: [float(x) for x in v] for k, v in sim.metrics.items()})
    last = {k: float(v[-1]) for k, v in sim.metrics.items()}
    plateau = sim.plateau_step
    if not sim.plateau_exact:  # a metric the flow cannot watch exactly: use the evaluation-grid crossing
        from sparse_tui.training.plateau import plateau_step

        series = sim.metrics.get(cfg.plateau.metric)
        plateau = None if series is None else plateau_step(steps, list(series), cfg.plateau.mode, cfg.plateau.value)
    best = {}
    for k, v in sim.metrics.items():
        if k.endswith("loss"):
            best[k] = float(min(v))
    elapsed = time.perf_counter() - t0
    summary = {
        "final": last,
        "best": best,
        "steps_done": steps[-1] if steps else 0,
        "wall_seconds": elapsed,
        "integrator_steps": sim.integrator_steps,
        "notes": sim.notes,
    }
    return RunResult("finished", None, plateau, summary, steps[-1] if steps else 0)


def python_info() -> str:
    return f"{sys.executable} {platform.python_version()}"
