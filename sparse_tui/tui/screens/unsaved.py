"""The unsaved-edits question: before the console quits or the preset form opens another preset over edits that were
not saved, Save (s) / Discard (d) / Cancel (c, Esc). Cancel has the focus: a key typed in a burst loses nothing."""

from __future__ import annotations

from textual.binding import Binding
from textual.screen import ModalScreen

from sparse_tui.tui.screens.confirm import Question


class UnsavedScreen(Question, ModalScreen[str | None]):
    """Answers "save", "discard", or None (cancel)."""

    BINDINGS = [
        Binding("s", "dismiss('save')", "Save"),
        Binding("d", "dismiss('discard')", "Discard"),
        Binding("c,escape", "dismiss(None)", "Cancel"),
    ]

    def __init__(self, name: str, then: str) -> None:
        super().__init__(f"{name} has unsaved edits. Save them before you {then}?",
                         [("Save (s)", "primary", "save"), ("Discard (d)", "error", "discard"),
                          ("Cancel (c)", "default", "cancel")])

    def answer(self, button: str | None) -> str | None:
        return None if button == "cancel" else button
