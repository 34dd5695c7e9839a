"""The footer: Textual's, recomposed only when the keys it shows change."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

MORE = " ? more "


class KeysFooter(Footer):
    """Textual's ``Footer`` recomposes (removes and mounts its keys, then lays out the whole screen) on every
    bindings update, and every focus change is one, even between two fields with the same keys. With ~330 widgets
    that layout pass was most of the remaining time of a Tab in the preset form. This one recomposes only when the
    shown keys (key, description, action, enabled, tooltip, group) differ from those last asked for."""

    _shown: tuple | None = None

    def _signature(self, screen) -> tuple:
        return (self.app.size.width,) + tuple(
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

    def on_resize(self) -> None:
        if self._shown is not None and self._shown[:1] != (self.app.size.width,):
            self._shown = None
            self.bindings_changed(self.screen)

    def compose(self) -> ComposeResult:
        """The keys that fit the width, in binding order, then ``? more`` (the help lists every key) when some
        did not fit: at 80 columns the Runs panel's keys ran off the screen after 'c Cancel run'."""
        if not self._bindings_ready:
            return
        seen: set[str] = set()
        budget = max(0, self.app.size.width - len(MORE) - 1)
        used, cut, shown = 0, False, []
        for (_, binding, enabled, tooltip) in self.screen.active_bindings.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            display = self.app.get_key_display(binding)
            w = len(display) + len(binding.description) + 3  # FooterKey: " key description "
            if used + w > budget:
                cut = True
                continue
            used += w
            shown.append(FooterKey(binding.key, display, binding.description, binding.action,
                                   disabled=not enabled, tooltip=tooltip))
        if cut:  # '? more' opens the help: the help key itself is not needed then
            shown = [k for k in shown if k.action != "help"]
            shown.append(FooterKey("question_mark", "?", "more", "help", tooltip="every key of every panel"))
        self.styles.grid_size_columns = len(shown)
        for key in shown:
            yield key.data_bind(compact=Footer.compact)
