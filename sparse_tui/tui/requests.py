"""What the panels ask the app for, and the answers handed back to them.

The panels post requests (``messages.py``); this mixin of the app decides (only queued / running runs can be
cancelled, a delete is confirmed, an export asks how and where ...), runs the work (``actions.py``) in a thread
worker, and gives the result to the panel: ``Done`` / ``Problem`` notifications, ``AttentionData`` to the
Attention panel, ``FitDone`` to the Fit panel. The fit's runs follow the UI state (``selection.py``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from textual.message import Message
from textual.worker import get_current_worker

from sparse_tui.tui import actions, selection
from sparse_tui.tui.guard import guarded
from sparse_tui.tui.messages import (
    AttentionData,
    AttentionRequested,
    CancelRequested,
    CompareRequested,
    DeleteRequested,
    Done,
    ExportRequested,
    FitDone,
    FitRequested,
    GuessRequested,
    LaunchRequested,
    ResumeRequested,
)
from sparse_tui.tui.widgets.attention_map import AttentionPanel
from sparse_tui.tui.widgets.fit_panel import FitPanel
from sparse_tui.tui.widgets.run_table import RunsPanel


class PanelRequests:
    """Mix into the App (before the Textual class). Needs ``store``, ``records``, ``marked``, ``current``,
    ``n_workers``, ``executor``, ``ray_address``, ``clock``, ``show_panel`` and ``wake``."""

    def _work(self, fn: Callable[..., Message | None], *args: Any, group: str, exclusive: bool = False) -> None:
        """Run ``fn(*args)`` (one of ``actions``) in a thread worker and post the message it returns."""

        def body() -> None:
            msg = fn(*args)
            if msg is not None and not get_current_worker().is_cancelled:
                self.post_message(msg)

        self.run_worker(body, name=fn.__name__, group=group, thread=True, exclusive=exclusive, exit_on_error=False)

    def on_done(self, msg: Done) -> None:
        self.notify(msg.text, markup=False)
        if msg.run_ids:
            self.query_one(RunsPanel).reveal(msg.run_ids)
        if msg.switch_to:
            self.show_panel(msg.switch_to)
        self.wake()

    # -- what the panels ask for -----------------------------------------------------------------------------------
    def on_launch_requested(self, msg: LaunchRequested) -> None:
        self._work(actions.launch, self.store, msg.loaded, self.n_workers, self.executor, self.ray_address,
                   group="launch")

    def on_cancel_requested(self, msg: CancelRequested) -> None:
        live = [r.run_id for r in self.records if r.run_id in msg.run_ids and r.status in ("queued", "running")]
        if not live:
            self.notify("nothing to cancel (only queued or running runs can be)", severity="warning")
            return
        self._work(actions.cancel, self.store, live, group="actions")

    def on_resume_requested(self, msg: ResumeRequested) -> None:
        """``u`` in Runs: continue failed / interrupted / queued runs from their last checkpoint, the same path as
        ``sparse-tui resume RUN --detach`` (runner.resume_detached); anything else is refused with a notification."""
        from sparse_tui.runner import RESUMABLE

        chosen = [r for r in self.records if r.run_id in msg.run_ids]
        todo = [r.run_id for r in chosen if r.status in RESUMABLE]
        if not todo:
            states = ", ".join(sorted({r.status for r in chosen})) or "no run selected"
            self.notify(f"cannot resume ({states}): only failed, interrupted or queued runs can be",
                        severity="warning", markup=False)
            return
        self._work(actions.resume, self.store, todo, self.n_workers, self.executor, self.ray_address, group="launch")

    def on_compare_requested(self, msg: CompareRequested) -> None:
        """``x`` in Runs (or the palette): the config keys two runs differ in; Enter there overlays their curves,
        each labelled by its run name."""
        from sparse_tui.tui.render.runs import config_diff, run_name
        from sparse_tui.tui.screens.compare import CompareScreen

        recs = {r.run_id: r for r in self.records}
        pair = [recs[r] for r in msg.run_ids if r in recs]
        if len(pair) != 2:
            self.notify("compare needs two runs: mark two (space), or put the cursor on a run with one below it",
                        severity="warning", markup=False)
            return
        a, b = pair

        def done(overlay: bool | None) -> None:
            if overlay:
                self.query_one(RunsPanel).set_marked([a.run_id, b.run_id])
                self.show_panel("curves")

        self.push_screen(CompareScreen((run_name(a), run_name(b)), (a.run_id, b.run_id), config_diff(a, b)), done)

    def on_delete_requested(self, msg: DeleteRequested) -> None:
        ids = list(msg.run_ids)
        if not ids:
            return
        live = [r.run_id for r in self.records if r.run_id in ids and r.status in ("queued", "running")]
        if live:
            self.notify(f"{len(live)} run(s) still queued or running: cancel them first (c)", severity="warning")
            return
        from sparse_tui.tui.screens.confirm import ConfirmScreen

        def done(yes: bool | None) -> None:
            if yes:
                self._work(actions.delete, self.store, ids, group="actions")

        self.push_screen(ConfirmScreen(f"Delete {len(ids)} run(s) with their metrics and attention maps?"), done)

    def on_export_requested(self, msg: ExportRequested) -> None:
        ids = list(msg.run_ids)
        if not ids:
            self.notify("no runs to export", severity="warning")
            return
        from sparse_tui.tui.screens.export import ExportScreen

        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(self.clock()))

        def done(req) -> None:
            if req is not None and req.path:
                self._export_folder = str(Path(req.path).expanduser().parent)
                self._work(actions.export, self.store, ids, req, group="actions")

        self.push_screen(ExportScreen(len(ids), stamp, folder=self._export_folder), done)

    def on_attention_requested(self, m: AttentionRequested) -> None:
        self._work(actions.attention, self.store, m.run_id, m.step, m.layer, m.head, m.example, m.width,
                   group="attention", exclusive=True)

    @guarded
    def on_attention_data(self, msg: AttentionData) -> None:
        ap = self.query_one(AttentionPanel)
        if not msg.steps:
            ap.show_message(msg.info)
        else:
            ap.update_data(msg)

    def on_guess_requested(self, msg: GuessRequested) -> None:
        self.query_one(FitPanel).set_guess(self._guess_variables(msg.query))

    def _guess_variables(self, query: str) -> list[str]:
        return selection.guess_fit_variables(self.records, self.marked, self.current, query)

    def on_fit_requested(self, msg: FitRequested) -> None:
        from sparse_tui.fitreport import FitError

        variables = msg.variables
        if variables is None:  # guessed variables follow the runs chosen now
            variables = self._guess_variables(msg.query)
            self.query_one(FitPanel).set_guess(variables)
        if not variables:
            self.post_message(actions.fit_failed("no variables: type some (e.g. d T) or sweep a parameter"))
            return
        try:
            req = selection.fit_request(self.records, self.marked, self.current, msg.query, variables, msg.options)
        except FitError as e:
            self.post_message(actions.fit_failed(str(e)))
            return
        if req is None:
            self.post_message(actions.fit_failed("no runs match"))
            return
        self._work(actions.fit, self.store, req, group="fit", exclusive=True)

    @guarded
    def on_fit_done(self, msg: FitDone) -> None:
        fp = self.query_one(FitPanel)
        if msg.body is None:
            fp.show_error(msg.info)
        else:
            fp.show_result(msg)
