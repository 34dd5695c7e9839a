"""Two runs side by side: the config keys they differ in (the curves overlay comes from the Curves panel)."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.screens.answer_once import AnswersOnce


class CompareScreen(AnswersOnce, Guarded, ModalScreen[bool]):
    """``x`` in Runs: what differs between two runs' configs. Enter / v: overlay their curves (labelled by name)."""

    BINDINGS = [Binding("escape,q", "close", "Close"), Binding("enter,v", "curves", "Overlay curves")]

    def __init__(self, names: tuple[str, str], ids: tuple[str, str], rows: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self.names, self.ids, self.rows = names, ids, rows
        self.body = None  # what the dialog shows (a rich Table, or a line when nothing differs)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label(f"Compare {self.ids[0]} and {self.ids[1]}", classes="dialog-title")
            with VerticalScroll():
                if self.rows:
                    t = Table(expand=True, show_edge=False)
                    t.add_column("config key", style="bold", no_wrap=True)
                    t.add_column(f"A {self.ids[0]}: {self.names[0]}", overflow="fold")
                    t.add_column(f"B {self.ids[1]}: {self.names[1]}", overflow="fold")
                    for key, a, b in self.rows:
                        t.add_row(key, a, b)
                    self.body = t
                else:
                    self.body = "the two runs have the same config"
                yield Static(self.body, id="compare-table")
            yield Label("Enter / v: overlay their curves · Esc: close", classes="dialog-hint")

    def action_close(self) -> None:
        self.dismiss(False)

    def action_curves(self) -> None:
        self.dismiss(True)
