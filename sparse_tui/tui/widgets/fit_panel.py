"""The Fitting panel: power-law fit of plateau length over chosen runs, beside the theory forecast and the paper's fits.

Runs: the marked runs of the Runs panel, else the runs of the current run's preset, or those matching the filter
(same syntax as the run table). Options: ``sparse-tui fit``'s (``--tie d:0.5,T:1 --bootstrap 200 --seed 0 --target
plateau_time --paper none --threshold 0.4 --where task.B=2``). The fit runs in a thread worker through
``fitreport.fit_store``, the function behind ``sparse-tui fit``; the panel shows the equivalent command line, which
prints the same numbers.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, Static

from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.messages import FigureRequested, FitDone, FitRequested, GuessRequested
from sparse_tui.tui.plot import PlotSpec, Series
from sparse_tui.tui.render.fit import FORECAST_AXIS
from sparse_tui.tui.selection import fit_selection_key
from sparse_tui.tui.widgets.ordered_input import OrderedInput
from sparse_tui.tui.widgets.panel import ConsolePanel, StoreView
from sparse_tui.tui.widgets.plot_view import PlotView
from sparse_tui.tui.widgets.shallow_focus import ShallowFocus


class FitPanel(ConsolePanel, ShallowFocus, Guarded, Vertical, can_focus=True):
    BINDINGS = [
        Binding("ctrl+f", "fit", "Fit", priority=True),
        Binding("enter", "fit", "Fit", show=False),
        Binding("g", "guess", "Guess vars"),
        Binding("slash", "focus_filter", "Runs"),
        Binding("v", "focus_vars", "Vars"),
        Binding("o", "focus_options", "Options"),
        Binding("p", "figure('png')", "Figure"),
        Binding("P", "figure('svg')", "Figure (SVG)", show=False),
        Binding("escape", "leave_input", "Leave field", show=False),
    ]

    SUBTITLE = "enter/ctrl+f fit · g guess vars · o options"
    DEFAULT_CSS = """
    FitPanel Horizontal.fit-inputs { height: 1; }
    FitPanel Horizontal.fit-inputs Label { width: 6; color: $text-muted; }
    FitPanel Input > .input--placeholder { color: $text-disabled; text-style: italic; }
    FitPanel #fit-runs { width: 1fr; }
    FitPanel #fit-vars { width: 1fr; }
    FitPanel #fit-opts { width: 1fr; }
    FitPanel #fit-table { height: auto; max-height: 9; text-wrap: nowrap; text-overflow: ellipsis; }
    FitPanel #fit-plot { height: 1fr; min-height: 6; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.result: FitDone | None = None
        self._guessed: str | None = None  # the vars text last filled in by a guess (typed vars are kept)
        self.guess_note = ""  # which variables the guess chose, and what it left out (said above the result)
        self._selection: tuple | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(classes="fit-inputs"):
            yield Label("runs")
            yield OrderedInput(placeholder="marked, else preset; or a filter", id="fit-runs", compact=True)
            yield Label(" vars")
            yield OrderedInput(placeholder="e.g. d T B, d T/B (g guesses)", id="fit-vars", compact=True)
        with Horizontal(classes="fit-inputs"):
            yield Label("opts")
            yield OrderedInput(
                placeholder="none (e.g. --tie d:0.5,T:1 --bootstrap 200 --where task.B=2)",
                id="fit-opts",
                compact=True,
                tooltip="sparse-tui fit options: --tie, --bootstrap, --seed, --target, --paper, --threshold, --where, "
                "--preset, --batch",
            )
        yield Static("Choose runs and variables, then Enter (ctrl+f).", id="fit-table")
        yield PlotView(id="fit-plot")

    def on_mount(self) -> None:
        self.border_title = "Fit: plateau length ~ C·Πxᵢ^βᵢ"
        self.border_subtitle = self.SUBTITLE
        self._draw()

    def on_descendant_focus(self, event) -> None:
        """In a field, keys type (``o`` types an o): the subtitle says how to leave it."""
        if isinstance(event.widget, Input):
            self.border_subtitle = "typing in a field · Esc leaves it · enter fits"

    def on_descendant_blur(self, event) -> None:
        if not (isinstance(self.app.focused, Input) and self in self.app.focused.ancestors):
            self.border_subtitle = self.SUBTITLE

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.action_fit()

    def action_fit(self) -> None:
        """Ask for a fit of the fields' runs and variables (variables that were guessed, or none, are guessed again
        for the runs chosen now)."""
        runs = self.query_one("#fit-runs", Input).value.strip()
        text = self.query_one("#fit-vars", Input).value
        variables = None if not text.split() or text == self._guessed else text.replace(",", " ").split()
        self.query_one("#fit-table", Static).update("fitting …")
        self.post_message(FitRequested(runs, variables, self.query_one("#fit-opts", Input).value))

    def action_guess(self) -> None:
        self.post_message(GuessRequested(self.query_one("#fit-runs", Input).value.strip()))

    def set_guess(self, variables: list[str], note: str = "") -> None:
        """Fill in guessed variables (the app's answer to ``GuessRequested``); ``note`` says which and why, above
        the result of a fit of them."""
        text = " ".join(variables)
        self.query_one("#fit-vars", Input).value = text
        self._guessed = text
        self.guess_note = note
        if note and self.result is None:
            self.query_one("#fit-table", Static).update(Text(note, style="cyan"))

    def panel_shown(self, view: StoreView) -> None:
        """The panel is shown for its default runs (the marked runs, else the current run's preset): variables that
        were guessed (or none) are guessed again for a new selection; variables the user typed stay."""
        key = fit_selection_key(view.records, view.marked, view.current)
        vars_ = self.query_one("#fit-vars", Input).value
        if key != self._selection and (not vars_.strip() or vars_ == self._guessed):
            self.action_guess()
        self._selection = key

    def action_focus_filter(self) -> None:
        self.query_one("#fit-runs", OrderedInput).focus_now()

    def action_focus_vars(self) -> None:
        self.query_one("#fit-vars", OrderedInput).focus_now()

    def action_focus_options(self) -> None:
        self.query_one("#fit-opts", OrderedInput).focus_now()

    def action_figure(self, fmt: str) -> None:
        self.post_message(FigureRequested("fit", fmt))

    def show_result(self, done: FitDone) -> None:
        """A fit's table (under the guess's note when its variables were guessed) and plot; a failed one's reason in
        red (no markup: messages hold [..])."""
        self.result = done if done.body is not None else None
        body = done.body if self.result else Text(done.info, style="red")
        if self.result and self.guess_note and self.query_one("#fit-vars", Input).value == self._guessed \
                and isinstance(body, Text):
            body = Text(self.guess_note + "\n", style="cyan", no_wrap=True, overflow="ellipsis")
            body.append_text(done.body)
        self.query_one("#fit-table", Static).update(body)
        self._draw()

    def _draw(self) -> None:
        self.query_one(PlotView).show(fit_spec(self.result))


def fit_spec(result: FitDone | None) -> PlotSpec:
    """Log-log plot of the fit: measured plateau against the theory forecast, the fitted law, censored runs. The
    points are drawn after the line, so they stay visible on it."""
    d = result.plot if result else None
    spec = PlotSpec(log_x=True, log_y=True, xlabel=(d or {}).get("xlabel", FORECAST_AXIS),
                    title=result.info if result else "", empty="plateau vs theory forecast (log-log): no fit yet")
    if not d or not d.get("x"):
        return spec
    if d.get("curve", True):
        spec.series.append(Series(d["x"], d["fit"], label="fitted law", color="orange"))
    else:  # a variable without a forecast: the law is not a function of x, so a line would zigzag between runs
        spec.series.append(Series(d["x"], d["fit"], label="fitted law per run", color="orange", kind="points",
                                  marker="+"))
    spec.series.append(Series(d["x"], d["y"], label="runs", color="cyan", kind="points"))
    if d.get("cx"):
        spec.series.append(Series(d["cx"], d["cy"], label="censored (≥)", color="red", kind="points", marker="x"))
    return spec
