"""A plot widget that never keeps plotext state: it holds a ``PlotSpec`` and draws it afresh on every render
(``tui.plot.draw``), at whatever size the widget has now. A drawing error becomes a red line in the plot, is logged,
and the app goes on."""

from __future__ import annotations

from rich.text import Text
from textual_plotext import PlotextPlot

from sparse_tui.tui.plot import PlotSpec, draw, draw_grid


class PlotView(PlotextPlot):
    """Textual-plotext's widget (for its theme handling) with a stateless render."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.spec = PlotSpec()
        self.grid: list[PlotSpec] | None = None  # small multiples instead of one plot
        self.page = 0
        self._error: str | None = None

    def show(self, spec: PlotSpec) -> None:
        self.spec, self.grid = spec, None
        self.refresh()

    def show_grid(self, specs: list[PlotSpec], page: int = 0) -> None:
        self.grid, self.page = list(specs), page
        self.refresh()

    def render(self) -> Text:
        w, h = self.size.width, self.size.height
        try:
            theme = self._get_plotext_theme_name(self.app.theme)
            if self.grid is not None:
                out = draw_grid(self.grid, w, h, self.page, theme=theme)
            else:
                out = draw(self.spec, w, h, theme=theme)
            self._error = None
            return out
        except Exception as e:  # noqa: BLE001 - a plot must never take the console down
            text = f"plot error: {type(e).__name__}: {e}"
            if text != self._error:  # report once per distinct error, not on every repaint
                self._error = text
                report = getattr(self.app, "report", None)
                if report is not None:
                    self.app.call_later(report, e)
            return Text(text, style="red")
