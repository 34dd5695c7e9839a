"""Export dialog: format, run table or long metric table, output file."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Select

from sparse_tui.export import FORMATS


@dataclass
class ExportRequest:
    fmt: str
    metrics: bool
    path: str


class ExportScreen(ModalScreen[ExportRequest | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, n_runs: int, default_stem: str) -> None:
        super().__init__()
        self.n_runs = n_runs
        self.stem = default_stem

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Export {self.n_runs} run(s)", classes="dialog-title")
            yield Select([(f, f) for f in FORMATS], value="csv", allow_blank=False, id="fmt", compact=True)
            yield Checkbox("per-step metrics (long table)", id="metrics", compact=True)
            yield Input(f"{self.stem}.csv", id="path", compact=True)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Export (enter)", variant="primary", id="ok", compact=True)
                yield Button("Cancel (esc)", id="cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#path", Input).focus()

    def on_select_changed(self, event: Select.Changed) -> None:
        inp = self.query_one("#path", Input)
        base = inp.value.rsplit(".", 1)[0] if "." in inp.value else inp.value
        inp.value = f"{base}.{event.value}"

    def _request(self) -> ExportRequest:
        return ExportRequest(
            str(self.query_one("#fmt", Select).value),
            self.query_one("#metrics", Checkbox).value,
            self.query_one("#path", Input).value.strip(),
        )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(self._request())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self._request() if event.button.id == "ok" else None)

    def action_cancel(self) -> None:
        self.dismiss(None)
