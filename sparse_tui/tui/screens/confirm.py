"""Questions answered with a button or its key: a yes/no confirmation (delete runs, launch a preset, create a run
store), where No (n, Esc) has the focus; ``Question`` is what such a dialog shares (``screens/unsaved`` asks too)."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.screens.answer_once import AnswersOnce


class Question(AnswersOnce, Guarded, ModalScreen):
    """``question`` over its ``buttons`` ((label, variant, id); the last has the focus: a key typed in a burst
    loses nothing); a button answers ``answer(its id)``."""

    def __init__(self, question: str, buttons: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self.question, self.buttons = question, buttons

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, classes="dialog-title", markup=False)
            with Horizontal(classes="dialog-buttons"):
                for label, variant, bid in self.buttons:
                    yield Button(label, variant=variant, id=bid, compact=True)

    def on_mount(self) -> None:
        self.query_one(f"#{self.buttons[-1][2]}", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self.answer(event.button.id))

    def answer(self, button: str | None) -> Any:
        return button


class ConfirmScreen(Question, ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "dismiss(True)", "Yes"),
        Binding("n,escape", "dismiss(False)", "No"),
    ]

    def __init__(self, question: str, yes: str = "Yes (y)") -> None:
        super().__init__(question, [(yes, "error", "yes"), ("No (n)", "default", "no")])

    def answer(self, button: str | None) -> bool:
        return button == "yes"
