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

from sparse_tui.base.numbers import fmt_num
from sparse_tui.base.plotting import band, downsample, ramp
from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.messages import CurvesData, FigureRequested, SeriesWanted, TheoryData, TheoryRequested
from sparse_tui.tui.plot import PlotSpec, Series, ema, fmt_step, fraction_at, grid_shape, pan, zoom_window
from sparse_tui.tui.render.runs import param_text, short_keys, value_key
from sparse_tui.tui.widgets.panel import ConsolePanel, StoreView
from sparse_tui.tui.widgets.plot_view import PlotView
from sparse_tui.tui.widgets.shallow_focus import ShallowFocus

GROUPS = ("loss", "accuracy", "attention", "toy", "entropy")
_ATTN = re.compile(r"^attn/L\d+/(relevant|select|copy)$")
COLORS = ("cyan", "orange", "green", "magenta", "yellow", "blue", "red", "white")
MORE_COLORS = (39, 208, 141, 118, 205, 229, 73, 174)  # past 8 runs (256-colour palette: sky, amber, violet ...)
SMOOTHING = (0.0, 0.5, 0.8, 0.9, 0.95, 0.98)  # EMA weights on the past (+ / - step through them)
ZOOMS = (1.0, 0.5, 0.25, 0.125, 0.0625)  # shown fraction of the steps (z / Z)


def group_series(group: str, names: list[str], many: bool) -> list[str]:
    """The series of a metric group that ``names`` holds (overlaid runs: one loss each, the test loss if any)."""
    if group == "attention":
        return sorted(n for n in names if _ATTN.match(n))
    if group == "entropy":
        return sorted(n for n in names if n.startswith("attn/entropy/"))
    if group == "loss" and many:
        return ["test/loss"] if "test/loss" in names else [n for n in ("train/loss",) if n in names]
    return [n for n in {"loss": ("train/loss", "test/loss"), "accuracy": ("test/acc",), "toy": ("toy/w", "toy/alpha")}[
        group] if n in names]


def available_groups(data: CurvesData | None) -> list[str]:
    """The metric groups that have a series in ``data`` (transformer runs are not offered an empty toy group)."""
    if data is None or not data.run_ids:
        return list(GROUPS)
    names = {n for rid in data.run_ids for n in data.series.get(rid, {})}
    many = len(data.run_ids) > 1
    out = [g for g in GROUPS if group_series(g, sorted(names), many)]
    return out or ["loss"]


def _differing(data: CurvesData, ids: list[str]) -> list[str]:
    params = [data.params.get(r, {}) for r in ids]
    keys = list(dict.fromkeys(k for p in params for k in p))
    return [k for k in keys if k not in ("name", "description") and len({repr(p.get(k)) for p in params}) > 1]


def differing_labels(data: CurvesData, run_ids: list[str] | None = None) -> dict[str, str]:
    """Legend labels of overlaid runs: only the parameters that differ among them (``d_model=32 seed=1``); the
    run name when they differ in none (or their parameters are unknown)."""
    ids = list(run_ids if run_ids is not None else data.run_ids)
    diff = _differing(data, ids)
    titles = short_keys(diff)
    return {rid: " ".join(f"{titles[k]}={param_text(data.params.get(rid, {}).get(k))}" for k in diff)
            or data.labels.get(rid, rid) for rid in ids}


