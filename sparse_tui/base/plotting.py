"""Terminal plots of run curves with plotext (used by ``sparse-tui show``; the TUI uses textual-plotext).

plotext's log axes fail on values <= 0, so ``_plottable`` filters them out before plotting.
"""

from __future__ import annotations

import math
from typing import Sequence

PALETTE = ["cyan", "orange", "green", "magenta", "blue", "red", "yellow", "gray"]


def _plottable(xs: Sequence[float], ys: Sequence[float], log: bool) -> tuple[list[float], list[float]]:
    """The points a chart can show: finite values, and on a log axis only the positive ones."""
    pts = [(x, y) for x, y in zip(xs, ys) if y is not None and math.isfinite(y) and (y > 0 or not log)]
    return [p[0] for p in pts], [p[1] for p in pts]


def downsample(xs: Sequence[float], ys: Sequence[float], n: int) -> tuple[list[float], list[float]]:
    """At most ``n`` points, evenly spaced in index, always keeping the last one."""
    if len(xs) <= n or n < 2:
        return list(xs), list(ys)
    idx = sorted({round(i * (len(xs) - 1) / (n - 1)) for i in range(n)})
    return [xs[i] for i in idx], [ys[i] for i in idx]


def chart(series: dict[str, tuple[Sequence[float], Sequence[float]]], *, title: str, log_y: bool = False,
          width: int = 100, height: int = 18, vline: float | None = None,
          ylim: tuple[float, float] | None = None) -> str:
    """Render one chart of several named series to a string. ``ylim``: a fixed y range (an accuracy's [0, 1]: a
    flat 0.018-0.0195 on an auto range looked like a steep rise)."""
    import plotext as plt

    plt.clear_figure()
    plt.plotsize(width, height)
    plt.theme("clear")
    any_data = False
    for i, (name, (xs, ys)) in enumerate(series.items()):
        xs, ys = _plottable(xs, ys, log_y)
        xs, ys = downsample(xs, ys, 2 * width)
        if not xs:
            continue
        any_data = True
        plt.plot(xs, ys, label=name, marker="braille", color=PALETTE[i % len(PALETTE)])
    if not any_data:
        return f"{title}: no data yet"
    if log_y:
        plt.yscale("log")
    elif ylim is not None:
        plt.ylim(*ylim)
    if vline is not None:
        plt.vline(vline, "red")  # the plateau step
    plt.title(title)
    plt.xlabel("step")
    return plt.build()


def fmt_r2(r2: float) -> str:
    """R² with as many decimals as it takes not to round a fit that is not perfect up to 1 (0.99987, not 1.000)."""
    if r2 is None or not math.isfinite(r2):
        return "-"
    digits = 3
    while digits < 9 and r2 < 1.0 and round(r2, digits) >= 1.0:
        digits += 1
    return f"{r2:.{digits}f}"


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """Labels of one axis in one format: plain numbers with the decimals the step needs (0.25, 0.5, 0.75), or,
    when the values span decades or are very large or small, all in scientific notation (1e-06, 1e-05 ...; never
    "0.000001", never "360" beside "1.05e+03", never "83273.7")."""
    vals = [float(t) for t in ticks if t is not None and math.isfinite(t)]
    if not vals:
        return []
    big = max(abs(v) for v in vals)
    small = min((abs(v) for v in vals if v != 0), default=big)
    if big >= 1e5 or small < 1e-3 or (small > 0 and big / small >= 1e3):
        return [f"{m.rstrip('0').rstrip('.')}e{int(e)}" for m, e in (f"{v:.2e}".split("e") for v in vals)]
    if all(float(v).is_integer() for v in vals):
        return [str(int(v)) for v in vals]
    decimals = next((d for d in range(7) if all(abs(round(v, d) - v) <= 1e-9 * max(1.0, big) for v in vals)), 6)
    return [f"{v:.{decimals}f}" for v in vals]


