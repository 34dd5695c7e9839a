"""Plateau length (paper App. D.1): the first evaluated step at which a threshold is crossed.

Three modes (``[plateau]`` in a preset):
    fraction  metric <= value * (metric at step 0)   (App. D.1: test loss to 0.2 of its initial value)
    below     metric <= value                        (an absolute loss)
    above     metric >= value                        (accuracy; App. D.1 uses 5% for associative recall)
The plateau is ``None`` (empty in tables) when the threshold is never crossed; such runs are *censored* in fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence


@dataclass
class PlateauDetector:
    """Streaming detector: feed (step, value) pairs in step order; ``step`` holds the first crossing."""

    mode: str = "fraction"
    value: float = 0.2
    initial: float | None = None
    step: int | None = None

    def threshold(self) -> float | None:
        if self.mode == "fraction":
            return None if self.initial is None else self.value * self.initial
        return self.value

    def update(self, step: int, metric: float) -> int | None:
        """Feed one evaluation; returns the plateau step once crossed (and keeps it)."""
        if metric is None or not math.isfinite(metric):
            return self.step
        if self.initial is None:
            self.initial = metric
            if self.mode == "fraction":
                return self.step  # the initial value defines the threshold; it cannot cross it
        if self.step is not None:
            return self.step
        thr = self.threshold()
        crossed = metric >= thr if self.mode == "above" else metric <= thr
        if crossed:
            self.step = step
        return self.step


def plateau_step(steps: Sequence[int], values: Sequence[float], mode: str = "fraction", value: float = 0.2
                 ) -> int | None:
    """The plateau length of a whole series (see ``PlateauDetector``)."""
    det = PlateauDetector(mode=mode, value=value)
    for s, v in zip(steps, values):
        det.update(s, v)
    return det.step
