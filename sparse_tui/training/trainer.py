"""One run, whatever its model: ``train_run`` trains a Transformer or toy run with the one training loop
(training/loop.py, a stack of one) and integrates an ODE run (models/ode.py), recorded the same way. The run
lifecycle (how a run's end is recorded, the trial-step fallbacks, interrupts, crashes, a full disk) is the
runner's (runner.train_claimed); this module trains and returns. Also the device and provenance helpers every
executor uses (``library_versions``; devices are resolved by devices.py).
"""

from __future__ import annotations

import platform
from typing import Callable

import numpy
import torch

from sparse_tui.base.version import __version__
from sparse_tui.presets.schema import RunConfig
from sparse_tui.training.loop import train_stack
from sparse_tui.training.runlog import RunLogger, RunResult
from sparse_tui.training.tracker import Tracker


def library_versions(device: torch.device | None = None) -> dict:
    """The versions a run's record keeps (Python, torch, numpy, sparse-tui, the platform, torch's intra-op threads
    and the checkout's commit (None from a wheel: base/provenance.py); on a GPU also CUDA and the card's name). The
    runner adds ``stack``: how many runs trained stacked with it (issue 42: what a record says produced it)."""
    from sparse_tui.base.provenance import commit

    v = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "sparse_tui": __version__,
        "platform": platform.platform(),
        "threads": torch.get_num_threads(),
        "commit": commit(),
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
    on_done: Callable[[int, RunResult], None] | None = None,
    kernel: str = "auto",
    graph: str | None = None,
    notes: list[str] | None = None,
) -> RunResult:
    """Train one run to completion (or divergence / interruption) and return its result.

    Every evaluation is written through ``logger`` as it happens, so another process can follow the run live.
    ``on_done(0, result)``, ``kernel``, ``graph`` and ``notes`` are those of ``loop.train_stack``, which raises
    ``StackFailed`` when the run's trial step fails (the runner then retries it on the plain kernel)."""
    logger = logger or RunLogger()
    device = torch.device(device) if isinstance(device, str) else device
    if cfg.model.kind == "ode":
        return _integrate_ode_run(cfg, logger, on_done)
    return train_stack([cfg], device=device, loggers=[logger], should_stop=should_stop, on_step=on_step,
                       on_done=on_done, kernel=kernel, graph=graph, notes=notes)[0]


def _integrate_ode_run(cfg: RunConfig, logger: RunLogger, on_done=None) -> RunResult:
    """Record the reduced gradient-flow dynamics (paper Eqs. 12-14 / 17-21) as an ordinary run: its points go
    through the same ``tracker.Tracker`` as a trained run's evaluations (one rule for "best", one summary)."""
    from sparse_tui.models.ode import simulate_run

    tracker = Tracker(cfg, logger)
    tracker.begin({}, on_done)
    sim = simulate_run(cfg)
    steps = [int(s) for s in sim.steps]
    series = {k: [float(x) for x in v] for k, v in sim.metrics.items()}
    logger.series(steps, series)
    for i, step in enumerate(steps):
        tracker.record(step, {k: v[i] for k, v in series.items()})
    if sim.plateau_exact:  # the flow's exact crossing, between evaluations (else the detector's, on the grid)
        tracker.det.step = sim.plateau_step
    tracker.context.update(integrator_steps=sim.integrator_steps, notes=sim.notes)
    return tracker.end("finished", steps[-1] if steps else 0)
