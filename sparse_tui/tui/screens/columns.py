"""Pick the hyperparameter columns of the run table (``o`` in Runs): at 80 columns not all of them fit."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, SelectionList

from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.screens.answer_once import AnswersOnce


class ColumnsScreen(AnswersOnce, Guarded, ModalScreen[list[str] | None]):
    BINDINGS = [Binding("escape", "dismiss", "Cancel"), Binding("enter", "ok", "Show these", priority=True)]

    def __init__(self, keys: list[str], shown: list[str]) -> None:
        super().__init__()
        self.keys, self.shown = keys, shown

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Hyperparameter columns — space toggles, Enter shows them", classes="dialog-title")
            yield SelectionList[str](*[(k, k, k in self.shown) for k in self.keys], id="columns", compact=True)
            yield Label("Esc: cancel · the name column keeps at least 8 characters", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(SelectionList).focus()

    def action_ok(self) -> None:
        chosen = set(self.query_one(SelectionList).selected)
        self.dismiss([k for k in self.keys if k in chosen])
