"""The tasks, and ``make_task``, which builds the one a run's config names.

Each kind is an entry of the task registry, ``presets.TASKS`` (config class, implementation, dims, probes;
docs/ARCHITECTURE.md, "A new task"):

* ``linreg``: single-location linear regression (paper §2.1, App. A.2, App. B.1) -> ``linreg.LinearRegression``
* ``recall``: in-context associative recall (paper §3.1, App. C.1; blog 000) -> ``recall.AssociativeRecall``
* ``nearest``: similar-content extraction (blog 003) -> ``nearest.NearestToken``

Seeding (see ``_common``): each task derives independent streams from ``cfg.seed`` for its per-run constants,
its training batches and its fixed test set.
"""

from __future__ import annotations

import pkgutil

import torch

from sparse_tui.presets.schema import RunConfig
from sparse_tui.presets.tasks import task_kind
from sparse_tui.tasks.base import Task


def make_task(cfg: RunConfig, device: torch.device | str = "cpu") -> Task:
    """Build the task of ``cfg.task`` (its kind's registry entry) on ``device`` (``'auto'`` = cuda if available),
    seeded by ``cfg.seed``."""
    cls = task_kind(cfg.task.kind).task
    if isinstance(cls, str):  # "module:Class", imported when the first run of the kind is built
        cls = pkgutil.resolve_name(cls)
    return cls(cfg.task, cfg.seed, device)
