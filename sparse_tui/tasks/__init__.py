"""The three tasks and ``make_task``.

* ``linreg``: single-location linear regression (paper §2.1, App. A.2, App. B.1) -> ``LinearRegression``
* ``recall``: in-context associative recall (paper §3.1, App. C.1; blog 000) -> ``AssociativeRecall``
* ``nearest``: similar-content extraction (blog 003) -> ``NearestToken``

Seeding (see ``_common``): each task derives independent streams from ``cfg.seed`` for its per-run constants,
its training batches and its fixed test set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Batch, Task
from .linreg import LinearRegression
from .nearest import NearestToken
from .recall import AssociativeRecall

if TYPE_CHECKING:
    import torch

    from ..presets import RunConfig

__all__ = ["Batch", "Task", "LinearRegression", "AssociativeRecall", "NearestToken", "make_task"]


def make_task(cfg: "RunConfig", device: "torch.device | str" = "cpu") -> Task:
    """Build the task named by ``cfg.task.kind`` on ``device`` (``'auto'`` = cuda if available), seeded by
    ``cfg.seed``."""
    t = cfg.task
    if t.kind == "linreg":
        return LinearRegression(t, cfg.seed, device)
    if t.kind == "recall":
        return AssociativeRecall(t, cfg.seed, device)
    if t.kind == "nearest":
        return NearestToken(t, cfg.seed, device)
    raise ValueError(f"unknown task kind {t.kind!r}")
