"""The preset form: one FieldRow per schema key, grouped by section, built from a ``PresetDraft``."""

from __future__ import annotations

import asyncio

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Input, Select, Static

from sparse_tui.tui.form_model import PresetDraft
from sparse_tui.tui.widgets.field_row import FieldRow
from sparse_tui.tui.widgets.ordered_input import OrderedInput
from sparse_tui.tui.widgets.shallow_focus import ShallowFocus

SWEEP_TITLE = "[sweep]  (runs = product of lists × seeds)"


class PresetForm(ShallowFocus, VerticalScroll):
    """Edits a draft in place; posts ``PresetForm.Edited`` after every change."""

    BINDINGS = [
        Binding("down", "app.focus_next", "Next field", show=False),
        Binding("up", "app.focus_previous", "Previous field", show=False),
        Binding("enter", "app.focus_next", "Edit", show=False),
        Binding("slash", "go_to_field", "Go to field", show=False),
    ]

    DEFAULT_CSS = """
    PresetForm { height: 1fr; }
    PresetForm .section { color: $accent; text-style: bold; margin-top: 1; height: 1; }
    PresetForm #add-sweep { margin-top: 1; }
    """

    class Edited(Message):
        def __init__(self, key: str, kind_changed: bool) -> None:
            super().__init__()
            self.key = key
            self.kind_changed = kind_changed

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.draft: PresetDraft | None = None
        self._building = False
        self._lock = asyncio.Lock()

    def compose(self) -> ComposeResult:
        yield Static("no preset selected", classes="section")

    async def load(self, draft: PresetDraft | None) -> None:
        self.draft = draft
        await self.rebuild()

    async def rebuild(self) -> None:
        async with self._lock:
            await self._rebuild()

    async def _rebuild(self) -> None:
        self._building = True
        try:
            focused = self.app.focused
            focus_id = focused.id if focused is not None and self in focused.ancestors else None
            await self.remove_children()
            if self.draft is None:
                await self.mount(Static("no preset selected", classes="section"))
                return
            widgets = []
            current = None
            for spec in self.draft.fields():
                sec = spec.key.split(".")[0] if "." in spec.key else ""
                if sec != current:
                    current = sec
                    title = SWEEP_TITLE if sec == "sweep" else (f"[{sec}]" if sec else "preset")
                    widgets.append(Static(title, classes="section", markup=False))
                widgets.append(FieldRow(spec, self.draft.values.get(spec.key, "")))
            if current != "sweep":
                widgets.append(Static(SWEEP_TITLE, classes="section", markup=False))
            widgets.append(OrderedInput(placeholder="add a sweep key: model.d_model = [32, 64]", compact=True,
                                        id="add-sweep",
                                        tooltip="Type KEY = [values] and press Enter to add a sweep list."))
            await self.mount_all(widgets)
            if focus_id:
                try:
                    self.query_one("#" + focus_id).focus()
                except Exception:
                    pass
        finally:
            self._building = False

    def action_go_to_field(self) -> None:
        """/ on the form (not in a field, where it types): the Presets panel's go-to-field prompt."""
        panel = next((a for a in self.ancestors if hasattr(a, "action_go_to_field")), None)
        if panel is not None:
            panel.action_go_to_field()

    def rows(self) -> list[FieldRow]:
        return [r for r in self.query(FieldRow) if r.is_mounted and not r._closing]

    def _edited(self, row: FieldRow) -> None:
        if self._building or self.draft is None:
            return
        key = row.spec.key
        before = self.draft.values.get(key, "")
        text = row.text()
        if text == before:
            return
        self.draft.set(key, text)
        self.post_message(self.Edited(key, key.endswith(".kind")))

    @on(Input.Changed)
    @on(Select.Changed)
    def _changed(self, event: Input.Changed | Select.Changed) -> None:
        if event.control.id == "add-sweep":
            return
        event.stop()
        row = next((a for a in event.control.ancestors if isinstance(a, FieldRow)), None)
        if row is not None:
            self._edited(row)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "add-sweep" or self.draft is None:
            return
        event.stop()
        text = event.value.strip()
        if "=" not in text:
            self.app.notify("write KEY = [values], e.g. train.lr = [1e-3, 1e-2]", severity="warning")
            return
        key, vals = (s.strip() for s in text.split("=", 1))
        key = key.strip("\"'").removeprefix("sweep.")
        self.draft.set(f"sweep.{key}", vals)
        event.input.value = ""
        self.post_message(self.Edited(f"sweep.{key}", True))
