"""The Scatter panel (issue 34, after TensorBoard HParams' scatter view): one point per run the Runs table's filter
shows, a final metric or the plateau step (y) against a hyperparameter that varies among those runs (x).

``x`` / ``y`` step through the hyperparameters and the values, ``l`` switches the log axes (default: log where
every value is positive and they span a decade or more), ``p`` / ``P`` write the figure (``panels.scatter_figure``).
Runs without the value are left out and counted: a run that never left the plateau has no plateau step (censored,
as in the fit), a running run no final metric. ``scatter_spec`` is pure (tested without a screen).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

from sparse_tui.store import RunRecord
from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.messages import FigureRequested
from sparse_tui.tui.plot import PlotSpec, Series
from sparse_tui.tui.render.runs import short_keys, value_key
from sparse_tui.tui.widgets.panel import ConsolePanel, StoreView
from sparse_tui.tui.widgets.plot_view import PlotView
from sparse_tui.tui.widgets.shallow_focus import ShallowFocus

PLATEAU = "plateau step"


@dataclass
class Scatter:
    """What the panel shows (and the figure draws): the points, the axes, and what was left out."""

    x: str
    y: str
    points: list[tuple[float, float, str]]  # (x, y, run id)
    log_x: bool
    log_y: bool
    censored: int = 0  # runs that never left the plateau (y = plateau step)
    missing: int = 0  # runs without the value (running, failed early, or another task)


def numeric(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def choices(records: list[RunRecord]) -> tuple[list[str], list[str]]:
    """The x choices (the numeric hyperparameters that vary among the runs, seed last) and the y choices (the
    plateau step, then every final metric the runs have)."""
    keys = dict.fromkeys(k for r in records for k in r.params)
    xs = [k for k in keys if k not in ("name", "description")
          and len({repr(r.params.get(k)) for r in records}) > 1
          and all(numeric(r.params.get(k)) is not None for r in records if k in r.params)]
    xs.sort(key=lambda k: k == "seed")
    ys = [PLATEAU, *sorted({k for r in records for k in r.final if "/H" not in k})]
    return xs, ys


def auto_log(values: list[float]) -> bool:
    pos = [v for v in values if v > 0]
    return len(pos) == len(values) > 1 and max(pos) >= 10 * min(pos)


def scatter_data(records: list[RunRecord], last: dict[str, dict], x: str, y: str,
                 log: tuple[bool | None, bool | None] = (None, None)) -> Scatter:
    """The points of ``records``: ``x`` a hyperparameter, ``y`` the plateau step or a final metric (a failed run's
    stored one, else none). ``log``: forced log axes (None: automatic)."""
    pts, censored, missing = [], 0, 0
    for r in records:
        xv = numeric(r.params.get(x))
        if y == PLATEAU:
            yv = numeric(r.plateau_step)
            if yv is None and r.status == "finished":
                censored += 1
                continue
        else:
            vals = r.final or (last.get(r.run_id, {}) if r.status != "running" else {})
            yv = numeric(vals.get(y))
        if xv is None or yv is None:
            missing += 1
            continue
        pts.append((xv, yv, r.run_id))
    lx = auto_log([p[0] for p in pts]) if log[0] is None else log[0]
    ly = auto_log([p[1] for p in pts]) if log[1] is None else log[1]
    return Scatter(x, y, pts, lx, ly, censored, missing)


def scatter_spec(s: Scatter) -> PlotSpec:
    title = short_keys([s.x])[s.x] if s.x else ""
    return PlotSpec([Series([p[0] for p in s.points], [p[1] for p in s.points], kind="points", color="cyan")],
                    xlabel=title, log_x=s.log_x, log_y=s.log_y, show_legend=False,
                    empty="no run has both values" if s.x else "no hyperparameter varies among these runs")


class ScatterPanel(ConsolePanel, ShallowFocus, Guarded, Vertical, can_focus=True):
    BINDINGS = [
        Binding("x", "cycle('x', 1)", "Next x"),
        Binding("y", "cycle('y', 1)", "Next y"),
        Binding("X", "cycle('x', -1)", "Prev x", show=False),
        Binding("Y", "cycle('y', -1)", "Prev y", show=False),
        Binding("l", "log", "Log axes"),
        Binding("p", "figure('png')", "Figure"),
        Binding("P", "figure('svg')", "Figure (SVG)", show=False),
        Binding("w", "figure('png', True)", "Figure as…", show=False),
    ]
    DEFAULT_CSS = """
    ScatterPanel PlotView { height: 1fr; }
    ScatterPanel #scatter-info { height: auto; max-height: 3; color: $text-muted; }
    """
    LOGS = ((None, None), (False, False), (True, False), (False, True), (True, True))  # l steps through them

    x: reactive[str] = reactive("", init=False)
    y: reactive[str] = reactive(PLATEAU, init=False)
    log: reactive[int] = reactive(0, init=False)  # index into LOGS (0: automatic)

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.records: list[RunRecord] = []
        self.last: dict[str, dict] = {}
        self.data: Scatter | None = None

    def compose(self) -> ComposeResult:
        yield PlotView(id="scatter-plot")
        yield Static("", id="scatter-info")

    def store_changed(self, view: StoreView) -> None:
        shown = set(view.shown) - view.hidden
        self.records = [r for r in view.records if r.run_id in shown]
        self.last = view.last
        self.redraw()

    panel_shown = store_changed

    def action_cycle(self, axis: str, delta: int) -> None:
        options = choices(self.records)[0 if axis == "x" else 1]
        if options:
            now = getattr(self.data, axis) if self.data is not None else ""  # what is shown
            setattr(self, axis, options[(options.index(now) + delta) % len(options) if now in options else 0])

    def action_log(self) -> None:
        self.log = (self.log + 1) % len(self.LOGS)

    def action_figure(self, fmt: str, ask: bool = False) -> None:
        if self.data is not None and self.data.points:
            self.post_message(FigureRequested("scatter", fmt, payload=self.data, ask=ask))
        else:
            self.notify("no points to draw", severity="warning")

    def _redraw(self, *_: object) -> None:
        if self.is_mounted:
            self.redraw()

    watch_x = watch_y = watch_log = _redraw

    def redraw(self) -> None:
        xs, ys = choices(self.records)
        x = self.x if self.x in xs else (xs[0] if xs else "")
        y = self.y if self.y in ys else PLATEAU
        self.data = d = scatter_data(self.records, self.last, x, y, self.LOGS[self.log])
        self.query_one(PlotView).show(scatter_spec(d))
        axes = "auto" if self.log == 0 else "/".join(("log" if on else "lin") for on in self.LOGS[self.log])
        title = short_keys([x])[x] if x else "-"
        self.border_title = f"Scatter · {y} vs {title} · axes {axes}"
        self.border_subtitle = "x / y axis · l log · p figure"
        left = [f"{d.censored} never left the plateau" if d.censored else "",
                f"{d.missing} without the value" if d.missing else ""]
        vals = sorted((p[0] for p in d.points), key=value_key)
        span = f" ({title} {vals[0]:g} … {vals[-1]:g})" if vals and x else ""
        self.query_one("#scatter-info", Static).update(Text(
            f"{len(d.points)} of {len(self.records)} runs the Runs filter shows{span}"
            + "".join(f" · {t}" for t in left if t) + " · x / y: next axis"))
