"""How a sweep's runs are spread over processes and devices.

``choose_workers`` picks the number of worker processes for ``sparse-tui run --workers auto``.
"""

from __future__ import annotations

from sparse_tui.presets import RunSpec


def choose_workers(specs: list[RunSpec]) -> int:
    """Worker processes for a batch. One process trains the runs one after another."""
    return 1
