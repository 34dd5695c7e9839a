"""One chart of the Curves panel full-screen (issue 34, after wandb-tui's chart view): zoom and pan on the step (or
time) axis, focus on one run (the others grey), the x axis as the step or the time since each run started.

The store keeps no time per metric point, so the time of a point is interpolated linearly in its step between the
run's start and its end (or its last heartbeat while it runs), as the TensorBoard export does: an approximation that
assumes a steady pace (warm-up, evaluations and pauses shift it), said in the axis label. The screen draws the
Curves panel's data with the panel's metric, log axis, smoothing and grouping, afresh every second and on every key.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Static

from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.widgets.plot_view import PlotView

ZOOMS = (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125)
TIME_LABEL = "minutes since start (interpolated: no time per point is stored)"


def time_of(rec, now: float):
    """Step -> minutes since the run started, interpolated between its start and its end (None: no times)."""
    start = rec.started_at
    end = rec.ended_at or (now if rec.status == "running" else rec.heartbeat_at)
    if start is None or end is None or not rec.step:
        return None
    rate = (end - start) / 60.0 / rec.step
    return lambda step: step * rate


class ChartScreen(Guarded, Screen):
    BINDINGS = [
        Binding("escape,q,f", "dismiss", "Close"),
        Binding("z", "zoom(1)", "Zoom in"),
        Binding("Z", "zoom(-1)", "Zoom out"),
        Binding("left", "pan(-1)", "Pan left"),
        Binding("right", "pan(1)", "Pan right"),
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

    def __init__(self, curves) -> None:
        super().__init__()
        self.curves = curves  # the Curves panel: its data and settings

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

    watch_zoom = watch_center = watch_focus_index = watch_time_axis = _redraw

    def action_zoom(self, delta: int) -> None:
        self.zoom = max(0, min(len(ZOOMS) - 1, self.zoom + delta))

    def action_pan(self, delta: int) -> None:
        half = ZOOMS[self.zoom] / 2
        self.center = max(half, min(1.0 - half, self.center + delta * ZOOMS[self.zoom] / 4))

    def action_focus_run(self, delta: int) -> None:
        n = len(self.curves.units())
        self.focus_index = -1 if delta == 0 or n == 0 else (self.focus_index + delta) % n

    def action_time_axis(self) -> None:
        self.time_axis = not self.time_axis

    def action_log(self) -> None:
        self.curves.log_loss = not self.curves.log_loss
        self.redraw()

    def redraw(self) -> None:
        plot = self.query_one(PlotView)
        units = self.curves.units()
        focus = units[self.focus_index] if 0 <= self.focus_index < len(units) else None
        x_of = None
        if self.time_axis:
            recs = {r.run_id: r for r in self.app.main.records}
            now = self.app.clock()
            x_of = {rid: f for rid in (self.curves.data.run_ids if self.curves.data else [])
                    if rid in recs and (f := time_of(recs[rid], now)) is not None}
        spec = self.curves.chart_spec(plot.size.width or 80, zoom=ZOOMS[self.zoom], center=self.center,
                                      focus=focus[1] if focus else None, x_of=x_of)
        if x_of is not None:
            spec.xlabel = TIME_LABEL
        plot.show(spec)
        what = f"focus: {focus[0]}" if focus else f"{len(units)} curves"
        self.query_one("#chart-info", Static).update(
            f"{what} · zoom x{1 / ZOOMS[self.zoom]:g} · x: {'time' if self.time_axis else 'step'} · "
            "z/Z zoom · ←/→ pan · n/N focus a run, a all · t step/time · l log · Esc back")
