"""Dialogs answer once.

A second Esc or Enter that arrives before a dialog has closed (a fast typist, or the chaos test) dismissed it a
second time: Textual sets the screen's result future twice and raises ``InvalidStateError``. The first answer
stands; later ones do nothing."""

from __future__ import annotations

from typing import Any


class AnswersOnce:
    """Mix into a ModalScreen (before the Textual class)."""

    _answered = False

    def dismiss(self, result: Any = None) -> Any:
        if self._answered:
            return None
        self._answered = True
        return super().dismiss(result)  # type: ignore[misc]
