"""The Fitting panel: power-law fit of plateau length over chosen runs, beside the theory forecast and the paper's fits.

Runs: the marked runs of the Runs panel, else the runs of the current run's preset, or those matching the filter
(same syntax as the run table). Options: ``sparse-tui fit``'s (``--tie d:0.5,T:1 --bootstrap 200 --seed 0 --target
plateau_time --paper none --where task.B=2``). The fit runs in a thread worker through ``fitreport.fit_store``, the
function behind ``sparse-tui fit``; the panel shows the equivalent command line, which prints the same numbers.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, Static
from textual_plotext import PlotextPlot

from sparse_tui.plotting import positive
from sparse_tui.tui.messages import FitDone


class FitPanel(Vertical, can_focus=True):
    BINDINGS = [
        Binding("ctrl+f", "fit", "Fit", priority=True),
        Binding("enter", "fit", "Fit", show=False),
        Binding("g", "guess", "Guess vars"),
        Binding("slash", "focus_filter", "Runs"),
        Binding("v", "focus_vars", "Vars"),
        Binding("o", "focus_options", "Options"),
    ]
    HELP = "Fit"

    DEFAULT_CSS = """
    FitPanel Horizontal.fit-inputs { height: 1; }
    FitPanel Horizontal.fit-inputs Label { width: 6; color: $text-muted; }
    FitPanel #fit-runs { width: 1fr; }
    FitPanel #fit-vars { width: 1fr; }
    FitPanel #fit-opts { width: 1fr; }
    FitPanel #fit-table { height: auto; max-height: 9; text-wrap: nowrap; text-overflow: ellipsis; }
    FitPanel #fit-plot { height: 1fr; min-height: 6; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.result: FitDone | None = None
        self.shown = 0  # results and errors shown (tests wait on it)

    def compose(self) -> ComposeResult:
        with Horizontal(classes="fit-inputs"):
            yield Label("runs")
            yield Input(placeholder="marked, else current preset; or filter words", id="fit-runs", compact=True)
            yield Label(" vars")
            yield Input(placeholder="e.g. d T B, d T/B (g guesses)", id="fit-vars", compact=True)
        with Horizontal(classes="fit-inputs"):
            yield Label("opts")
            yield Input(
                placeholder="--tie d:0.5,T:1 --bootstrap 200 --target plateau_time --where task.B=2",
                id="fit-opts",
                compact=True,
                tooltip="sparse-tui fit options: --tie, --bootstrap, --seed, --target, --paper, --where, --preset, "
                "--batch",
            )
        yield Static("Choose runs and variables, then Enter (ctrl+f).", id="fit-table")
        yield PlotextPlot(id="fit-plot")

    def on_mount(self) -> None:
        self.border_title = "Fit: plateau length ~ C·Πxᵢ^βᵢ"
        self.border_subtitle = "enter/ctrl+f fit · g guess vars · o options"
        self._draw()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.action_fit()

    def action_fit(self) -> None:
        runs = self.query_one("#fit-runs", Input).value.strip()
        vars_ = self.query_one("#fit-vars", Input).value.replace(",", " ").split()
        if not vars_:
            self.action_guess()
            vars_ = self.query_one("#fit-vars", Input).value.replace(",", " ").split()
        if not vars_:
            self.app.notify("no variables: type some (e.g. d T) or sweep a parameter", severity="warning")
            return
        self.query_one("#fit-table", Static).update("fitting …")
        self.app.fit_runs(runs, vars_, self.query_one("#fit-opts", Input).value)

    def action_guess(self) -> None:
        runs = self.query_one("#fit-runs", Input).value.strip()
        self.query_one("#fit-vars", Input).value = " ".join(self.app.guess_fit_variables(runs))

    def action_focus_filter(self) -> None:
        self.query_one("#fit-runs", Input).focus()

    def action_focus_vars(self) -> None:
        self.query_one("#fit-vars", Input).focus()

    def action_focus_options(self) -> None:
        self.query_one("#fit-opts", Input).focus()

    def show_result(self, done: FitDone) -> None:
        self.result = done
        self.shown += 1
        self.query_one("#fit-table", Static).update(done.body)
        self._draw()

    def show_error(self, text: str) -> None:
        self.result = None
        self.shown += 1
        self.query_one("#fit-table", Static).update(Text(text, style="red"))  # no markup: messages hold [..]
        self._draw()

    def _draw(self) -> None:
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_figure()
        d = self.result.plot if self.result else None
        if not d or not d.get("x"):
            plt.title("plateau vs theory forecast (log-log): no fit yet")
            plot.refresh()
            return
        xs, ys = positive(d["x"], d["y"])
        plt.scatter(xs, ys, label="runs", marker="dot", color="cyan")
        fx, fy = positive(d["x"], d["fit"])
        plt.plot(fx, fy, label="fitted law", marker="braille", color="orange")
        if d.get("cx"):
            plt.scatter(d["cx"], d["cy"], label="censored (≥)", marker="x", color="red")
        plt.xscale("log")
        plt.yscale("log")
        plt.xlabel("theory forecast Πxᵢ^forecastᵢ")
        plt.title(self.result.info)
        plot.refresh()
