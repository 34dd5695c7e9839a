"""The help screen: every key binding of every panel, and what happens on quit / disconnect."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.screens.answer_once import AnswersOnce

NOTE = (
    "Runs are separate processes: quitting the console or losing the SSH connection does not stop them. "
    "Reopen sparse-tui and they show up live again. A run whose process died is shown failed at its last step."
)


def key_as_typed(key: str) -> str:
    """``question_mark`` -> ``?``, ``full_stop`` -> ``.``, ``ctrl+l`` -> ``ctrl+l``, ``pagedown`` -> ``pagedown``."""
    key = key.strip()
    if "+" in key and len(key) > 1:
        *mods, last = key.split("+")
        return "+".join(mods + [format_key(last) if last else "+"])
    return format_key(key)


def binding_table(groups: list[tuple[str, list[Binding]]]) -> Table:
    t = Table(show_header=True, header_style="bold", box=None, expand=True, padding=(0, 1))
    t.add_column("where", style="cyan", no_wrap=True)
    t.add_column("key", style="bold", no_wrap=True)
    t.add_column("does")
    for where, bindings in groups:
        for i, b in enumerate(bindings):
            keys = ", ".join(key_as_typed(k) for k in b.key.split(","))
            t.add_row("" if i else where, keys, b.description or b.action)
    return t


class HelpScreen(AnswersOnce, Guarded, ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def __init__(self, groups: list[tuple[str, list[Binding]]]) -> None:
        super().__init__()
        self.groups = groups

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide", id="help"):
            yield Label("sparse-tui — key bindings", classes="dialog-title")
            with VerticalScroll():
                yield Static(binding_table(self.groups))
                yield Static("\n" + NOTE)
            yield Label("Esc: close", classes="dialog-hint")
