"""The figure atlas in the console (command palette: "Atlas: reproduce a figure of the paper").

Lists the atlas entries (``sparse_tui.atlas``) with how many of their CPU preset's runs the store already holds
(``reproduce.status_rows``: runs of the same configuration, whoever trained them). Enter launches the runs the
store lacks through the console's launch path (``runner.start_detached``, as ``sparse-tui run --detach``); while they
train the status refreshes, and once every run has a result the panel shows ``sparse-tui reproduce``'s report: the
fit against the paper's law (or the entry's numbers). The same functions as ``sparse-tui reproduce``, so both show
the same numbers. Like a panel, the screen only asks (``AtlasRequested``, to the main screen, which runs
``actions.atlas_*`` in a thread worker) and shows the answers (``AtlasData``).
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

from sparse_tui import atlas
from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.messages import AtlasData, AtlasRequested
from sparse_tui.tui.render.names import cut_words
from sparse_tui.tui.screens.answer_once import AnswersOnce
from sparse_tui.tui.screens.confirm import ConfirmScreen

LIST_WIDTH = 48  # the list's lines: its width less the border, padding and scrollbar


class AtlasScreen(AnswersOnce, Guarded, ModalScreen[None]):
    DEFAULT_CSS = """
    AtlasScreen Horizontal { height: 1fr; }
    AtlasScreen #atlas-list { width: 52; }  /* its height: app.tcss (.dialog OptionList is six lines) */
    AtlasScreen #atlas-detail { padding: 0 1; }
    """
    BINDINGS = [Binding("escape,q", "dismiss", "Close"), Binding("l", "launch", "Launch"),
                Binding("r", "refresh", "Refresh")]

    def __init__(self) -> None:
        super().__init__()
        self.entries = atlas.entries()
        self.status: dict[str, str] = {}
        self.pending: set[tuple[str, str | None]] = set()  # status / detail questions not answered yet

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label("Figure atlas: pick a figure, Enter launches its CPU preset (runs already in the store are "
                        "reused)", classes="dialog-title")
            with Horizontal():
                yield OptionList(*[Option(self._line(e), id=e.key) for e in self.entries], id="atlas-list")
                with VerticalScroll():
                    yield Static("", id="atlas-detail")
            yield Label("Enter: launch what is missing (asks) · r: refresh · Esc: close · * the record's verdict",
                        classes="dialog-hint")

    def _line(self, e: Any) -> str:
        """One line at 80 columns (the figure's name is in the detail beside): key, verdict (* the record's),
        CPU minutes, stored runs."""
        state = self.status.get(e.key, "") or e.built or ""
        line = f"{e.key:<17} {state}".rstrip()
        return cut_words(line, LIST_WIDTH)  # whole words (names.py): never "preset in…"

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()
        self.action_refresh()
        self.set_interval(5.0, self.action_refresh)

    def _entry(self) -> Any | None:
        ol = self.query_one(OptionList)
        return None if ol.highlighted is None else self.entries[ol.highlighted]

    def _ask(self, what: str, entry: Any = None) -> None:
        """Ask the main screen; a status or detail still being worked out is not asked again (a slow store)."""
        question = (what, entry and entry.key)
        if question in self.pending:
            return
        if what != "launch":
            self.pending.add(question)
        self.app.main.post_message(AtlasRequested(what, self, entry))

    def action_refresh(self) -> None:
        """Every entry's stored runs, then the highlighted entry's detail (r, and every 5 s while open)."""
        self._ask("status")
        if self._entry() is not None:
            self._ask("detail", self._entry())

    def on_atlas_data(self, msg: AtlasData) -> None:
        self.pending.discard(("detail", msg.key) if msg.status is None else ("status", None))
        if msg.status is not None:
            self.status = msg.status
            ol = self.query_one(OptionList)
            for i, e in enumerate(self.entries):
                ol.replace_option_prompt_at_index(i, self._line(e))
        elif self._entry() is not None and msg.key == self._entry().key:
            self.query_one("#atlas-detail", Static).update(msg.detail)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._ask("detail", self.entries[event.option_index])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self._confirm(self.entries[event.option_index])  # Enter on the list

    def action_launch(self) -> None:
        if self._entry() is not None:
            self._confirm(self._entry())

    def _confirm(self, entry: Any) -> None:
        """Every launch asks first (as ctrl+l in Presets): a key typed into a slow palette starts nothing."""
        state = entry.built or self.status.get(entry.key, "")

        def done(yes: bool | None) -> None:
            if yes:
                self._ask("launch", entry)

        self.app.push_screen(ConfirmScreen(f"Launch the runs of {entry.key} ({entry.figure}) that the store lacks?"
                                           + (f" Now: {state}." if state else ""), yes="Launch (y)"), done)


def open_atlas(app: Any) -> None:
    """The palette command: the atlas over the console's store, launching where the console launches."""
    if app.store is None:
        app.notify("no run store open", severity="error")
        return
    app.push_screen(AtlasScreen())
