"""Pick the hyperparameter columns of the run table (``o`` in Runs): at 80 columns not all of them fit, so the dialog
says, as they are toggled, what fits, which fixed columns make room and what is left out (``RunTable.layout``)."""

from __future__ import annotations

from typing import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, SelectionList

from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.screens.answer_once import AnswersOnce


class ColumnsScreen(AnswersOnce, Guarded, ModalScreen[list[str] | None]):
    BINDINGS = [Binding("escape", "dismiss", "Cancel"), Binding("enter", "ok", "Show these", priority=True)]

    def __init__(self, keys: list[str], shown: list[str], fits: Callable[[list[str]], str]) -> None:
        super().__init__()
        self.keys, self.shown, self.fits = keys, shown, fits

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Hyperparameter columns — space toggles, Enter shows them", classes="dialog-title")
            yield SelectionList[str](*[(k, k, k in self.shown) for k in self.keys], id="columns", compact=True)
            yield Label(self.fits(self.shown), id="fits")
            yield Label("Esc: cancel · other columns make room for these", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(SelectionList).focus()

    def chosen(self) -> list[str]:
        chosen = set(self.query_one(SelectionList).selected)
        return [k for k in self.keys if k in chosen]

    @on(SelectionList.SelectedChanged)
    def _changed(self) -> None:
        self.query_one("#fits", Label).update(self.fits(self.chosen()))

    def action_ok(self) -> None:
        self.dismiss(self.chosen())
