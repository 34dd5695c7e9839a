"""Focusable containers whose focus changes restyle only themselves.

Textual restyles a widget *and its whole subtree* when it gains or loses focus (``Widget.watch_has_focus``), in case
a rule styles descendants by their container's ``:focus``. No rule of the console does, and its focusable
containers are large: the preset form holds ~340 widgets, so each focus of the form cost a restyle of all of them
(~70 ms; the chaos test spent a quarter of its time there)."""

from __future__ import annotations


class ShallowFocus:
    """Mix into a focusable container (before the Textual class)."""

    def watch_has_focus(self, _has_focus: bool) -> None:
        self.app.stylesheet.update_nodes([self], animate=True)  # type: ignore[attr-defined]
