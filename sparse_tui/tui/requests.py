"""What the panels ask the app for, and the answers handed back to them.

The panels post requests (``messages.py``); this mixin of the main screen decides (only queued / running runs can be
cancelled, a delete is confirmed, an export asks how and where ...), runs the work (``actions.py``) in a thread
worker, and gives the result to the panel: ``Done`` / ``Problem`` notifications, ``AttentionData`` to the
Attention panel, ``TheoryData`` to the Curves panel, ``FitDone`` to the Fit panel, ``AtlasData`` to the atlas screen.
The fit's runs follow the UI state (``selection.py``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from textual.message import Message
from textual.worker import get_current_worker

from sparse_tui.lifecycle.annotate import delete_question, undeletable
from sparse_tui.lifecycle.resume import RESUMABLE
from sparse_tui.science.fitting import FitError
from sparse_tui.store import StoreError
from sparse_tui.tui import actions, selection
from sparse_tui.tui.guard import guarded
from sparse_tui.tui.messages import (
    ArchiveRequested,
    AtlasRequested,
    AttentionData,
    AttentionRequested,
    CancelRequested,
    CompareRequested,
    DeleteRequested,
    Done,
    ExportRequested,
    FigureRequested,
    FitDone,
    FitRequested,
    GuessRequested,
    LaunchAsked,
    LaunchRequested,
    NoteRequested,
    ResumeRequested,
    TheoryData,
    TheoryRequested,
)
from sparse_tui.tui.render.compare import compare_body
from sparse_tui.tui.screens.compare import CompareScreen
from sparse_tui.tui.screens.confirm import ConfirmScreen
from sparse_tui.tui.screens.export import ExportScreen
from sparse_tui.tui.screens.prompt import PromptScreen
from sparse_tui.tui.widgets.attention_map import AttentionPanel
from sparse_tui.tui.widgets.curves import CurvesPanel
from sparse_tui.tui.widgets.fit_panel import FitPanel
from sparse_tui.tui.widgets.phase_diagram import PhasePanel
from sparse_tui.tui.widgets.run_table import RunsPanel


class PanelRequests:
    """Mix into the main screen (before the Textual class): needs its ``records``, ``marked``, ``current``,
    ``show_panel`` and ``view_ids``, and its app's store, poller and options."""

    def _work(self, fn: Callable[..., Message | None], *args: Any, group: str = "actions", exclusive: bool = False,
              to: Any = None) -> None:
        """Run ``fn(store, *args)`` (one of ``actions``, on the app's run store) in a thread worker and post the
        message it returns (to this screen, or to the screen ``to`` that asked)."""
        store = self.app.store

        def body() -> None:
            try:
                msg = fn(store, *args)
            except StoreError as e:  # a run deleted meanwhile (d in another console, `sparse-tui delete`): said, not
                msg = Done(f"nothing done: {e} (deleted meanwhile)", severity="warning")  # an error of the console
            if msg is not None and not get_current_worker().is_cancelled:
                (to or self).post_message(msg)

        self.run_worker(body, name=fn.__name__, group=group, thread=True, exclusive=exclusive, exit_on_error=False)

    def on_done(self, msg: Done) -> None:
        self.app.children_started.update(msg.pids)
        self.notify(msg.text, markup=False, severity=msg.severity)
        if msg.run_ids:
            self.query_one(RunsPanel).reveal(msg.run_ids)
        if msg.switch_to:
            self.show_panel(msg.switch_to)
        self.app.wake()

    # -- what the panels ask for -----------------------------------------------------------------------------------
    def on_launch_requested(self, msg: LaunchRequested) -> None:
        """ctrl+l: say what would start (runs, steps, the estimated time, where) and launch only on y. A stray key
        must not start a sweep of hours (the form shows a preset from start-up on)."""
        if not self.app.ensure_store("launch"):
            return
        # the question reads the store for an estimate (3-5 s at load 8): in a thread, and said meanwhile
        self.notify(f"ctrl+l: working out what {msg.loaded.name} would start …", timeout=4, markup=False)
        self._work(actions.ask_launch, msg.loaded, self.app.executor, group="launch")

    def on_launch_asked(self, msg: LaunchAsked) -> None:
        app = self.app

        def done(yes: bool | None) -> None:
            if yes:
                self.notify(f"launching {msg.loaded.name} …", timeout=4, markup=False)
                self._work(actions.launch, msg.loaded, app.n_workers, app.executor, group="launch")

        app.push_screen(ConfirmScreen(msg.question, yes="Launch (y)"), done)

    def on_atlas_requested(self, msg: AtlasRequested) -> None:
        """The atlas screen: ``sparse-tui reproduce``'s status and report (``actions.atlas_*``), answered to it, or
        the launch of an entry's missing runs (a notification, as every launch)."""
        fn, *args = {"status": (actions.atlas_status,), "detail": (actions.atlas_detail, msg.entry),
                     "launch": (actions.atlas_launch, msg.entry, self.app.executor)}[msg.what]
        self._work(fn, *args, group="atlas", to=None if msg.what == "launch" else msg.screen)

    def on_cancel_requested(self, msg: CancelRequested) -> None:
        live = [r.run_id for r in self.records if r.run_id in msg.run_ids and r.status in ("queued", "running")]
        if not live:
            self.notify("nothing to cancel (only queued or running runs can be)", severity="warning")
            return
        self._work(actions.cancel, live)

    def on_resume_requested(self, msg: ResumeRequested) -> None:
        """``u`` in Runs: continue failed / interrupted / queued runs from their last checkpoint, the same path as
        ``sparse-tui resume RUN --detach`` (resume.resume_runs_detached); anything else is refused with a
        notification."""
        chosen = [r for r in self.records if r.run_id in msg.run_ids]
        todo = [r.run_id for r in chosen if r.status in RESUMABLE]
        if not todo:
            states = ", ".join(sorted({r.status for r in chosen})) or "no run selected"
            self.notify(f"cannot resume ({states}): only failed, interrupted or queued runs can be",
                        severity="warning", markup=False)
            return
        app = self.app
        self._work(actions.resume, todo, app.n_workers, app.executor, group="launch")

    def on_compare_requested(self, msg: CompareRequested) -> None:
        """``x`` in Runs (or the palette): two runs (or two groups) side by side: their final metrics (groups: mean ±
        std over their runs) and the config keys they differ in; Enter there overlays their curves."""
        recs = {r.run_id: r for r in self.records}
        sides = [(key, members) for key in msg.run_ids
                 if (members := [recs[i] for i in msg.groups.get(key, [key]) if i in recs])]
        if len(sides) != 2:
            self.notify("compare needs two runs: mark two (space), or put the cursor on a run with one below it",
                        severity="warning", markup=False)
            return
        title, body = compare_body(sides, self.last)

        def done(overlay: bool | None) -> None:
            if overlay:
                self.query_one(RunsPanel).set_marked([r.run_id for _, members in sides for r in members])
                self.show_panel("curves")

        self.app.push_screen(CompareScreen(title, body), done)

    def on_delete_requested(self, msg: DeleteRequested) -> None:
        """d in Runs: the same rule as ``sparse-tui delete``: ended runs only, after a question naming them."""
        recs = [r for r in self.records if r.run_id in set(msg.run_ids)]
        if not recs:
            return
        live = undeletable(recs)
        if live:
            self.notify(f"{len(live)} run(s) still queued or running: cancel them first (c)", severity="warning")
            return
        ids = [r.run_id for r in recs]

        def done(yes: bool | None) -> None:
            if yes:
                self._work(actions.delete, ids)

        self.app.push_screen(ConfirmScreen(delete_question(recs)), done)

    def on_archive_requested(self, msg: ArchiveRequested) -> None:
        """A in Runs: archive the chosen runs (hidden unless the filter says is:archived; nothing is deleted), or
        bring archived ones back."""
        if msg.run_ids:
            self._work(actions.archive, list(msg.run_ids), msg.archive)

    def on_note_requested(self, msg: NoteRequested) -> None:
        """n / T in Runs: edit a run's note or tags in a prompt (the same checks as ``sparse-tui note / tag``)."""
        rec = next((r for r in self.records if r.run_id == msg.run_id), None)
        if rec is None:
            return
        if msg.what == "note":
            title, value = f"Note of {rec.run_id} (empty: none)", rec.note or ""
        else:
            title, value = f"Tags of {rec.run_id} (words, e.g. baseline v2)", " ".join(rec.tags)

        def done(text: str | None) -> None:
            if text is not None:
                self._work(actions.annotate, rec.run_id, msg.what, text)

        self.app.push_screen(PromptScreen(title, value, allow_empty=True), done)

    def on_export_requested(self, msg: ExportRequested) -> None:
        ids = list(msg.run_ids)
        if not ids:
            self.notify("no runs to export", severity="warning")
            return

        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(self.app.clock()))

        def done(req) -> None:
            if req is not None and req.path:
                self.export_dir = Path(req.path).expanduser().parent
                self._work(actions.export, ids, req)

        self.app.push_screen(ExportScreen(len(ids), stamp, folder=self.export_folder()), done)

    def on_figure_requested(self, msg: FigureRequested) -> None:
        """p in Curves, Fit, Phase or Scatter: the panel's figure as PNG (P: SVG) in RUNS_DIR/figures, through
        ``figures`` (the code of ``sparse-tui show/fit --plot``); the notification says where. ``w`` (Curves,
        Scatter) asks for the file and the size first."""
        if not self.app.ensure_store("figure"):
            return
        if msg.payload is not None:
            payload, missing = msg.payload, ""
        elif msg.panel == "curves":
            payload = self.view_ids()
            missing = "no runs to draw: pick runs in the Runs panel"
        elif msg.panel == "fit":
            res = self.query_one(FitPanel).result
            payload = res.report if res is not None else None
            missing = "no fit to draw yet: press Enter in the Fit panel first"
        else:
            payload = self.query_one(PhasePanel).figure_data
            missing = "no phase diagram to draw"
        if not payload:
            self.notify(missing, severity="warning", markup=False)
            return
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(self.app.clock()))
        path = self.app.runs_dir / "figures" / f"{msg.panel}-{stamp}.{msg.fmt}"
        n = 1
        while path.exists() or path in self.figures_pending:  # two in one second: figure-…-2.png
            n += 1
            path = self.app.runs_dir / "figures" / f"{msg.panel}-{stamp}-{n}.{msg.fmt}"
        if not msg.ask:
            self.figures_pending.add(path)
            self._work(actions.figure, msg.panel, payload, path, group="figure")
            return

        def done(text: str | None) -> None:
            try:
                target, size = actions.figure_target(text or "", self.app.runs_dir / "figures")
            except ValueError as e:
                self.notify(f"figure not written: {e}", severity="warning", markup=False)
                return
            if target is not None:
                self._work(actions.figure, msg.panel, payload, target, size, group="figure")

        self.app.push_screen(PromptScreen("Write the figure to FILE (.png, .svg or .pdf; relative: in "
                                          "RUNS_DIR/figures),"
                                          " then a size in inches if you like (7x4)", f"{path.name} 6.4x4"), done)

    def on_attention_requested(self, m: AttentionRequested) -> None:
        self._work(actions.attention, m.run_id, m.step, m.layer, m.head, m.example, m.width,
                   group="attention", exclusive=True)

    @guarded
    def on_attention_data(self, msg: AttentionData) -> None:
        self.query_one(AttentionPanel).update_data(msg)

    def on_theory_requested(self, msg: TheoryRequested) -> None:
        self._work(actions.theory, msg.run_ids, group="theory")

    @guarded
    def on_theory_data(self, msg: TheoryData) -> None:
        self.query_one(CurvesPanel).set_theory(msg)

    def on_guess_requested(self, msg: GuessRequested) -> None:
        self.query_one(FitPanel).set_guess(*self._guess_variables(msg.query))

    def _guess_variables(self, query: str) -> tuple[list[str], str]:
        return selection.guess_fit_variables(self.records, self.marked, self.current, query)

    def on_fit_requested(self, msg: FitRequested) -> None:
        variables = msg.variables
        if variables is None:  # guessed variables follow the runs chosen now
            variables, note = self._guess_variables(msg.query)
            self.query_one(FitPanel).set_guess(variables, note)
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
        self._work(actions.fit, req, group="fit", exclusive=True)

    @guarded
    def on_fit_done(self, msg: FitDone) -> None:
        self.query_one(FitPanel).show_result(msg)
