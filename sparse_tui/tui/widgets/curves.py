"""The Live curves panel: loss / accuracy / attention probes of one run or several overlaid.

Data arrive as ``CurvesData`` from the store poller; the theory (ODE) overlay of a linreg run is asked for once per
run (``TheoryRequested``: the core integrates it in a worker) and kept. The panel turns them into a ``PlotSpec``
(every series downsampled to the widget width, optionally EMA-smoothed, cut to the zoomed x range) and ``PlotView``
draws it afresh on every render, so redraws, resizes and panel switches cannot trip over plotext's figure state.
Accuracy has a fixed [0, 1] axis (noise must not look like signal), steps are whole-number ticks, the plateau step
is a red line and the legend sits below the plot, labelled with the run names.
"""

from __future__ import annotations

import math
import re

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

from sparse_tui.numbers import fmt_num
from sparse_tui.plotting import downsample
from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.messages import CurvesData, FigureRequested, GridToggled, TheoryData, TheoryRequested
from sparse_tui.tui.plot import PlotSpec, Series, ema, grid_shape
from sparse_tui.tui.render.runs import param_text, short_keys, value_key
from sparse_tui.tui.widgets.panel import ConsolePanel, StoreView
from sparse_tui.tui.widgets.plot_view import PlotView
from sparse_tui.tui.widgets.shallow_focus import ShallowFocus

GROUPS = ("loss", "accuracy", "attention", "toy", "entropy")
_ATTN = re.compile(r"^attn/L\d+/(relevant|select|copy)$")
COLORS = ("cyan", "orange", "green", "magenta", "yellow", "blue", "red", "white")
SMOOTHING = (0.0, 0.5, 0.8, 0.9, 0.95, 0.98)  # EMA weights on the past (+ / - step through them)
ZOOMS = (1.0, 0.5, 0.25, 0.125, 0.0625)  # shown fraction of the steps (z / Z)


def group_series(group: str, names: list[str], many: bool) -> list[str]:
    if group == "loss":
        if many:
            return [n for n in ("test/loss",) if n in names] or [n for n in ("train/loss",) if n in names]
        return [n for n in ("train/loss", "test/loss") if n in names]
    if group == "accuracy":
        return [n for n in ("test/acc",) if n in names]
    if group == "attention":
        return sorted(n for n in names if _ATTN.match(n))
    if group == "toy":
        return [n for n in ("toy/w", "toy/alpha") if n in names]
    return sorted(n for n in names if n.startswith("attn/entropy/"))


def available_groups(data: CurvesData | None) -> list[str]:
    """The metric groups that have a series in ``data`` (transformer runs are not offered an empty toy group)."""
    if data is None or not data.run_ids:
        return list(GROUPS)
    names = {n for rid in data.run_ids for n in data.series.get(rid, {})}
    many = len(data.run_ids) > 1
    out = [g for g in GROUPS if group_series(g, sorted(names), many)]
    return out or ["loss"]


def differing_labels(data: CurvesData, run_ids: list[str] | None = None) -> dict[str, str]:
    """Legend labels of overlaid runs: only the parameters that differ among them (``d_model=32 seed=1``); the
    run name when they differ in none (or their parameters are unknown)."""
    ids = list(run_ids if run_ids is not None else data.run_ids)
    params = [data.params.get(r, {}) for r in ids]
    keys = list(dict.fromkeys(k for p in params for k in p))
    diff = [k for k in keys if k not in ("name", "description")
            and len({repr(p.get(k)) for p in params}) > 1]
    titles = short_keys(diff)
    out = {}
    for rid, p in zip(ids, params):
        text = " ".join(f"{titles[k]}={param_text(p.get(k))}" for k in diff)
        out[rid] = text or data.labels.get(rid, rid)
    return out


def curves_spec(data: CurvesData | None, group: str, *, log_loss: bool = True, theory: bool = True,
                smoothing: float = 0.0, zoom: float = 1.0, center: float = 0.5, width: int = 80,
                run_ids: list[str] | None = None, title: str = "",
                curves: dict[str, tuple[list[float], list[float]] | None] | None = None) -> PlotSpec:
    """The plot of one metric group of the watched runs (or of ``run_ids`` among them; pure: tested without a
    screen), with the theory ``curves`` of the runs that have one. Overlaid runs are labelled by the parameters they
    differ in."""
    log = group == "loss" and log_loss
    spec = PlotSpec(xlabel="step", log_y=log, integer_x=True, title=title,
                    ylim=(0.0, 1.0) if group in ("accuracy", "attention") else None,
                    empty=f"{group}: no data" + ("" if data and data.run_ids else " — pick runs in the Runs panel"))
    if data is None or not data.run_ids:
        return spec
    ids = [r for r in (run_ids if run_ids is not None else data.run_ids) if r in data.series]
    many = len(ids) > 1
    labels = differing_labels(data, ids) if many else {}
    npts = max(40, 2 * width)
    ci = 0
    xmin, xmax = math.inf, -math.inf
    for rid in ids:
        series = data.series.get(rid, {})
        name_of = labels.get(rid, data.labels.get(rid, rid))
        names = group_series(group, list(series), many)
        for name in names:
            xs, ys = series[name]
            if smoothing > 0:
                ys = ema(ys, smoothing)
            xs, ys = downsample(list(xs), list(ys), npts)
            if xs:
                xmin, xmax = min(xmin, min(xs)), max(xmax, max(xs))
            label = (name_of if len(names) == 1 else f"{name_of} {name}") if many else name
            spec.series.append(Series(xs, ys, label=label, color=COLORS[ci % len(COLORS)]))
            ci += 1
        if group == "loss" and theory and (curves or {}).get(rid):
            xs, ys = curves[rid]
            xs, ys = downsample(list(xs), list(ys), npts)
            spec.series.append(Series(xs, ys, label=f"{name_of} ODE" if many else "theory (ODE)",
                                      color="gray"))
        ps = data.plateau.get(rid)
        if ps is not None:
            spec.vlines.append((ps, "red"))
    if zoom < 1.0 and math.isfinite(xmin) and xmax > xmin:
        span = (xmax - xmin) * zoom
        c = xmin + (xmax - xmin) * center
        lo = min(max(xmin, c - span / 2), xmax - span)
        spec.xlim = (lo, lo + span)
    return spec


