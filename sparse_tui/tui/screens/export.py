"""Export dialog: the format list has the focus (↑/↓ pick, Enter exports), a run table or the per-step metrics
(``m``), the folder and the file name (Tab to edit them; Enter there exports too)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, OptionList
from textual.widgets.option_list import Option

from sparse_tui.export.tables import FORMATS
from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.screens.answer_once import AnswersOnce
from sparse_tui.tui.widgets.ordered_input import OrderedInput


@dataclass
class ExportRequest:
    fmt: str
    metrics: bool
    path: str


class ExportScreen(AnswersOnce, Guarded, ModalScreen[ExportRequest | None]):
    BINDINGS = [
        Binding("escape", "dismiss", "Cancel"),
        Binding("m", "toggle_metrics", "Metrics / runs", show=False),
    ]

    def __init__(self, n_runs: int, stamp: str, folder: str = ".") -> None:
        super().__init__()
        self.n_runs = n_runs
        self.stamp = stamp  # e.g. 20261126-071500
        self.folder = folder

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Export {self.n_runs} run(s) — ↑/↓ format, Enter exports", classes="dialog-title")
            yield OptionList(*[Option(f, id=f) for f in FORMATS], id="fmt", compact=True)
            yield Checkbox("per-step metrics (long table) · m", id="metrics", compact=True)
            with Horizontal(classes="export-path"):
                yield Label("folder ")
                yield OrderedInput(self.folder, id="folder", compact=True)
            with Horizontal(classes="export-path"):
                yield Label("file   ")
                yield OrderedInput(self._file_name("csv", False), id="path", compact=True)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Export (enter)", variant="primary", id="ok", compact=True)
                yield Button("Cancel (esc)", id="cancel", compact=True)

    def _file_name(self, fmt: str, metrics: bool) -> str:
        return f"{'metrics' if metrics else 'runs'}-{self.stamp}.{fmt}"  # the format's name is its file extension

    def on_mount(self) -> None:
        ol = self.query_one("#fmt", OptionList)
        ol.highlighted = 0
        ol.focus()

    def _fmt(self) -> str:
        ol = self.query_one("#fmt", OptionList)
        return FORMATS[ol.highlighted or 0] if FORMATS else "csv"

    def _rename(self) -> None:
        """Keep the file name in step with the format and the table (unless the user typed another name)."""
        if not self.query("#path"):
            return  # the format list highlights its first entry while the dialog is still being built
        inp = self.query_one("#path", Input)
        stem = inp.value.rsplit(".", 1)[0] if "." in inp.value else inp.value
        metrics = self.query_one("#metrics", Checkbox).value
        if stem in (f"runs-{self.stamp}", f"metrics-{self.stamp}"):
            inp.value = self._file_name(self._fmt(), metrics)
        else:
            inp.value = f"{stem}.{self._fmt()}"

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._rename()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self._request())

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        self._rename()

    def action_toggle_metrics(self) -> None:
        if isinstance(self.focused, Input):
            return
        cb = self.query_one("#metrics", Checkbox)
        cb.value = not cb.value

    def _request(self) -> ExportRequest:
        folder = self.query_one("#folder", Input).value.strip() or "."
        name = self.query_one("#path", Input).value.strip()
        return ExportRequest(self._fmt(), self.query_one("#metrics", Checkbox).value,
                             str(Path(folder).expanduser() / name) if name else "")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(self._request())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self._request() if event.button.id == "ok" else None)
