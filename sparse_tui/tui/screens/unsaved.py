"""The unsaved-edits question: before the console quits or the preset form opens another preset over edits that were
not saved, Save (s) / Discard (d) / Cancel (c, Esc). Cancel has the focus: a key typed in a burst loses nothing."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.screens.answer_once import AnswersOnce


class UnsavedScreen(AnswersOnce, Guarded, ModalScreen[str | None]):
    """Answers "save", "discard", or None (cancel)."""

    BINDINGS = [
        Binding("s", "dismiss('save')", "Save"),
        Binding("d", "dismiss('discard')", "Discard"),
        Binding("c,escape", "dismiss(None)", "Cancel"),
    ]

    def __init__(self, name: str, then: str) -> None:
        super().__init__()
        self.question = f"{name} has unsaved edits. Save them before you {then}?"

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, classes="dialog-title", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Save (s)", variant="primary", id="save", compact=True)
                yield Button("Discard (d)", variant="error", id="discard", compact=True)
                yield Button("Cancel (c)", id="cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "cancel" else event.button.id)