def grid_units(data: CurvesData | None, group_keys: list[str]) -> list[tuple[str, list[str]]]:
    """The charts of the grid: (title, run ids) per group of ``group_keys`` values (in value order), else one per
    run."""
    if data is None:
        return []
    ids = [r for r in data.run_ids if r in data.series]
    params = [data.params.get(r, {}) for r in ids]
    keys = sorted({k for p in params for k in p if len({repr(q.get(k)) for q in params}) > 1})
    ids.sort(key=lambda r: tuple(value_key(data.params.get(r, {}).get(k)) for k in keys))  # in parameter order
    if not group_keys:
        labels = differing_labels(data, ids)
        return [(f"{r} {labels.get(r, '')}".strip(), [r]) for r in ids]
    titles = short_keys(group_keys)
    units: dict[tuple, list[str]] = {}
    for r in ids:
        p = data.params.get(r, {})
        units.setdefault(tuple(p.get(k) for k in group_keys), []).append(r)
    out = []
    for vals in sorted(units, key=lambda t: tuple(value_key(v) for v in t)):
        label = " ".join(f"{titles[k]}={param_text(v)}" for k, v in zip(group_keys, vals))
        out.append((f"{label} (n={len(units[vals])})", units[vals]))
    return out


class CurvesPanel(ConsolePanel, ShallowFocus, Guarded, Vertical, can_focus=True):
    BINDINGS = [
        Binding("m", "cycle_group(1)", "Next metric"),
        Binding("M", "cycle_group(-1)", "Prev metric", show=False),
        Binding("l", "toggle('log_loss')", "Log y"),
        Binding("h", "toggle('theory')", "Theory"),
        Binding("plus,equals_sign", "smooth(1)", "Smooth +"),
        Binding("minus", "smooth(-1)", "Smooth -"),
        Binding("z", "zoom(1)", "Zoom in"),
        Binding("Z", "zoom(-1)", "Zoom out"),
        Binding("left", "pan(-1)", "Pan left", show=False),
        Binding("right", "pan(1)", "Pan right", show=False),
        Binding("g", "toggle('grid')", "Grid"),
        Binding("pagedown", "page(1)", "Next charts", show=False),
        Binding("pageup", "page(-1)", "Prev charts", show=False),
        Binding("p", "figure('png')", "Figure"),
        Binding("P", "figure('svg')", "Figure (SVG)", show=False),
    ]

    DEFAULT_CSS = """
    CurvesPanel PlotView { height: 1fr; }
    CurvesPanel #curves-info { height: auto; max-height: 4; color: $text-muted; }
    """

    group: reactive[str] = reactive("loss", init=False)
    log_loss: reactive[bool] = reactive(True, init=False)
    theory: reactive[bool] = reactive(True, init=False)
    smoothing: reactive[int] = reactive(0, init=False)  # index into SMOOTHING
    zoom: reactive[int] = reactive(0, init=False)  # index into ZOOMS
    center: reactive[float] = reactive(0.5, init=False)  # centre of the zoomed window, as a fraction of the steps
    grid: reactive[bool] = reactive(False, init=False)  # small multiples: one chart per group (or run)
    page: reactive[int] = reactive(0, init=False)  # the grid's page (when not all charts fit)

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.data: CurvesData | None = None
        self.group_keys: list[str] = []
        self.theory_curves: dict[str, tuple[list[float], list[float]] | None] = {}  # None: the run has none
        self._theory_asked: set[str] = set()
        self._pages = 1  # the grid's pages at its last draw (pgup / pgdn stay within them)

    def compose(self) -> ComposeResult:
        yield PlotView(id="curves-plot")
        yield Static("Select runs in the Runs panel (space marks several, enter views).", id="curves-info")

    def on_resize(self) -> None:
        self.redraw()

    on_mount = on_resize

    def selection_changed(self, view: StoreView) -> list[str]:
        """The marked runs, else (grid) the runs the table shows, else the current one; the grid follows its groups."""
        if view.groups != self.group_keys:
            self.group_keys, self.page = list(view.groups), 0
            self._redraw_on_change()
        if view.marked:
            return view.marked
        if self.grid:
            return view.shown[:64]  # at most 64 charts
        return [view.current] if view.current else []

    def series_changed(self, data: CurvesData) -> None:
        self.data = data
        groups = available_groups(data)
        if self.group not in groups:
            self.group = groups[0]
        new = [r for r in data.run_ids if r not in self._theory_asked]
        if new:
            self._theory_asked.update(new)
            self.post_message(TheoryRequested(new))
        self.redraw()

    def set_theory(self, msg: TheoryData) -> None:
        self.theory_curves.update(msg.curves)
        self.redraw()

    # every reactive change redraws
    def _redraw_on_change(self, *_: object) -> None:
        if self.is_mounted:
            self.redraw()

    watch_group = watch_log_loss = watch_theory = watch_smoothing = watch_zoom = watch_center = watch_page = \
        _redraw_on_change

    def watch_grid(self, on: bool) -> None:
        self.page = 0
        self.post_message(GridToggled(on))
        self._redraw_on_change()

    def action_page(self, delta: int) -> None:
        if self.grid:
            self.page = max(0, min(self._pages - 1, self.page + delta))

    def action_figure(self, fmt: str) -> None:
        self.post_message(FigureRequested("curves", fmt))

    def action_cycle_group(self, delta: int) -> None:
        groups = available_groups(self.data)
        self.group = groups[(groups.index(self.group) + delta) % len(groups)] if self.group in groups else groups[0]

    def action_smooth(self, delta: int) -> None:
        self.smoothing = max(0, min(len(SMOOTHING) - 1, self.smoothing + delta))

    def action_zoom(self, delta: int) -> None:
        self.zoom = max(0, min(len(ZOOMS) - 1, self.zoom + delta))

    def action_pan(self, delta: int) -> None:
        half = ZOOMS[self.zoom] / 2
        self.center = max(half, min(1.0 - half, self.center + delta * ZOOMS[self.zoom] / 4))

    def redraw(self) -> None:
        plot = self.query_one(PlotView)
        z = ZOOMS[self.zoom]
        kw = dict(log_loss=self.log_loss, theory=self.theory, smoothing=SMOOTHING[self.smoothing], zoom=z,
                  center=self.center, curves=self.theory_curves)
        parts = [f"Curves · {self.group}"]
        if self.grid:
            units = grid_units(self.data, self.group_keys)
            cols, rows = grid_shape(max(1, len(units)), plot.size.width or 80, plot.size.height or 20)
            width = max(20, (plot.size.width or 80) // cols)
            specs = [curves_spec(self.data, self.group, run_ids=ids, title=title, width=width, **kw)
                     for title, ids in units]
            self._pages = pages = max(1, -(-len(units) // (cols * rows)))
            parts.append(f"grid of {len(units)}" + (f" · page {self.page + 1}/{pages}" if pages > 1 else ""))
            plot.show_grid(specs, min(self.page, pages - 1))
        else:
            plot.show(curves_spec(self.data, self.group, width=plot.size.width or 80, **kw))
        if self.smoothing:
            parts.append(f"EMA {SMOOTHING[self.smoothing]}")
        if z < 1:
            parts.append(f"zoom x{1 / z:g}")
        self.border_title = " · ".join(parts)
        self.border_subtitle = "m metric · l log · +/- smooth · g grid · p figure"
        self._info()

    def _info(self) -> None:
        d = self.data
        info = self.query_one("#curves-info", Static)
        if d is None or not d.run_ids:
            info.update("No run selected: Runs panel (2), move to a run, enter. Space marks several to overlay.")
            return
        if self.grid:  # the charts name their runs: one line, the plots keep the height
            units = grid_units(d, self.group_keys)
            info.update(Text(f"{len(d.run_ids)} runs in {len(units)} charts"
                             + (f" grouped by {', '.join(short_keys(self.group_keys).values())}" if self.group_keys
                                else " (g in Runs groups them)") + " · pgup/pgdn: more charts · g: one plot"))
            return
        parts = []
        for rid in d.run_ids[:3]:
            s = d.series.get(rid, {})
            last = {k: v[1][-1] for k, v in s.items() if v[1]}
            ps = d.plateau.get(rid)
            parts.append(
                f"{rid} {d.labels.get(rid, rid)}  plateau {fmt_num(ps, '.4g') if ps is not None else '-'}"
                f"  loss {fmt_num(last.get('test/loss', last.get('train/loss')))}"
                + (f"  acc {fmt_num(last['test/acc'], '.3f')}" if "test/acc" in last and not math.isnan(last['test/acc']) else "")
            )
        if len(d.run_ids) > 3:
            parts.append(f"… and {len(d.run_ids) - 3} more")
        info.update(Text("\n".join(parts)))  # plain text: names and statuses may hold [..]
