"""The Phase-diagram panel: a heatmap of plateau step (or final accuracy / loss / emergence) over a two-parameter
sweep, e.g. model.d_model × train.lr or task.train_size × train.lr (blog 000 asks for such phase diagrams)."""

from __future__ import annotations

import math

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import Input, Label, Static

from sparse_tui.base.numbers import fmt_fit, fmt_num
from sparse_tui.science.phase import PHASE_VALUES, cell_note, phase_grid, phase_slice
from sparse_tui.store import RunRecord
from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.messages import FigureRequested
from sparse_tui.tui.render.heatmap import heatmap, scale_bar
from sparse_tui.tui.render.runs import swept_keys
from sparse_tui.tui.selection import chosen_runs
from sparse_tui.tui.widgets.ordered_input import OrderedInput
from sparse_tui.tui.widgets.panel import ConsolePanel, StoreView
from sparse_tui.tui.widgets.shallow_focus import ShallowFocus

VALUES = list(PHASE_VALUES)


class PhasePanel(ConsolePanel, ShallowFocus, Guarded, Vertical, can_focus=True):
    BINDINGS = [
        Binding("x", "cycle('x')", "X param"),
        Binding("y", "cycle('y')", "Y param"),
        Binding("w", "swap", "Swap"),
        Binding("m", "value", "Value"),
        Binding("s", "next_slice", "Next slice", show=False),
        Binding("slash", "focus_filter", "Filter"),
        Binding("p", "figure('png')", "Figure"),
        Binding("P", "figure('svg')", "Figure (SVG)", show=False),
        Binding("escape", "leave_input", "Leave field", show=False),
    ]

    DEFAULT_CSS = """
    PhasePanel Horizontal.phase-inputs { height: 1; }
    PhasePanel Horizontal.phase-inputs Label { width: auto; color: $text-muted; padding: 0 1; }
    PhasePanel #phase-filter { width: 1fr; }
    PhasePanel #phase-info { height: auto; color: $text-muted; }
    """

    # what the diagram shows (x / y / w / m): each change redraws it
    x: reactive[str | None] = reactive(None, init=False)
    y: reactive[str | None] = reactive(None, init=False)
    value: reactive[str] = reactive("plateau", init=False)
    slice: reactive[int] = reactive(0, init=False)  # which set of like runs (s), when other keys differ too

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.records: list[RunRecord] = []
        self.last: dict = {}
        self.current: str | None = None  # the app's current run: its preset is the default selection
        self.keys: list[str] = []
        self.filter = ""
        self._sig = None
        self.figure_data = None  # (x key, y key, xs, ys, grid, counts, value) of the diagram shown

    def _redraw_on_change(self, *_: object) -> None:
        if self.is_mounted:
            self.redraw()

    watch_x = watch_y = watch_value = watch_slice = _redraw_on_change

    def compose(self) -> ComposeResult:
        with Horizontal(classes="phase-inputs"):
            yield Label("runs")
            yield OrderedInput(placeholder="filter: preset name / words (default: current run's preset)",
                               id="phase-filter", compact=True)
        yield Static("", id="phase-info")
        with VerticalScroll():
            yield Static("", id="phase-map")

    def on_mount(self) -> None:
        self.border_title = "Phase diagram"
        self.border_subtitle = "x / y params · w swap · m value"

    @on(Input.Changed, "#phase-filter")
    def _filter(self, event: Input.Changed) -> None:
        self.filter = event.value.strip()
        self.redraw()

    @on(Input.Submitted, "#phase-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.focus()

    def store_changed(self, view: StoreView) -> None:
        self.records, self.last, self.current = view.records, view.last, view.current
        sig = (view.current, *((r.run_id, r.status, r.plateau_step, r.step) for r in view.records))
        if sig != self._sig:
            self._sig = sig
            self.redraw()

    panel_shown = store_changed

    def _selected(self) -> list[RunRecord]:
        """The filter's runs; without one, the runs of the current run's preset (else all runs)."""
        return chosen_runs(self.records, [], self.current, self.filter)

    def action_cycle(self, axis: str) -> None:
        if not self.keys:
            return
        cur = getattr(self, axis)
        i = (self.keys.index(cur) + 1) % len(self.keys) if cur in self.keys else 0
        setattr(self, axis, self.keys[i])

    def action_swap(self) -> None:
        x, y = self.y, self.x
        self.set_reactive(PhasePanel.x, x)  # one redraw for the swap
        self.y = y

    def action_value(self) -> None:
        self.value = VALUES[(VALUES.index(self.value) + 1) % len(VALUES)]

    def action_next_slice(self) -> None:
        self.slice += 1

    def action_figure(self, fmt: str) -> None:
        self.post_message(FigureRequested("phase", fmt))

    def action_focus_filter(self) -> None:
        self.query_one("#phase-filter", OrderedInput).focus_now()

    def redraw(self) -> None:
        recs = self._selected()
        self.keys = swept_keys(recs)
        if len(self.keys) == 1 and len({r.params.get("seed") for r in recs}) > 1:
            self.keys.append("seed")  # a one-parameter sweep over seeds: one row per seed, one run per cell
        info = self.query_one("#phase-info", Static)
        body = self.query_one("#phase-map", Static)
        if len(self.keys) < 2:
            info.update(
                f"{len(recs)} run(s); a phase diagram needs runs that differ in two parameters (or one and the seed) "
                f"(found: {', '.join(self.keys) or 'none'}). Sweep two keys in a preset, e.g. model.d_model × train.lr."
            )
            body.update("")
            return
        if self.x not in self.keys:  # (set_reactive: no watcher, this is the redraw)
            self.set_reactive(PhasePanel.x, self.keys[0])
        if self.y not in self.keys or self.y == self.x:
            self.set_reactive(PhasePanel.y, next(k for k in self.keys if k != self.x))
        recs, split = phase_slice(recs, self.x, self.y, self.slice, self.current)  # like runs only in a cell
        xs, ys, grid, counts = phase_grid(recs, self.x, self.y, self.value, self.last)
        note = ""
        if not any(math.isfinite(v) for row in grid for v in row):
            if self.value == "plateau":  # a result, not a missing value: say so, keep the value (m switches)
                note = "no run left the plateau (m: final accuracy, loss, emerged fraction)"
            else:  # this value has no data for these runs (fig1c's ode runs have no accuracy): the first that has
                for value in VALUES:
                    g = phase_grid(recs, self.x, self.y, value, self.last)
                    if any(math.isfinite(v) for row in g[2] for v in row):
                        note = f"{self.value}: no data for these runs, showing {value}"
                        self.set_reactive(PhasePanel.value, value)
                        xs, ys, grid, counts = g
                        break
        self.figure_data = (self.x, self.y, xs, ys, grid, counts, self.value)
        width = max(40, (self.size.width or 78) - 2)
        ylabels = [fmt_num(v, "g") if isinstance(v, (int, float)) else str(v) for v in ys]
        lw = max((len(s) for s in ylabels), default=1)
        cell = max(4, min(9, (width - lw - 2) // max(1, len(xs))))
        xlabels = [fmt_fit(v, cell) if isinstance(v, (int, float)) else str(v) for v in xs]  # 1e5, never 1000
        log = self.value == "plateau"
        vmin, vmax = (0.0, 1.0) if self.value in ("acc", "emerged") else (None, None)
        text = heatmap(grid, ylabels, xlabels, cell=cell, values=True, log=log, vmin=vmin, vmax=vmax)
        flat = [v for row in grid for v in row if math.isfinite(v)]
        if flat:
            lo, hi = (vmin, vmax) if vmin is not None else (min(flat), max(flat))
            text.append("\n")
            text.append_text(scale_bar(lo, hi, width=16, label=self.value, log=log))
        n_missing = sum(1 for row in grid for v in row if not math.isfinite(v))
        info.update(Text.assemble(
            (f"{note}\n", "bold yellow") if note else "", (f"{split}\n", "yellow") if split else "",
            (self.y, "bold"), " (rows) × ", (self.x, "bold"),
            f" (columns) · {PHASE_VALUES[self.value]}, {cell_note(counts)} · {len(recs)} run(s)"
            + (f" · {n_missing} empty cell(s)" if n_missing else "")))
        body.update(text)
