"""The learning-rate schedule of a run (``[train]`` warmup_steps, schedule, min_lr_ratio): a plain function of the
step and the config, shared by the training loop and the integrated ODE runs (models/ode.py)."""

from __future__ import annotations

import math


def lr_factor(step: int, cfg) -> float:
    """Learning-rate multiplier at ``step`` (1-based): linear warmup, then constant / linear / cosine decay."""
    t = cfg.train
    if t.warmup_steps and step <= t.warmup_steps:
        return step / t.warmup_steps
    if t.schedule == "constant":
        return 1.0
    span = max(1, t.steps - t.warmup_steps)
    frac = min(1.0, max(0.0, (step - t.warmup_steps) / span))
    lo = t.min_lr_ratio
    if t.schedule == "linear":
        return lo + (1 - lo) * (1 - frac)
    return lo + (1 - lo) * 0.5 * (1 + math.cos(math.pi * frac))


def lr_table(cfgs: list, steps: int) -> list[list[float]]:
    """The learning rate of each run at steps 1..steps: ``[steps][M]`` (built once, so a step costs no host work)."""
    return [[c.train.lr * lr_factor(s, c) for c in cfgs] for s in range(1, steps + 1)]
