"""A one-line text prompt (save as, a run's note or tags)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.screens.answer_once import AnswersOnce
from sparse_tui.tui.widgets.ordered_input import OrderedInput


class PromptScreen(AnswersOnce, Guarded, ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "dismiss", "Cancel")]

    def __init__(self, title: str, value: str = "", allow_empty: bool = False, suggester=None) -> None:
        super().__init__()
        self.title_text = title
        self.value = value
        self.suggester = suggester  # completes what is typed (→ takes it)
        self.allow_empty = allow_empty  # Enter on an empty field answers "" (a note removed), not a cancel

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield OrderedInput(self.value, id="prompt-input", suggester=self.suggester)
            yield Label("Enter: ok · Esc: cancel", classes="dialog-hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() if self.allow_empty else (event.value.strip() or None))
