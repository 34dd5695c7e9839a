"""A text field that applies every key in the order it was typed.

Textual's ``Input`` inserts a printable key in its own key handler, but its editing keys (Backspace, Delete, ←/→,
Home/End, ctrl+w ...) are bindings, run when the key has bubbled up to the app. When keys arrive in a burst (typed
while the app was busy for a moment, e.g. right after a refused ctrl+l, or on a loaded machine) the field handles
all the printable ones before the app gets to the bubbled editing keys: Backspace Backspace ``3e-3`` typed after
``-1`` ended as ``-13e`` (the two Backspaces deleted the last two characters typed). Here the field's own editing
bindings run inside its key handler, in typing order; every other key (↑/↓, Tab, Esc, the panels' keys) bubbles as
before.
"""

from __future__ import annotations

from textual import events
from textual.widgets import Input


class OrderedInput(Input):
    async def _on_key(self, event: events.Key) -> None:
        if not event.is_printable:
            for binding in self._bindings.key_to_bindings.get(event.key, ()):
                if binding.action != "submit" and await self.app.run_action(binding.action, self):
                    event.stop()
                    event.prevent_default()
                    return
        await super()._on_key(event)

    def focus_now(self) -> None:
        """Take the focus at once. ``Widget.focus`` defers the change (``call_later``): keys typed in the same burst
        as the key that asked for the field (``/blog_nembd`` in the Runs panel, on a busy machine) went to the
        table: ``o``, ``g``, ``n``, ``e``, ``d`` opened dialogs there."""
        self.screen.set_focus(self)
