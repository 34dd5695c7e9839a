"""Plots as data: a ``PlotSpec`` (series, points, vertical lines, axes) drawn by ``draw`` into a fresh plotext
figure on every call.

plotext keeps figure state between builds, and its build transforms that state: a log axis takes the log of the
stored data again on the next build (``math domain error``), and a figure built at one size and rebuilt at another
can index past its canvas (``IndexError`` in ``_build.py``). So no figure outlives one ``draw``: the spec is the
state, and the figure is rebuilt from it for every size and every redraw. ``draw`` also drops what an axis cannot
show (non-finite values, values <= 0 on a log axis), draws nothing when nothing is left, and never raises for a
small area. Legends go below the plot (plotext's sit on the data, e.g. on a loss plateau), one entry per label and
colour, in at most a quarter of the height ("+N more" for the rest), so that the chart keeps most of it. A ``band``
series (mean ± std of a group) is drawn as a shaded area under its lines.

Nothing here imports Textual: ``draw`` returns Rich ``Text``, so it is tested on its own (tests/tui/test_plot.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from rich.text import Text

from sparse_tui.base.plotting import nice_ticks, tick_labels
from sparse_tui.tui.render.names import fit_label

# plotext colour names -> Rich colours of the legend
_RICH = {"orange": "dark_orange", "gray": "grey62", "white": "white", "cyan": "cyan", "green": "green",
         "magenta": "magenta", "yellow": "yellow", "blue": "blue", "red": "red"}
MIN_WIDTH, MIN_HEIGHT = 16, 5  # below this a plot is not drawn (a note says so)
HUGE = 1e100  # larger values are dropped: plotext's tick arithmetic overflows on spans near the float limit


def rich_color(color: str | int | tuple) -> str:
    """The Rich colour of a plotext colour (a name, an int of the 256-colour palette, or an RGB tuple)."""
    if isinstance(color, tuple):
        return "rgb({},{},{})".format(*color)
    return f"color({color})" if isinstance(color, int) else _RICH.get(color, color)


@dataclass
class Series:
    """One curve (``kind="line"``), a set of points (``kind="points"``), or a shaded area between ``ys`` and
    ``ys2`` (``kind="band"``), labelled in the legend."""

    xs: Sequence[float]
    ys: Sequence[float]
    label: str = ""
    color: str | int | tuple = "cyan"  # a plotext colour name, an int of the 256-colour palette, or RGB
    kind: str = "line"  # "line" | "points" | "band"
    marker: str | None = None  # default: braille for lines, "●" for points
    ys2: Sequence[float] = ()  # a band's upper edge (``ys``: its lower edge)


@dataclass
class PlotSpec:
    series: list[Series] = field(default_factory=list)
    vlines: list[tuple[float, str]] = field(default_factory=list)  # (x, colour), e.g. the plateau step in red
    title: str = ""
    xlabel: str = ""
    log_x: bool = False
    log_y: bool = False
    xlim: tuple[float, float] | None = None  # shown x range (zoom); None: the data's
    ylim: tuple[float, float] | None = None  # fixed y range (accuracy: (0, 1)); None: the data's
    integer_x: bool = False  # x ticks are whole numbers (steps)
    empty: str = "no data"  # what an empty plot says
    legend_head: str = ""  # a word before the legend's entries ("20 runs · colour = T:")
    legend_keys: list[tuple[str | int | tuple, str]] = field(default_factory=list)  # (colour, value) after the head
    show_legend: bool = True  # False: no legend (a chart of a grid: one legend under the grid)


def clean(xs: Sequence[float], ys: Sequence[float], log_x: bool = False, log_y: bool = False,
          xlim: tuple[float, float] | None = None) -> tuple[list[float], list[float]]:
    """The points an axis can show: finite, > 0 on a log axis, inside ``xlim``."""
    out_x, out_y = [], []
    for x, y in zip(xs, ys):
        if x is None or y is None:
            continue
        try:
            x, y = float(x), float(y)
        except (TypeError, ValueError):
            continue
        if (math.isfinite(x) and math.isfinite(y) and abs(x) <= HUGE and abs(y) <= HUGE and (x > 0 or not log_x)
                and (y > 0 or not log_y) and (xlim is None or xlim[0] <= x <= xlim[1])):
            out_x.append(x)
            out_y.append(y)
    return out_x, out_y


def nice_step(span: float, n: int) -> float:
    """A 1/2/5 x 10^k step that cuts ``span`` into at most about ``n`` pieces."""
    if span <= 0 or n < 1:
        return 1.0
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    return next((m * mag for m in (1, 2, 5) if m * mag >= raw), 10 * mag)


def fmt_step(v: float) -> str:
    v = int(round(v))
    if abs(v) >= 100_000 and v % 1000 == 0:
        return f"{v // 1000}k"
    return str(v)


def integer_ticks(lo: float, hi: float, width: int) -> list[int]:
    """Whole-number ticks between ``lo`` and ``hi``, spaced for a plot ``width`` columns wide."""
    step = float(math.ceil(max(1.0, nice_step(hi - lo, max(1, width // 12)))))
    ticks = []
    v = math.ceil(lo / step) * step
    while v <= hi + 1e-9 and len(ticks) < 50:
        ticks.append(int(round(v)))
        v += step
    return ticks or [int(round(lo))]


def legend(spec: PlotSpec, width: int, max_lines: int | None = None) -> Text:
    """The legend entries (one per label and colour), packed into lines of ``width``; past ``max_lines`` lines the
    rest is counted ("+3 more")."""
    entries: list[tuple[str, str, str]] = []  # (symbol, style, label)
    if spec.legend_head:
        entries.append(("", "", spec.legend_head))
    entries += [("━", rich_color(c), label) for c, label in spec.legend_keys]
    seen = set()
    for s in sorted(spec.series, key=lambda s: s.color == "gray"):  # grey reference lines (theory) last
        if s.label and (s.label, s.color) not in seen:
            seen.add((s.label, s.color))
            sym = "░" if s.kind == "band" else (s.marker or "●") if s.kind == "points" else "━"
            entries.append((sym, rich_color(s.color), s.label))
    if any(color == "red" for _, color in spec.vlines):
        entries.append(("│", "red", "plateau step"))
    entries = [(sym, style, fit_label(label, width - len(sym) - bool(sym))) for sym, style, label in entries]
    lines, rest = _pack(entries, width, max_lines)
    if rest:  # too many: the reference entries (theory, plateau) stay, the runs give way, and are counted
        refs = [e for e in entries if e[1] in (rich_color("gray"), "red")]
        runs = [e for e in entries if e not in refs]
        for k in range(len(runs) - 1, -1, -1):
            lines, _ = _pack(runs[:k] + refs + [("", "dim", f"+{len(runs) - k} more")], width, max_lines)
            if _ == 0:
                break
    for line in lines:
        line.truncate(width)
    return Text("\n").join(lines) if lines[0] else Text()


def _pack(entries: list[tuple[str, str, str]], width: int, max_lines: int | None) -> tuple[list[Text], int]:
    """Entries packed into lines of ``width``, at most ``max_lines``: the lines, and how many entries did not fit."""
    lines: list[Text] = [Text()]
    for i, (sym, style, label) in enumerate(entries):
        piece = len(sym) + bool(sym) + len(label)
        line = lines[-1]
        if line and len(line) + 2 + piece > width:
            if max_lines is not None and len(lines) >= max_lines:
                return lines, len(entries) - i
            lines.append(line := Text())
        if line:
            line.append("  ")
        if sym:
            line.append(sym + " ", style=style)
        line.append(label, style=style if not sym else "")
    return lines, 0


def _band_points(s: Series, xs: list[float], lo: list[float], yrange: tuple[float, float], rows: int,
                 log_y: bool) -> tuple[list[float], list[float]]:
    """A band as points: at each x, one point per text row whose centre lies between the band's edges."""
    y0, y1 = (math.log10(v) for v in yrange) if log_y else yrange
    his = dict(zip(s.xs, s.ys2))
    px, py = [], []
    for x, a in zip(xs, lo):
        b = his.get(x)
        if b is None or not math.isfinite(b):
            continue
        for k in range(rows):
            y = y0 + (k + 0.5) * (y1 - y0) / rows
            y = 10 ** y if log_y else y
            if a <= y <= b:
                px.append(x)
                py.append(y)
    return px, py


