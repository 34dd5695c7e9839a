"""The unsaved changes of a preset as a unified diff."""

from __future__ import annotations

from rich.syntax import Syntax
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.screens.answer_once import AnswersOnce


class DiffScreen(AnswersOnce, Guarded, ModalScreen[None]):
    BINDINGS = [Binding("escape,q,ctrl+d", "dismiss", "Close")]

    def __init__(self, name: str, diff: str) -> None:
        super().__init__()
        self.name_ = name
        self.diff = diff

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label(f"Unsaved changes of {self.name_}", classes="dialog-title")
            with VerticalScroll():
                if self.diff.strip():
                    yield Static(Syntax(self.diff, "diff", theme="ansi_dark", background_color="default"))
                else:
                    yield Static("no unsaved changes")
            yield Label("Esc: close", classes="dialog-hint")
