"""The figure atlas in the console (command palette: "Atlas: reproduce a figure of the paper").

Lists the atlas entries (``sparse_tui.atlas``) with how many of their CPU preset's runs the store already holds
(``reproduce.status_rows``: runs of the same configuration, whoever trained them). Enter launches the runs the
store lacks through the console's launch path (``runner.start_detached``, as ``sparse-tui run --detach``); while they
train the status refreshes, and once every run has a result the panel shows ``sparse-tui reproduce``'s report: the
fit against the paper's law (or the entry's numbers). The same functions as ``sparse-tui reproduce``, so both show
the same numbers.
"""

from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

from sparse_tui import atlas, runner
from sparse_tui.reports import reproduce as rp
from sparse_tui.executors import ExecutorOptions
from sparse_tui.theory import PAPER_FITS
from sparse_tui.tui.actions import check_executor
from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.screens.answer_once import AnswersOnce

SIZE = "cpu"  # the console launches the CPU-sized presets (a GPU size: sparse-tui reproduce KEY --size gpu)


class AtlasScreen(AnswersOnce, Guarded, ModalScreen[None]):
    DEFAULT_CSS = """
    AtlasScreen Horizontal { height: 1fr; }
    AtlasScreen #atlas-list { width: 46; }  /* its height: app.tcss (.dialog OptionList is six lines) */
    AtlasScreen #atlas-detail { padding: 0 1; }
    """
    BINDINGS = [Binding("escape,q", "dismiss", "Close"), Binding("l", "launch", "Launch"),
                Binding("r", "refresh", "Refresh")]

    def __init__(self, store: Any, executor: ExecutorOptions = ExecutorOptions()) -> None:
        super().__init__()

        self.store = store
        self.executor = executor
        self.entries = atlas.entries()
        self.status: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label("Figure atlas: pick a figure, Enter launches its CPU preset (runs already in the store are "
                        "reused)", classes="dialog-title")
            with Horizontal():
                yield OptionList(*[Option(self._line(e), id=e.key) for e in self.entries], id="atlas-list")
                with VerticalScroll():
                    yield Static("", id="atlas-detail")
            yield Label("Enter: launch what is missing · r: refresh · Esc: close", classes="dialog-hint")

    def _line(self, e: Any) -> str:
        state = e.built or self.status.get(e.key, "")
        return f"{e.key:<13} {e.figure:<19} {state}"

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()
        self.refresh_status()
        self.set_interval(5.0, self.refresh_status)

    def _entry(self) -> Any | None:
        ol = self.query_one(OptionList)
        if ol.highlighted is None:
            return None
        return self.entries[ol.highlighted]

    # -- status and report (thread workers: they read presets and the store) ---------------------------------------
    @work(thread=True, exclusive=True, group="atlas-status", exit_on_error=False)
    def refresh_status(self) -> None:
        status = {}
        for row in rp.status_rows(self.store):
            stored = row.stored.get(SIZE) or row.stored.get("gpu")
            status[row.entry.key] = f"{stored} runs" if stored else ("no cpu preset" if not row.entry.built else "")
        self.app.call_from_thread(self._show_status, status)
        e = self.app.call_from_thread(self._entry)
        if e is not None:
            self._detail(e)

    def _show_status(self, status: dict[str, str]) -> None:
        self.status = status
        ol = self.query_one(OptionList)
        for i, e in enumerate(self.entries):
            ol.replace_option_prompt_at_index(i, self._line(e))

    def _detail(self, e: Any) -> None:
        """Worker thread: the entry's description, and its report once every run of its CPU preset has a result."""
        head = [f"{e.figure} ({e.source}, {e.section}): {e.shows}"]
        if e.law:
            pf = PAPER_FITS[e.law]
            head.append(f"paper: T_plateau = {pf.C:g} · " + " · ".join(f"{k}^{v:g}" for k, v in pf.exponents.items()))
        if e.threshold is not None:
            head.append(f"plateau: {e.threshold.text()} (App. D.1)")
        if e.notes:
            head.append(f"notes: {e.notes}")
        if e.measured:
            head.append(f"record: {e.measured} (docs/REPRODUCTION.md)")
        body = ""
        if e.built:
            body = e.built
        elif e.preset(SIZE) is None:
            body = f"no CPU-sized preset; sparse-tui reproduce {e.key} --size gpu"
        else:
            try:
                plan = rp.plan(self.store, e, SIZE)
                if plan.missing:
                    body = plan.describe() + "\nEnter launches the missing runs."
                else:
                    body = rp.report(self.store, e, rp.plan_run_ids(self.store, plan)).text
            except Exception as exc:  # noqa: BLE001 - shown in the panel, the console goes on
                body = f"cannot report: {str(exc).splitlines()[0] if str(exc) else exc!r}"
        self.app.call_from_thread(self.query_one("#atlas-detail", Static).update, "\n".join(head) + "\n\n" + body)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.show_detail(event.option_index)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.launch(self.entries[event.option_index])  # Enter on the list

    @work(thread=True, exclusive=True, group="atlas-detail", exit_on_error=False)
    def show_detail(self, index: int) -> None:
        self._detail(self.entries[index])

    # -- actions -----------------------------------------------------------------------------------------------------
    def action_refresh(self) -> None:
        self.refresh_status()

    def action_launch(self) -> None:
        e = self._entry()
        if e is not None:
            self.launch(e)

    @work(thread=True, exclusive=True, group="atlas-launch", exit_on_error=False)
    def launch(self, e: Any) -> None:
        """The missing runs of the entry's CPU preset, started detached through the runner (the console's launch)."""
        try:
            plan = rp.plan(self.store, e, SIZE)
            todo = plan.to_train()
            if not todo:
                self.app.call_from_thread(self.app.notify, f"{e.key}: every run is already in the store")
                self._detail(e)
                return
            check_executor(self.executor)
            batch_id, ids, pid = runner.start_detached(self.store, todo, executor=self.executor)
        except Exception as exc:  # noqa: BLE001 - a refused launch is a notification, not a crash
            self.app.call_from_thread(self.app.notify, f"{e.key}: cannot launch: {str(exc).splitlines()[0]}",
                                      severity="error")
            return
        self.app.call_from_thread(self.app.notify, f"{e.key}: launched {len(ids)} run(s) of {plan.preset} "
                                  f"(batch {batch_id}, pid {pid})")
        self.app.call_from_thread(self.refresh_status)


def open_atlas(app: Any) -> None:
    """The palette command: the atlas over the console's store, launching where the console launches."""
    if app.store is None:
        app.notify("no run store open", severity="error")
        return
    app.push_screen(AtlasScreen(app.store, app.executor))
