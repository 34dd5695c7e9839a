"""One chart of the Curves panel full-screen (issue 34, after wandb-tui's chart view): zoom and pan on the step (or
time) axis and on y, Home to reset, focus on one run (the others grey; z zooms at its plateau), the x axis as the
step or the time since each run started, log or linear.

The time of a point is the wall-clock time the store logged it (``store.reads.step_clock``); a run of a store from
before those times were kept has its points' interpolated linearly in the step between its start and its end, which
the axis label then says. The screen draws the Curves panel's data with the panel's metric, log axes, smoothing and
grouping, afresh every second and on every key.
"""

from __future__ import annotations

import math

from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Static

from sparse_tui.store.reads import step_clock
from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.plot import fraction_at, pan, zoom_window
from sparse_tui.tui.widgets.plot_view import PlotView

ZOOMS = (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125)
TIME_LABEL = "minutes since start"
INTERPOLATED = " (interpolated in the step where no time was stored)"


def time_of(rec, steps: list[int], times: list[float]):
    """Step -> minutes since the run started (``step_clock``: its logged times, else interpolated)."""
    start, _, at = step_clock(rec, steps, times)
    return lambda step: (at(step) - start) / 60.0


class ChartScreen(Guarded, Screen):
    BINDINGS = [
        Binding("escape,q,f", "dismiss", "Close"),
        Binding("z", "zoom(1)", "Zoom in"),
        Binding("Z", "zoom(-1)", "Zoom out"),
        Binding("left", "pan(-1)", "Pan left"),
        Binding("right", "pan(1)", "Pan right"),
        Binding("y", "y_zoom(1)", "Zoom y"),
        Binding("Y", "y_zoom(-1)", "Unzoom y"),
        Binding("shift+up,k", "y_pan(1)", "Pan up"),
        Binding("shift+down,j", "y_pan(-1)", "Pan down"),
        Binding("home", "reset", "Reset"),
        Binding("x", "log_x", "Log x"),
        Binding("n,down", "focus_run(1)", "Next run"),
        Binding("N,up", "focus_run(-1)", "Prev run"),
        Binding("a", "focus_run(0)", "All runs"),
        Binding("t", "time_axis", "Step / time"),
        Binding("l", "log", "Log y"),
    ]
    DEFAULT_CSS = """
    ChartScreen PlotView { height: 1fr; }
    ChartScreen #chart-info { height: auto; max-height: 2; color: $text-muted; }
    """

    zoom: reactive[int] = reactive(0, init=False)
    center: reactive[float] = reactive(0.5, init=False)
    focus_index: reactive[int] = reactive(-1, init=False)  # index into the runs shown; -1: all alike
    time_axis: reactive[bool] = reactive(False, init=False)
    y_zoom: reactive[int] = reactive(0, init=False)  # index into ZOOMS, of the y range
    y_center: reactive[float] = reactive(0.5, init=False)  # centre of the y window, as a fraction of the data's

    def __init__(self, curves) -> None:
        super().__init__()
        self.curves = curves  # the Curves panel: its data and settings
        self._times: dict[str, tuple[list[int], list[float]]] = {}  # run id -> its logged (steps, wall times)

    def compose(self) -> ComposeResult:
        yield PlotView(id="chart-plot")
        yield Static("", id="chart-info")

    def on_mount(self) -> None:
        self.set_interval(1.0, self.redraw)
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def _redraw(self, *_: object) -> None:
        if self.is_mounted:
            self.redraw()

    watch_zoom = watch_center = watch_focus_index = watch_time_axis = watch_y_zoom = watch_y_center = _redraw

    def action_zoom(self, delta: int) -> None:
        """z / Z: zoom in or out; in, at the focused run's plateau (n / N focus one) when it has one."""
        focus = self._focus()
        if self.zoom == 0 and delta > 0 and focus and (at := self._plateau_at(focus[1])) is not None:
            self.set_reactive(ChartScreen.center, at)
        self.zoom = max(0, min(len(ZOOMS) - 1, self.zoom + delta))
        self.action_pan(0)

    def _plateau_at(self, run_ids: list[str]) -> float | None:
        """The fraction of the unzoomed x axis at the first plateau step of these runs (None: none)."""
        ps = [p for r in run_ids if (p := (self.curves.data.plateau.get(r) if self.curves.data else None))]
        lo, hi, log = self._x_range()
        return fraction_at(lo, hi, ps[0], log) if ps and hi > lo else None

    def _spec(self, **kw):
        focus = self._focus()
        return self.curves.chart_spec(self.query_one(PlotView).size.width or 80, focus=focus[1] if focus else None,
                                      x_of=self._x_of(), **kw)

    def _x_range(self) -> tuple[float, float, bool]:
        spec = self._spec()
        xs = [x for s in spec.series for x in s.xs if x > 0 or not spec.log_x]
        return (min(xs), max(xs), spec.log_x) if xs else (0.0, 0.0, spec.log_x)

    def _y_window(self) -> tuple[float, float] | None:
        """The y range a y zoom shows (None: the chart's own), panned by ``y_center``."""
        if self.y_zoom == 0:
            return None
        spec = self._spec()
        ys = [y for s in spec.series for y in (*s.ys, *(s.ys2 or [])) if y is not None and math.isfinite(y)
              and (y > 0 or not spec.log_y)]
        if not ys:
            return None
        lo, hi = spec.ylim or (min(ys), max(ys))
        return zoom_window(lo, hi, ZOOMS[self.y_zoom], self.y_center, spec.log_y)

    def action_y_zoom(self, delta: int) -> None:
        self.y_zoom = max(0, min(len(ZOOMS) - 1, self.y_zoom + delta))
        self.action_y_pan(0)

    def action_y_pan(self, delta: int) -> None:
        self.y_center = pan(self.y_center, ZOOMS[self.y_zoom], delta)

    def action_reset(self) -> None:
        """Home: the whole data again (x and y)."""
        for attr in ("center", "y_center"):
            self.set_reactive(getattr(ChartScreen, attr), 0.5)
        self.set_reactive(ChartScreen.y_zoom, 0)
        self.zoom = 0
        self.redraw()

    def action_log_x(self) -> None:
        self.curves.log_x = not self.curves.shows_log_x()
        self.redraw()

    def action_pan(self, delta: int) -> None:
        self.center = pan(self.center, ZOOMS[self.zoom], delta)

    def action_focus_run(self, delta: int) -> None:
        n = len(self.curves.units())
        self.focus_index = -1 if delta == 0 or n == 0 else (self.focus_index + delta) % n

    def action_time_axis(self) -> None:
        self.time_axis = not self.time_axis

    def action_log(self) -> None:
        self.curves.log_loss = not self.curves.log_loss
        self.redraw()

    def _focus(self) -> tuple[str, list[str]] | None:
        units = self.curves.units()
        return units[self.focus_index] if 0 <= self.focus_index < len(units) else None

    def _x_of(self) -> dict | None:
        """Each run's step -> minutes since its start, from the times the store logged (read once for an ended run,
        each second for one still running)."""
        if not self.time_axis or self.app.store is None:
            return None
        recs = {r.run_id: r for r in self.app.main.records}
        out = {}
        for rid in (self.curves.data.run_ids if self.curves.data else []):
            if rid not in recs:
                continue
            if rid not in self._times or recs[rid].status in ("queued", "running"):
                self._times[rid] = self.app.store.metric_times(rid)
            out[rid] = time_of(recs[rid], *self._times[rid])
        return out

    def redraw(self) -> None:
        plot = self.query_one(PlotView)
        units = self.curves.units()
        focus = self._focus()
        spec = self._spec(zoom=ZOOMS[self.zoom], center=self.center, ylim=self._y_window())
        if self.time_axis:
            guessed = any(not self._times.get(r, ([], []))[0] for r in (self.curves.data.run_ids if self.curves.data
                                                                       else []))
            spec.xlabel = TIME_LABEL + (INTERPOLATED if guessed else "")
        plot.show(spec)
        what = f"focus: {focus[0]}" if focus else f"{len(units)} curves"
        y = f" · y x{1 / ZOOMS[self.y_zoom]:g}" if self.y_zoom else ""
        self.query_one("#chart-info", Static).update(
            f"{what} · zoom x{1 / ZOOMS[self.zoom]:g}{y} · x: {'time' if self.time_axis else 'step'}"
            f"{' (log)' if spec.log_x else ''} · z/Z zoom · ←/→ pan · y/Y zoom y · j/k pan y · Home reset · "
            "n/N focus a run, a all · t step/time · x log x · l log y · Esc back")
