"""The highlighted panel: the innermost ``.panel`` holding the focus gets a round border and a bold title in the
theme's accent colour.

The highlight is an inline style of that one widget, changed only when focus crosses panels. A class (or
``:focus-within``) would restyle the panel's whole subtree on every change: ~340 widgets for the preset form, which
made each Tab take ~1 s and each switch to the Presets panel ~70 ms."""

from __future__ import annotations

HIGHLIGHT_RULES = ("border_top", "border_right", "border_bottom", "border_left", "border_title_color",
                   "auto_border_title_color", "border_title_style")


def highlight(widget, color: str | None) -> None:
    """Give ``widget`` a round border and a bold title in ``color`` (None: back to its CSS, app.tcss)."""
    styles = widget.styles
    if color is None:
        for rule in HIGHLIGHT_RULES:
            styles.clear_rule(rule)
        widget.refresh(layout=True)
    else:
        styles.border = ("round", color)
        styles.border_title_color = color
        styles.auto_border_title_color = False  # the CSS colour ($text-muted) is an 'auto' one: it would win
        styles.border_title_style = "bold"


class FocusHighlight:
    """Mix into the App (before the Textual class)."""

    _active_panel = None

    def on_descendant_focus(self, event) -> None:
        self._sync_active_panel()

    def on_descendant_blur(self, event) -> None:
        self.call_later(self._sync_active_panel)  # focus may have left every panel (the next focus event fixes it)

    def _sync_active_panel(self) -> None:
        """Highlight the innermost ``.panel`` holding the focus of the main screen, touching styles only when that
        panel changes (an inline style of that one widget: see the module's docstring)."""
        if not self.screen_stack:
            return
        focused = self.screen_stack[0].focused  # the main screen's focus, kept while a dialog is open
        panel = None
        if focused is not None and focused.is_attached:
            panel = next((w for w in focused.ancestors_with_self if w.has_class("panel")), None)
        old = self._active_panel
        if panel is old:
            return
        if old is not None:
            highlight(old, None)
        if panel is not None:
            highlight(panel, self.get_css_variables().get("accent", "orange"))
        self._active_panel = panel

    def watch_theme(self) -> None:
        """A new theme (ctrl+p → theme): the highlighted panel takes the new accent colour."""
        panel = self._active_panel
        if panel is not None and panel.is_attached:
            self.call_after_refresh(lambda: highlight(panel, self.get_css_variables().get("accent", "orange")))

    @property
    def active_panel(self):
        """The highlighted panel (the one holding the focus), or None."""
        return self._active_panel