def _figure(width: int, height: int, theme: str | None):
    from textual_plotext import Plot  # plotext's figure class (no Textual widget)

    plt = Plot()
    plt.plotsize(width, height)
    plt._set_size(width, height)  # see textual_plotext.PlotextPlot.render: plotsize alone does not always resize
    if theme:
        plt.theme(theme)
    return plt


def draw(spec: PlotSpec, width: int, height: int, theme: str | None = None) -> Text:
    """The plot of ``spec`` in a ``width`` x ``height`` area, built in a fresh plotext figure (Rich ``Text``)."""
    width, height = int(width), int(height)
    if width < MIN_WIDTH or height < MIN_HEIGHT:
        return Text(f"{spec.title or 'plot'}: too small to draw ({width}x{height})"[: max(0, width)], style="dim")
    # an empty or (on a log axis) non-positive range: the data's range instead
    xlim, ylim = (lim if lim is None or (lim[0] < lim[1] and (lim[0] > 0 or not log)) else None
                  for lim, log in ((spec.xlim, spec.log_x), (spec.ylim, spec.log_y)))
    shown = []
    for s in spec.series:
        xs, ys = clean(s.xs, s.ys, spec.log_x, spec.log_y and s.kind != "band", xlim)
        if ylim is not None:  # a fixed range shows what lies outside at its edge
            ys = [min(ylim[1], max(ylim[0], y)) for y in ys]
        if xs:
            shown.append((s, xs, ys))
    empty = Text(f"{spec.title + ': ' if spec.title else ''}{spec.empty}", style="dim")
    if not shown:
        return empty
    leg = legend(spec, width, max(1, min(height // 4, height - MIN_HEIGHT))) if spec.show_legend else Text()
    leg_lines = len(leg.plain.splitlines()) if height > MIN_HEIGHT else 0
    plt = _figure(width, height - leg_lines, theme)
    xs_all = [x for _, xs, _ in shown for x in xs]
    ys_all = [y for s, _, ys in shown for y in ys if s.kind != "band"]
    ys_all += [y for s, _, _ in shown if s.kind == "band" for y in clean(s.xs, s.ys2, log_y=spec.log_y)[1]]
    ylo, yhi = ylim if ylim is not None else (min(ys_all or [0.0]), max(ys_all or [1.0]))
    if not ys_all or yhi <= ylo:  # a band alone, or a flat band: no shading
        shown = [(s, xs, ys) for s, xs, ys in shown if s.kind != "band"]
    shown = [(s, *(_band_points(s, xs, ys, (ylo, yhi), 2 * max(1, height - leg_lines), spec.log_y)
                   if s.kind == "band" else (xs, ys))) for s, xs, ys in shown]
    shown = [(s, xs, ys) for s, xs, ys in shown if xs]
    if not shown:
        return empty
    for s, xs, ys in shown:
        if s.kind == "line":
            plt.plot(xs, ys, marker=s.marker or "braille", color=s.color)
        else:
            plt.scatter(xs, ys, marker="░" if s.kind == "band" else s.marker or "●", color=s.color)
    lo, hi = (xlim if xlim is not None else (min(xs_all), max(xs_all)))
    for x, color in spec.vlines:
        if x is not None and math.isfinite(x) and lo <= x <= hi and (not spec.log_x or x > 0):
            plt.vline(x, color)
    if spec.log_x:
        plt.xscale("log")
    if spec.log_y:
        plt.yscale("log")
    if xlim is not None:  # (plotext takes a log axis's limits as the log10 of the values)
        plt.xlim(*(map(math.log10, xlim) if spec.log_x else xlim))
    if ylim is not None:
        plt.ylim(*(map(math.log10, ylim) if spec.log_y else ylim))
    # Ticks in one format per axis (plotting.tick_labels): plotext's own mix fixed-point log ticks ("0.000001"),
    # "360" beside "1.05e+03" and values like "83273.7".
    if yhi > ylo:
        ticks = nice_ticks(ylo, yhi, max(2, (height - leg_lines) // 4), log=spec.log_y)
        if ticks:
            plt.yticks(ticks, tick_labels(ticks))
    if spec.integer_x and not spec.log_x and hi > lo:
        ticks = integer_ticks(lo, hi, width)
        plt.xticks(ticks, [fmt_step(t) for t in ticks])
    elif hi > lo:
        ticks = nice_ticks(lo, hi, max(2, width // 12), log=spec.log_x)
        if ticks:
            plt.xticks(ticks, tick_labels(ticks))
    if spec.title:
        plt.title(spec.title)
    if spec.xlabel:
        plt.xlabel(spec.xlabel)
    out = Text.from_ansi(plt.build().rstrip("\n"))
    if leg_lines:
        out.append("\n")
        out.append_text(leg)
    return out


def ema(values: Sequence[float], alpha: float) -> list[float]:
    """Exponential moving average with weight ``alpha`` on the past (0: no smoothing), debiased like
    TensorBoard's, skipping non-finite values (they stay as they are)."""
    if alpha <= 0:
        return list(values)
    out, acc, w = [], 0.0, 0.0
    for v in values:
        if v is None or not math.isfinite(v):
            out.append(v)
            continue
        acc = alpha * acc + (1 - alpha) * v
        w = alpha * w + (1 - alpha)
        out.append(acc / w)
    return out


GRID_CELL = (26, 8)  # the smallest chart of a grid (columns, rows)


def grid_shape(n: int, width: int, height: int) -> tuple[int, int]:
    """(columns, rows) of a grid of ``n`` charts in ``width`` x ``height``: all of them when they fit at
    ``GRID_CELL``, in the shape whose charts are largest (about 4:1 columns to rows, like a terminal chart), else as
    many as fit (the rest on further pages)."""
    most_c, most_r = max(1, width // GRID_CELL[0]), max(1, height // GRID_CELL[1])
    fits = [(c, -(-n // c)) for c in range(1, min(n, most_c) + 1) if -(-n // c) <= most_r]
    if not fits:
        return min(n, most_c), most_r
    return max(fits, key=lambda cr: (min(width / cr[0] / 40, height / cr[1] / 10), -cr[0] * cr[1]))


def draw_grid(specs: Sequence[PlotSpec], width: int, height: int, page: int = 0,
              theme: str | None = None) -> Text:
    """Small multiples: ``specs`` (each titled) side by side in as many columns and rows as fit, page ``page`` of
    them; each chart is drawn by ``draw`` in its own fresh figure, without its legend and x label: one legend line
    under the grid serves them all (the first chart's entries, so the charts must share their colours' meaning)."""
    width, height = int(width), int(height)
    if not specs:
        return Text("no runs to draw", style="dim")
    leg = legend(specs[0], width, 1)
    height -= bool(leg.plain) and height > GRID_CELL[1]
    if not leg.plain or height < GRID_CELL[1]:
        leg = Text()
    cols, rows = grid_shape(len(specs), width, height)
    per = cols * rows
    chunk = list(specs[page * per:(page + 1) * per])
    cw, ch = width // cols, height // rows
    out = Text()
    for r in range(rows):
        cells: list[list[Text]] = []
        for c in range(cols):
            i = r * cols + c
            lines: list[Text] = []
            if i < len(chunk):
                spec = chunk[i]
                head = Text(fit_label(spec.title, cw - 1), style="bold")
                body = PlotSpec(**{**spec.__dict__, "title": "", "xlabel": "", "show_legend": False})
                lines = [head, *draw(body, cw - 1, ch - 1, theme).split("\n", allow_blank=True)]
            lines = lines[:ch] + [Text("")] * (ch - len(lines[:ch]))
            for ln in lines:
                ln.truncate(cw, pad=True)
            cells.append(lines)
        for k in range(ch):
            line = Text()
            for cell in cells:
                line.append_text(cell[k])
            if r or k:
                out.append("\n")
            out.append_text(line)
    if leg.plain:
        out.append("\n")
        out.append_text(leg)
    return out


def zoom_window(lo: float, hi: float, zoom: float, center: float, log: bool) -> tuple[float, float] | None:
    """The x range a zoom shows: ``zoom`` of the data's range [lo, hi] around ``center`` (a fraction of it), in log
    space on a log axis (then from the first positive x)."""
    if zoom >= 1.0 or not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo or (log and hi <= 0):
        return None
    f, g = (math.log, math.exp) if log else (float, float)
    a, b = f(max(lo, hi * 1e-9) if log else lo), f(hi)
    span = (b - a) * zoom
    left = min(max(a, a + (b - a) * center - span / 2), b - span)
    return g(left), g(left + span)


def pan(center: float, zoom: float, delta: int) -> float:
    """A zoomed window's centre (a fraction of the data's range) moved ``delta`` quarters of the window, the window
    kept inside the data."""
    return max(zoom / 2, min(1.0 - zoom / 2, center + delta * zoom / 4))


def fraction_at(lo: float, hi: float, x: float, log: bool) -> float:
    """Where ``x`` lies in [lo, hi] as a fraction (in log space on a log axis): the centre that zooms at it."""
    if log and lo > 0 and x > 0 and hi > lo:
        return (math.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return (x - lo) / (hi - lo) if hi > lo else 0.5
