"""Terminal plots of run curves with plotext (used by ``sparse-tui show``; the TUI uses textual-plotext).

plotext's log axes fail on values <= 0, so ``positive`` filters them out before plotting.
"""

from __future__ import annotations

import math
from typing import Sequence


PALETTE = ["cyan", "orange", "green", "magenta", "blue", "red", "yellow", "gray"]


def positive(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    """Drop points that a log axis cannot show (non-finite or <= 0)."""
    pts = [(x, y) for x, y in zip(xs, ys) if y is not None and math.isfinite(y) and y > 0]
    return [p[0] for p in pts], [p[1] for p in pts]


def finite(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    pts = [(x, y) for x, y in zip(xs, ys) if y is not None and math.isfinite(y)]
    return [p[0] for p in pts], [p[1] for p in pts]


def downsample(xs: Sequence[float], ys: Sequence[float], n: int) -> tuple[list[float], list[float]]:
    """At most ``n`` points, evenly spaced in index, always keeping the last one."""
    if len(xs) <= n or n < 2:
        return list(xs), list(ys)
    idx = sorted({round(i * (len(xs) - 1) / (n - 1)) for i in range(n)})
    return [xs[i] for i in idx], [ys[i] for i in idx]


def chart(
    series: dict[str, tuple[Sequence[float], Sequence[float]]],
    *,
    title: str,
    log_y: bool = False,
    width: int = 100,
    height: int = 18,
    vline: float | None = None,
    xlabel: str = "step",
) -> str:
    """Render one chart of several named series to a string."""
    import plotext as plt

    plt.clear_figure()
    plt.plotsize(width, height)
    plt.theme("clear")
    any_data = False
    for i, (name, (xs, ys)) in enumerate(series.items()):
        xs, ys = positive(xs, ys) if log_y else finite(xs, ys)
        xs, ys = downsample(xs, ys, 2 * width)
        if not xs:
            continue
        any_data = True
        plt.plot(xs, ys, label=name, marker="braille", color=PALETTE[i % len(PALETTE)])
    if not any_data:
        return f"{title}: no data yet"
    if log_y:
        plt.yscale("log")
    if vline is not None:
        plt.vline(vline, "red")  # the plateau step
    plt.title(title)
    plt.xlabel(xlabel)
    return plt.build()
