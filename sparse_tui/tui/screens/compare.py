"""Two runs (or two groups of runs) side by side: final metrics and config differences (``render/compare.py``);
Enter overlays their curves in the Curves panel."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.screens.answer_once import AnswersOnce


class CompareScreen(AnswersOnce, Guarded, ModalScreen[bool]):
    """``x`` in Runs. Enter / v: overlay their curves (labelled by name)."""

    BINDINGS = [Binding("escape,q", "dismiss(False)", "Close"), Binding("enter,v", "dismiss(True)", "Overlay curves")]

    def __init__(self, title: str, body: Any) -> None:
        super().__init__()
        self.title_text, self.body = title, body

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label(self.title_text, classes="dialog-title", markup=False)
            with VerticalScroll():
                yield Static(self.body, id="compare-table")
            yield Label("Enter / v: overlay their curves · Esc: close", classes="dialog-hint")