def colouring(data: CurvesData, units: dict[str, list[str]], width: int = 80
              ) -> tuple[dict[str, object], dict[str, str], str, list]:
    """Colours, legend labels, a legend head and colour keys for the units (a run, or a group of runs) drawn
    together: up to 8 in the named colours, labelled by what they differ in; more that differ in one swept key (the
    seed aside) on a colour ramp over its values, unlabelled, under one head ("20 runs · colour = T:") and a few of
    the values in their colours (as many as fit in ``width``, the first and the last always)."""
    firsts = {u: ids[0] for u, ids in units.items()}
    diff = _differing(data, list(firsts.values()))
    swept = [k for k in diff if k != "seed"]
    if len(units) > len(COLORS) and swept:  # the colour: the key of most values; the others are said (one line)
        count = {k: len({repr(data.params.get(r, {}).get(k)) for r in firsts.values()}) for k in swept}
        key = max(swept, key=lambda k: count[k])
        value = {u: data.params.get(r, {}).get(key) for u, r in firsts.items()}
        vals = sorted({repr(v): v for v in value.values()}.values(), key=value_key)
        ramped = [ramp(0.05 + 0.9 * i / max(1, len(vals) - 1)) for i in range(len(vals))]
        where = {repr(v): c for v, c in zip(vals, ramped)}
        n = sum(len(ids) for ids in units.values())
        head = f"{len(units)} groups" if n > len(units) else f"{n} runs"
        titles = short_keys(swept)
        also = [titles[k] for k in swept if k != key]
        also_text = f" ({', '.join(also)} also var{'y' if len(also) > 1 else 'ies'})" if also else ""
        head += f" · colour = {titles[key]}{also_text}:"
        room = max(2, (width - len(head) - 30) // (4 + max(len(param_text(v)) for v in vals)))
        pick = sorted({round(i * (len(vals) - 1) / max(1, min(room, len(vals)) - 1))
                       for i in range(min(room, len(vals)))})
        keys = [(ramped[i], param_text(vals[i])) for i in pick]
        return {u: where[repr(v)] for u, v in value.items()}, {u: "" for u in units}, head, keys
    labels = differing_labels(data, list(firsts.values()))
    colours = {u: (COLORS + MORE_COLORS)[i % (len(COLORS) + len(MORE_COLORS))] for i, u in enumerate(units)}
    return colours, {u: labels[r] for u, r in firsts.items()}, "", []


def _at(xs: list[float], ys: list[float], x: float) -> float | None:
    """The curve's value at ``x`` (the first point at or after it)."""
    return next((y for xx, y in zip(xs, ys) if xx >= x), None)


def log_x_auto(data: CurvesData | None, run_ids: list[str] | None = None) -> bool:
    """A log step axis when the runs' plateaus span a decade (fig1c's 360 to 1.5k and more: on a linear axis they sit
    squeezed at its left), as the figures choose."""
    if data is None:
        return False
    ps = [v for r in (run_ids if run_ids is not None else data.run_ids) if (v := data.plateau.get(r)) and v > 0]
    return len(ps) > 1 and max(ps) >= 10 * min(ps)


def describes(data: CurvesData, run_id: str) -> bool:
    """Whether the theory (ODE) curve describes the run: not an ODE run, which is the theory itself."""
    return data.params.get(run_id, {}).get("model.kind") != "ode"


def _units(data: CurvesData, ids: list[str], group_keys: list[str] | None) -> dict[str, list[str]]:
    """The runs drawn as one line each, or as one band per group of ``group_keys`` values; in the order of their
    parameter values (the legend reads in order)."""
    units: dict[str, list[str]] = {}
    for r in ids:
        p = data.params.get(r, {})
        units.setdefault(repr([p.get(k) for k in group_keys]) if group_keys else r, []).append(r)
    keys = group_keys or _differing(data, ids)
    return dict(sorted(units.items(), key=lambda kv: tuple(
        value_key(data.params.get(kv[1][0], {}).get(k)) for k in keys)))


def curves_spec(data: CurvesData | None, group: str, *, log_loss: bool = True, theory: bool = True,
                smoothing: float = 0.0, zoom: float = 1.0, center: float = 0.5, width: int = 80,
                run_ids: list[str] | None = None, title: str = "", group_keys: list[str] | None = None,
                curves: dict[str, tuple[list[float], list[float]] | None] | None = None,
                focus: list[str] | None = None, x_of: dict | None = None, log_x: bool | None = None,
                ylim: tuple[float, float] | None = None) -> PlotSpec:
    """The plot of one metric group of the watched runs (or of ``run_ids`` among them; pure: tested without a
    screen), with the theory ``curves`` of the runs they describe (``describes``). Overlaid runs are labelled by the
    parameters they differ in, in the order of their values, and their plateau steps marked on their curves (one
    run: a red line). ``group_keys``: one band per group of runs with equal values of these keys (the seeds of a
    sweep point; ``plotting.band``: inside the data's range) instead of one line per run. ``focus``: these runs in
    colour, the others grey and unlabelled (the full-screen chart). ``x_of``: a run's step -> its x (time; a run
    without one is left out). ``log_x``: a log step axis (None: when the plateaus span a decade). ``ylim``: the y
    range shown (the full-screen chart's y pan)."""
    log = group == "loss" and log_loss
    spec = PlotSpec(xlabel="step", log_y=log, integer_x=True, title=title,
                    ylim=ylim or ((0.0, 1.0) if group in ("accuracy", "attention") else None),
                    empty=f"{group}: no data" + ("" if data and data.run_ids else " — pick runs in the Runs panel"))
    if data is None or not data.run_ids:
        return spec
    ids = [r for r in (run_ids if run_ids is not None else data.run_ids) if r in data.series]
    spec.log_x = log_x_auto(data, ids) if log_x is None else log_x
    units = _units(data, ids, group_keys)
    if x_of is not None:
        units = {u: m for u, m in units.items() if m[0] in x_of}
        spec.integer_x = False
    many = len(units) > 1
    colours, labels, spec.legend_head, spec.legend_keys = colouring(data, units, width) if many else ({}, {}, "", [])
    if focus:  # the others first (under it), grey, unlabelled
        units = dict(sorted(units.items(), key=lambda kv: bool(set(kv[1]) & set(focus))))
        for u, m in units.items():
            if not set(m) & set(focus):
                colours[u], labels[u] = 240, ""
        spec.legend_head, spec.legend_keys = "", []
    if group_keys:
        spec.legend_head = " · ".join(filter(None, ["mean ± std", spec.legend_head]))
    xmin, xmax = _draw_units(spec, data, units, group, colours, labels, many, bool(group_keys), smoothing, width,
                             x_of, curves if theory else None)
    spec.xlim = zoom_window(xmin, xmax, zoom, center, spec.log_x)
    return spec


def _draw_units(spec: PlotSpec, data: CurvesData, units: dict[str, list[str]], group: str, colours: dict,
                labels: dict, many: bool, banded: bool, smoothing: float, width: int, x_of: dict | None,
                curves: dict | None) -> tuple[float, float]:
    """The units' lines (a band under a group's), their plateau marks, and the theory curves of the runs it
    describes, into ``spec``; the x range drawn."""
    npts = max(40, 2 * width)
    ci = 0
    xmin, xmax = math.inf, -math.inf
    marks: tuple[list[float], list[float]] = ([], [])
    bands: list[Series] = []
    odes: list[Series] = []  # after the runs' lines (one legend entry for all)
    for u, members in units.items():
        name_of = labels[u] if u in labels else data.labels.get(u, u)
        fx = (x_of or {}).get(members[0], lambda x: x)
        names = group_series(group, list(data.series[members[0]]), many or banded)
        for name in names:
            color = colours[u] if many and len(names) == 1 else COLORS[ci % len(COLORS)]
            ci += 1
            runs_xy = [data.series[r][name] for r in members if name in data.series[r]]
            if banded:
                bx, mean, *edges, _ = band(runs_xy, name)  # inside the data's range (a loss in log space)
                runs_xy = [(bx, mean)]
                if len(members) > 1:
                    lo, hi = (downsample(bx, ema(e, smoothing), npts)[1] for e in edges)
                    bands.append(Series(list(map(fx, downsample(bx, mean, npts)[0])), lo, ys2=hi, kind="band",
                                        color=color))
            for xs, ys in runs_xy:
                xs, ys = downsample(list(xs), ema(ys, smoothing), npts)
                xs = list(map(fx, xs))
                if xs:
                    xmin, xmax = min(xmin, min(xs)), max(xmax, max(xs))
                label = (name_of if len(names) == 1 else f"{name_of} {name}") if many else name
                if label and banded:  # every run counts in n; those that never left the plateau are said
                    censored = sum(1 for r in members if data.plateau.get(r) is None)
                    label += f" (n={len(members)}" + (f", {censored} no plateau" if censored else "") + ")"
                spec.series.append(Series(xs, ys, label=label.strip(), color=color))
                for r in members if many else ():
                    ps = data.plateau.get(r)
                    y = _at(xs, ys, fx(ps)) if ps is not None and colours.get(u) != 240 else None
                    if y is not None:
                        marks[0].append(fx(ps))
                        marks[1].append(y)
        if group == "loss" and (curves or {}).get(members[0]) and describes(data, members[0]):
            xs, ys = downsample(*map(list, curves[members[0]]), npts)
            odes.append(Series(list(map(fx, xs)), ys, label="theory (ODE)", color="gray"))
        if not many:  # one run, or one group: red lines
            spec.vlines += [(fx(ps), "red") for r in members if (ps := data.plateau.get(r)) is not None]
    spec.series[:0] = bands + odes  # under the runs' lines
    if marks[0]:
        spec.series.append(Series(*marks, label="plateau step", color="red", kind="points", marker="◆"))
    if spec.log_x:  # a log axis starts at the first positive x
        xmin = min((x for s in spec.series for x in s.xs if x > 0), default=xmin)
    return xmin, xmax


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
        Binding("x", "log_x", "Log x"),
        Binding("z", "zoom(1)", "Zoom in"),
        Binding("Z", "zoom(-1)", "Zoom out"),
        Binding("left", "pan(-1)", "Pan left", show=False),
        Binding("right", "pan(1)", "Pan right", show=False),
        Binding("home", "reset", "Reset view", show=False),
        Binding("g", "toggle('grid')", "Grid"),
        Binding("t", "toggle('tiles')", "Tiles"),
        Binding("b", "toggle('band')", "Mean ± std"),
        Binding("f", "full_screen", "Full screen"),
        Binding("pagedown", "page(1)", "Next charts", show=False),
        Binding("pageup", "page(-1)", "Prev charts", show=False),
        Binding("p", "figure('png')", "Figure"),
        Binding("P", "figure('svg')", "Figure (SVG)", show=False),
        Binding("w", "figure('png', True)", "Figure as…", show=False),
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
    band: reactive[bool] = reactive(True, init=False)  # grouped runs (Runs g): one mean ± std per group
    log_x: reactive[bool | None] = reactive(None, init=False)  # a log step axis (None: when plateaus span a decade)
    tiles: reactive[bool] = reactive(False, init=False)  # one chart per metric, side by side

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
            return [r for r in view.marked if r not in view.hidden]
        if self.grid or (self.band and self.group_keys):
            return [r for r in view.shown if r not in view.hidden][:64]  # at most 64 runs
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
        watch_log_x = _redraw_on_change

    def watch_tiles(self, on: bool) -> None:
        if on and self.grid:
            self.grid = False  # one layout at a time: tiles (per metric) or the grid (per run or group)
        self._redraw_on_change()

    def watch_band(self) -> None:
        self.post_message(SeriesWanted())
        self._redraw_on_change()

    def watch_grid(self, on: bool) -> None:
        self.page = 0
        if on and self.tiles:
            self.tiles = False
        self.post_message(SeriesWanted())
        self._redraw_on_change()

    def action_page(self, delta: int) -> None:
        if self.grid or self.tiles:
            self.page = max(0, min(self._pages - 1, self.page + delta))

    def units(self) -> list[tuple[str, list[str]]]:
        """What the chart draws: (name, run ids) per run, or per group (mean ± std)."""
        return grid_units(self.data, self.group_keys if self.band else [])

    def chart_spec(self, width: int, group: str | None = None, **kw) -> PlotSpec:
        """The overlay of ``group`` (default: this panel's metric) with this panel's log axes, smoothing, theory
        curves and grouping (``kw``: the grid's runs, the full-screen chart's zoom, focus and x axis)."""
        kw = dict(log_loss=self.log_loss, theory=self.theory, smoothing=SMOOTHING[self.smoothing],
                  curves=self.theory_curves, log_x=self.log_x, group_keys=self.group_keys if self.band else None) | kw
        return curves_spec(self.data, group or self.group, width=width, **kw)

    def action_full_screen(self) -> None:
        from sparse_tui.tui.screens.chart import ChartScreen

        self.app.push_screen(ChartScreen(self))

    def action_figure(self, fmt: str, ask: bool = False) -> None:
        """The figure of the runs shown, with their groups' mean ± std when the chart shows it."""
        ids = list(self.data.run_ids) if self.data else []
        groups = list(self.group_keys) if self.band and self.group_keys else None
        self.post_message(FigureRequested("curves", fmt, payload=(ids, groups) if ids else None, ask=ask))

    def action_cycle_group(self, delta: int) -> None:
        groups = available_groups(self.data)
        self.group = groups[(groups.index(self.group) + delta) % len(groups)] if self.group in groups else groups[0]

    def action_smooth(self, delta: int) -> None:
        self.smoothing = max(0, min(len(SMOOTHING) - 1, self.smoothing + delta))

    def shows_log_x(self, run_ids: list[str] | None = None) -> bool:
        return log_x_auto(self.data, run_ids) if self.log_x is None else self.log_x

    def action_log_x(self) -> None:
        """x: the step axis log or linear (the opposite of what it shows; at first it follows the plateaus)."""
        self.log_x = not self.shows_log_x()

    def action_zoom(self, delta: int) -> None:
        """z / Z: zoom in or out, in at the plateau of the run under the Runs cursor when it is drawn."""
        if self.zoom == 0 and delta > 0 and (at := self._plateau_fraction(self.app.main.current)) is not None:
            self.set_reactive(CurvesPanel.center, at)
        self.zoom = max(0, min(len(ZOOMS) - 1, self.zoom + delta))
        self.action_pan(0)  # (the window stays inside the data)

    def _plateau_fraction(self, run_id: str | None) -> float | None:
        """Where the run's plateau step lies on the unzoomed x axis, as a fraction (None: not drawn, or none)."""
        d = self.data
        if d is None or run_id not in d.run_ids or not (ps := d.plateau.get(run_id)):
            return None
        spec = self.chart_spec(80)
        xs = [x for s in spec.series for x in s.xs if x > 0 or not spec.log_x]
        return fraction_at(min(xs), max(xs), ps, spec.log_x) if xs else None

    def action_pan(self, delta: int) -> None:
        self.center = pan(self.center, ZOOMS[self.zoom], delta)

    def action_reset(self) -> None:
        """Home: the whole x range again."""
        self.set_reactive(CurvesPanel.center, 0.5)
        self.zoom = 0
        self._redraw_on_change()

    def redraw(self) -> None:
        plot = self.query_one(PlotView)
        z = ZOOMS[self.zoom]
        parts = [f"Curves · {'every metric' if self.tiles else self.group}"]
        if self.band and self.group_keys:
            parts.append(f"mean ± std by {', '.join(short_keys(self.group_keys).values())}")
        if self.grid or self.tiles:
            if self.tiles:  # one chart per metric, titled by it
                units = [(g, None, g) for g in available_groups(self.data)]
            else:
                units = [(self.group, ids, title) for title, ids in grid_units(self.data, self.group_keys)]
            cols, rows = grid_shape(max(1, len(units)), plot.size.width or 80, (plot.size.height or 20) - 1)
            width = max(20, (plot.size.width or 80) // cols)
            specs = [self.chart_spec(width, g, run_ids=ids, title=title, zoom=z, center=self.center)
                     for g, ids, title in units]
            self._pages = pages = max(1, -(-len(units) // (cols * rows)))
            parts.append(f"{'tiles' if self.tiles else 'grid'} of {len(units)}"
                         + (f" · page {self.page + 1}/{pages}" if pages > 1 else ""))
            plot.show_grid(specs, min(self.page, pages - 1))
        else:
            plot.show(self.chart_spec(plot.size.width or 80, zoom=z, center=self.center))
        if self.shows_log_x():
            parts.append("log x")
        if self.smoothing:
            parts.append(f"EMA {SMOOTHING[self.smoothing]}")
        if z < 1:
            parts.append(f"zoom x{1 / z:g}")
        self.border_title = " · ".join(parts)
        self.border_subtitle = "m metric · x log x · t tiles · g grid · p figure"
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
                             + (f" by {', '.join(short_keys(self.group_keys).values())}" if self.group_keys
                                else " (g in Runs: groups)") + " · pgup/pgdn more · g one plot"))
            return
        if len(d.run_ids) > 3:  # one line: the legend names the runs, the chart keeps the height
            ps = sorted(v for r in d.run_ids if (v := d.plateau.get(r)) is not None)
            info.update(Text(f"{len(d.run_ids)} runs · {len(ps)} left the plateau"
                             + (f" (steps {fmt_step(ps[0])} … {fmt_step(ps[-1])})" if ps else "")
                             + ("" if self.group_keys else " · g in Runs: mean ± std")))
            return
        parts = []
        for rid in d.run_ids[:3]:
            s = d.series.get(rid, {})
            last = {k: v[1][-1] for k, v in s.items() if v[1]}
            ps = d.plateau.get(rid)
            parts.append(
                f"{rid} {d.labels.get(rid, rid)}  plateau {fmt_num(ps, '.4g') if ps is not None else '-'}"
                f"  loss {fmt_num(last.get('test/loss', last.get('train/loss')))}"
                + (f"  acc {fmt_num(last['test/acc'], '.3f')}"
                   if "test/acc" in last and not math.isnan(last['test/acc']) else "")
            )
        info.update(Text("\n".join(parts)))  # plain text: names and statuses may hold [..]
