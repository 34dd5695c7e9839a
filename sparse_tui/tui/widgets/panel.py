"""What the main screen (``screens/main.py``) asks of a console panel: a Textual widget that mixes in
``ConsolePanel`` (before the Textual class) and overrides the hooks it needs. ``tui/panels.py`` registers it.

The screen calls ``store_changed`` with each fresh read of the run store (the store poller's ``RunsUpdated``) on the
panel shown, and on every ``LIVE`` panel shown or not; ``panel_shown`` when the user switches to the panel (its key,
the palette, another panel's request); ``focus_panel`` to put the focus in it; the series hooks on every panel."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparse_tui.store import RunRecord
from sparse_tui.tui.messages import CurvesData


@dataclass(frozen=True)
class StoreView:
    """The newest read of the run store and the UI state, as the panels' hooks see them."""

    records: list[RunRecord]  # every run (the run table)
    last: dict[str, dict[str, float]]  # the latest metrics of running runs (and of ended runs without final ones)
    current: str | None  # the run under the Runs table's cursor
    marked: list[str]  # the marked runs that the Runs table's filter shows
    now: float  # 'now' for run ages (the app's clock)
    shown: list[str]  # the runs the Runs table's filter shows, in its order
    groups: list[str]  # the Runs table's grouping keys ([]: not grouped)
    hidden: frozenset[str] = frozenset()  # runs hidden in the charts (h in Runs: SelectionChanged)
    forecasts: dict[str, dict | None] = field(default_factory=dict)  # the poller's emergence forecasts, by run


class ConsolePanel:
    """The hooks of a console panel (each does nothing unless the panel overrides it), and the action of Esc in a
    text field of the panel (a binding to ``leave_input``)."""

    LIVE = False  # True: ``store_changed`` also while hidden (and every 5 s, for ages)

    @classmethod
    def create(cls, app: Any, pid: str) -> Any:
        """The panel's widget; ``app`` (the console) holds the start-up options (presets folder, preset ...)."""
        return cls(id=pid, classes="panel")

    def store_changed(self, view: StoreView) -> None:
        """A fresh read of the run store."""

    def panel_shown(self, view: StoreView) -> None:
        """The user switched to this panel."""

    def selection_changed(self, view: StoreView) -> list[str]:
        """The UI state changed: the runs whose metric series the panel draws (the store poller reads the union)."""
        return []

    def series_changed(self, data: CurvesData) -> None:
        """A fresh read of the metric series of the runs the panels asked for."""

    def focus_panel(self) -> None:
        """Put the focus in the panel (the panel itself; a panel with a table or a list may pick that)."""
        self.screen.set_focus(self)  # type: ignore[attr-defined]  (at once: Widget.focus defers it)

    def action_leave_input(self) -> None:
        """Esc in a text field of the panel: back to the panel (what was typed stays; digits switch panels again)."""
        self.focus_panel()
