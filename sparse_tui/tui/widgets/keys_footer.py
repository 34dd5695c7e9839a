"""The footer: Textual's, recomposed only when the keys it shows change."""

from __future__ import annotations

from textual.widgets import Footer


class KeysFooter(Footer):
    """Textual's ``Footer`` recomposes (removes and mounts its keys, then lays out the whole screen) on every
    bindings update, and every focus change is one, even between two fields with the same keys. With ~330 widgets
    that layout pass was most of the remaining time of a Tab in the preset form. This one recomposes only when the
    shown keys (key, description, action, enabled, tooltip, group) differ from those last asked for."""

    _shown: tuple | None = None

    def _signature(self, screen) -> tuple:
        return tuple(
            (b.key, b.description, b.action, enabled, tooltip, id(b.group) if b.group is not None else None)
            for (_, b, enabled, tooltip) in screen.active_bindings.values()
            if b.show
        )

    def bindings_changed(self, screen) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus or not (self.is_attached and screen is self.screen):
            return
        shown = self._signature(screen)
        if shown == self._shown:
            return
        self._shown = shown
        self.call_after_refresh(self.recompose)
