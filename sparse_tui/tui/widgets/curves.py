"""The Live curves panel: loss / accuracy / attention probes of one run or several overlaid (textual-plotext).

Data arrive as ``CurvesData`` from the store poller; the plot is redrawn only when they change (no flicker), with
every series downsampled to the widget width and log-scale series filtered to positive values.
"""

from __future__ import annotations

import math
import re

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Static
from textual_plotext import PlotextPlot

from sparse_tui.plotting import downsample, finite, positive
from sparse_tui.tui.messages import CurvesData
from sparse_tui.tui.render import fmt_num

GROUPS = ("loss", "accuracy", "attention", "toy", "entropy")
_ATTN = re.compile(r"^attn/L\d+/(relevant|select|copy)$")
COLORS = ("cyan", "orange", "green", "magenta", "yellow", "blue", "red", "white")


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


class CurvesPanel(Vertical, can_focus=True):
    BINDINGS = [
        Binding("m", "next_group", "Next metric"),
        Binding("M", "prev_group", "Prev metric", show=False),
        Binding("l", "toggle_log", "Log y"),
        Binding("h", "toggle_theory", "Theory"),
    ]
    HELP = "Curves"

    DEFAULT_CSS = """
    CurvesPanel PlotextPlot { height: 1fr; }
    CurvesPanel #curves-info { height: auto; max-height: 4; color: $text-muted; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.data: CurvesData | None = None
        self.group = 0
        self.log_loss = True
        self.theory = True
        self._last_size = None

    def compose(self) -> ComposeResult:
        yield PlotextPlot(id="curves-plot")
        yield Static("Select runs in the Runs panel (space marks several, enter views).", id="curves-info")

    def on_mount(self) -> None:
        self.border_title = "Curves"
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def update_data(self, data: CurvesData) -> None:
        self.data = data
        self.redraw()

    def action_next_group(self) -> None:
        self.group = (self.group + 1) % len(GROUPS)
        self.redraw()

    def action_prev_group(self) -> None:
        self.group = (self.group - 1) % len(GROUPS)
        self.redraw()

    def action_toggle_log(self) -> None:
        self.log_loss = not self.log_loss
        self.redraw()

    def action_toggle_theory(self) -> None:
        self.theory = not self.theory
        self.redraw()

    def redraw(self) -> None:
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_figure()
        group = GROUPS[self.group]
        self.border_title = f"Curves · {group}"
        self.border_subtitle = "m: metric · l: log · h: theory"
        d = self.data
        width = max(20, plot.size.width or 80)
        npts = 2 * width
        log = group == "loss" and self.log_loss
        drawn = 0
        if d is not None and d.run_ids:
            many = len(d.run_ids) > 1
            ci = 0
            for rid in d.run_ids:
                series = d.series.get(rid, {})
                names = group_series(group, list(series), many)
                for name in names:
                    xs, ys = series[name]
                    xs, ys = positive(xs, ys) if log else finite(xs, ys)
                    xs, ys = downsample(xs, ys, npts)
                    if not xs:
                        continue
                    label = f"{rid[:4]} {name}" if many else name
                    plt.plot(xs, ys, label=label, marker="braille", color=COLORS[ci % len(COLORS)])
                    ci += 1
                    drawn += 1
                if group == "loss" and self.theory and rid in d.theory:
                    xs, ys = d.theory[rid]
                    xs, ys = positive(xs, ys) if log else finite(xs, ys)
                    xs, ys = downsample(xs, ys, npts)
                    if xs:
                        plt.plot(xs, ys, label=f"{rid[:4]} theory" if many else "theory (ODE)", marker="dot",
                                 color="gray")
                        drawn += 1
                ps = d.plateau.get(rid)
                if ps is not None and drawn:
                    plt.vline(ps, "red")
            if log and drawn:
                plt.yscale("log")
            plt.xlabel("step")
        if not drawn:
            plt.title(f"{group}: no data" + ("" if d and d.run_ids else " — pick runs in the Runs panel"))
        plot.refresh()
        self._info()

    def _info(self) -> None:
        d = self.data
        info = self.query_one("#curves-info", Static)
        if d is None or not d.run_ids:
            info.update("No run selected: Runs panel (2), move to a run, enter. Space marks several to overlay.")
            return
        parts = []
        for rid in d.run_ids[:3]:
            s = d.series.get(rid, {})
            last = {k: v[1][-1] for k, v in s.items() if v[1]}
            ps = d.plateau.get(rid)
            parts.append(
                f"{d.labels.get(rid, rid)}  plateau {fmt_num(ps, '.4g') if ps is not None else '-'}"
                f"  loss {fmt_num(last.get('test/loss', last.get('train/loss')))}"
                + (f"  acc {fmt_num(last['test/acc'], '.3f')}" if "test/acc" in last and not math.isnan(last['test/acc']) else "")
            )
        if len(d.run_ids) > 3:
            parts.append(f"… and {len(d.run_ids) - 3} more")
        parts[-1] += "   [red]|[/] plateau step"
        info.update("\n".join(parts))
