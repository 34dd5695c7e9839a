"""One key of the preset form: label, editor (Input, or Select for choices and booleans), type hint, error line."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, Select, Static

from sparse_tui.tui.form_model import FieldSpec, to_text
from sparse_tui.tui.widgets.ordered_input import OrderedInput


def field_id(key: str) -> str:
    return "f-" + key.replace(".", "--")


class FieldSelect(Select):
    """A form drop-down: ↑/↓ move between fields like on an Input (Textual's Select opens on them); Enter or space
    opens the list, where ↑/↓ pick a choice."""

    BINDINGS = [
        Binding("down", "app.focus_next", "Next field", show=False),
        Binding("up", "app.focus_previous", "Previous field", show=False),
    ]


class FieldRow(Vertical):
    """A form row. ``key`` is the dotted preset key; the editor's value is TOML text ('' = schema default)."""

    DEFAULT_CSS = """
    FieldRow { height: auto; }
    FieldRow > Horizontal { height: 1; }
    FieldRow .label { width: 18; color: $text-muted; }
    FieldRow .hint { width: 7; color: $text-disabled; padding-left: 1; }
    FieldRow Input, FieldRow Select { width: 1fr; max-width: 64; }
    FieldRow .error { color: $error; padding-left: 18; height: auto; display: none; }
    FieldRow.-invalid .error { display: block; }
    FieldRow.-invalid .label { color: $error; text-style: bold; }
    FieldRow.-changed .label { color: $warning; }
    """

    def __init__(self, spec: FieldSpec, text: str) -> None:
        super().__init__(id=field_id(spec.key) + "-row")
        self.spec = spec
        self.initial = text

    def compose(self) -> ComposeResult:
        s = self.spec
        with Horizontal():
            yield Label(s.label, classes="label")
            if s.choices:
                value = self.initial.strip().strip("\"'") if self.initial.strip() else Select.NULL
                opts = [(c, c) for c in s.choices]
                if value is not Select.NULL and value not in s.choices:
                    opts.append((value, value))
                yield FieldSelect(opts, value=value, allow_blank=True, compact=True, id=field_id(s.key),
                                  prompt=f"(default {s.default_text.strip(chr(34))})", tooltip=s.help)
            else:
                placeholder = f"default {s.default_text}" if s.default_text else "(empty)"
                yield OrderedInput(self.initial, placeholder=placeholder, compact=True, id=field_id(s.key),
                                   tooltip=s.help, select_on_focus=False)
            yield Label(s.type, classes="hint")
        yield Static("", classes="error")

    @property
    def editor(self) -> Input | Select:
        return self.query_one("#" + field_id(self.spec.key))

    def text(self) -> str:
        if not self.query("#" + field_id(self.spec.key)):
            return self.initial
        ed = self.editor
        if isinstance(ed, Select):
            if ed.value is Select.NULL or ed.value is None:
                return ""
            if self.spec.type.startswith("bool"):
                return str(ed.value)
            return to_text(str(ed.value))
        return ed.value

    def set_error(self, message: str | None) -> None:
        self.set_class(bool(message), "-invalid")
        for err in self.query(".error"):  # absent while the row is being (un)mounted
            err.update(f"↳ {message}" if message else "")

    def set_changed(self, changed: bool) -> None:
        self.set_class(changed, "-changed")