def nice_ticks(lo: float, hi: float, n: int, log: bool = False) -> list[float]:
    """About ``n`` round tick values between ``lo`` and ``hi``: 1/2/5 × 10^k steps, or on a log axis the powers of
    ten inside the range (with 2 and 5 × 10^k when fewer than three powers fit)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo or n < 1:
        return [lo] if math.isfinite(lo) else []
    if log:
        if lo <= 0:
            return []
        out = [10.0 ** k for k in range(math.ceil(math.log10(lo) - 1e-9), math.floor(math.log10(hi) + 1e-9) + 1)]
        if len(out) < 3:
            out = sorted(m * 10.0 ** k for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
                         for m in (1, 2, 5) if lo <= m * 10.0 ** k <= hi)
        while len(out) > max(2, n):
            out = out[::2]
        if len(out) < 2:  # less than a decade and no 1/2/5 inside (a loss between 4.16 and 4.32): plain steps
            return nice_ticks(lo, hi, n)
        return out
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step - 1e-9) * step
    out, v = [], start
    while v <= hi + step * 1e-9 and len(out) < 50:
        out.append(round(v, 12))
        v += step
    return out


# A perceptual (viridis-like) colour ramp: the console's heatmaps and the attention images of the TensorBoard bridge.
_RAMP = [(68, 1, 84), (72, 40, 120), (62, 74, 137), (49, 104, 142), (38, 130, 142), (31, 158, 137), (53, 183, 121),
         (109, 205, 89), (180, 222, 44), (253, 231, 37)]


def ramp(x: float) -> tuple[int, int, int]:
    """Colour of a value in [0, 1]."""
    if not math.isfinite(x):
        return (40, 40, 40)
    x = min(1.0, max(0.0, x))
    pos = x * (len(_RAMP) - 1)
    i = min(int(pos), len(_RAMP) - 2)
    f = pos - i
    a, b = _RAMP[i], _RAMP[i + 1]
    return tuple(int(round(a[j] + (b[j] - a[j]) * f)) for j in range(3))  # type: ignore[return-value]


def mean_band(curves: Sequence[tuple[Sequence[float], Sequence[float]]]
              ) -> tuple[list[float], list[float], list[float], list[int]]:
    """Mean and sample standard deviation over runs (the seeds of a sweep point) at every step any of them logged:
    ``(xs, mean, std, n)``. Each run is interpolated linearly between its own points and never extrapolated past
    them (a run still training counts where it has data: ``n`` says how many runs each point has); non-finite values
    are skipped; ``std`` is 0 where one run has data."""
    import bisect

    runs = []
    for xs, ys in curves:
        pts = sorted((float(x), float(y)) for x, y in zip(xs, ys)
                     if x is not None and y is not None and math.isfinite(x) and math.isfinite(y))
        if pts:
            runs.append(([p[0] for p in pts], [p[1] for p in pts]))
    out: tuple[list[float], list[float], list[float], list[int]] = ([], [], [], [])
    for x in sorted({x for xs, _ in runs for x in xs}):
        vals = []
        for xs, ys in runs:
            i = bisect.bisect_left(xs, x)
            if i < len(xs) and xs[i] == x:
                vals.append(ys[i])
            elif 0 < i < len(xs):
                f = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
                vals.append(ys[i - 1] + f * (ys[i] - ys[i - 1]))
        m = sum(vals) / len(vals)
        sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
        for lst, v in zip(out, (x, m, sd, len(vals))):
            lst.append(v)
    return out


def band_scale(metric: str) -> tuple[str, tuple[float | None, float | None]]:
    """How a band over runs of ``metric`` stays inside the data's range: a loss (positive, drawn on a log axis) in
    log space, an accuracy (a fraction) clipped to [0, 1]; anything else as it is."""
    name = metric.rsplit("/", 1)[-1]
    if name.endswith("loss"):
        return "log", (None, None)
    if name.endswith("acc") or name.endswith("accuracy"):
        return "linear", (0.0, 1.0)
    return "linear", (None, None)


def band(curves: Sequence[tuple[Sequence[float], Sequence[float]]], metric: str = ""
         ) -> tuple[list[float], list[float], list[float], list[float], list[int]]:
    """The centre and edges of a band over runs of ``metric`` at every step any run logged (``mean_band``'s
    interpolation): ``(xs, centre, lo, hi, n)``, inside the data's range (``band_scale``). A loss: the geometric
    mean × / ÷ the geometric standard deviation (mean ± std of the log, so the lower edge stays positive; non-positive
    values are left out); an accuracy: mean ± std clipped to [0, 1]. The one band of the console's Curves and of the
    figures (``sparse-tui show --plot --mean-by``)."""
    scale, (floor, ceil) = band_scale(metric)
    if scale == "log":
        logs = [(xs, [math.log(y) if y is not None and y > 0 else math.nan for y in ys]) for xs, ys in curves]
        xs, m, sd, n = mean_band(logs)
        return (xs, [math.exp(v) for v in m], [math.exp(v - s) for v, s in zip(m, sd)],
                [math.exp(v + s) for v, s in zip(m, sd)], n)
    xs, m, sd, n = mean_band(curves)
    lo = [v - s if floor is None else max(floor, v - s) for v, s in zip(m, sd)]
    hi = [v + s if ceil is None else min(ceil, v + s) for v, s in zip(m, sd)]
    return xs, m, lo, hi, n
