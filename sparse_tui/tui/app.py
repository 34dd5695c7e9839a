"""The sparse-tui console: the app shell (panels, keys, focus, reporting) and the routing of messages.

``make_app`` builds the app (the CLI and the tests share it); ``run_app`` runs it and returns an exit code.

How it is built (after harlequin / toolong): the panels (``widgets/``) only draw and post messages
(``messages.py``): what the user asked for (``LaunchRequested``, ``FitRequested`` ...) and what changed
(``RunHighlighted``, ``MarkedChanged``). The app handles them here: it keeps the UI state (the current and the
marked runs, as reactives), runs the work (``actions.py``) in thread workers, and hands the results back to the
panels. One thread reads the store (``poller.py``) and posts coalescing ``RunsUpdated`` / ``CurvesData``. Workers
only ``post_message``; widgets are touched on the UI thread only; worker loops check cancellation.

Training runs in detached processes (``runner.detach``), so quitting the app or losing the terminal stops nothing.
"""

from __future__ import annotations

import logging
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.lazy import Lazy
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Header, TabbedContent, TabPane
from textual.worker import Worker, WorkerState, get_current_worker

from sparse_tui.exitcodes import ExitCode
from sparse_tui.store import RunRecord, RunStore
from sparse_tui.tui import actions, selection
from sparse_tui.tui.guard import Guarded, guarded
from sparse_tui.tui.messages import (
    AttentionData,
    AttentionRequested,
    CancelRequested,
    CompareRequested,
    CurvesData,
    DeleteRequested,
    Done,
    ExportRequested,
    FitDone,
    FitRequested,
    GpuInfo,
    GuessRequested,
    LaunchRequested,
    MarkedChanged,
    PanelRequested,
    Problem,
    ResumeRequested,
    RunHighlighted,
    RunsUpdated,
)
from sparse_tui.tui.panels import LAZY, PANELS
from sparse_tui.tui.poller import StorePoller
from sparse_tui.tui.widgets.attention_map import AttentionPanel
from sparse_tui.tui.widgets.curves import CurvesPanel
from sparse_tui.tui.widgets.fit_panel import FitPanel
from sparse_tui.tui.widgets.keys_footer import KeysFooter
from sparse_tui.tui.widgets.phase_diagram import PhasePanel
from sparse_tui.tui.widgets.presets_panel import PresetsPanel
from sparse_tui.tui.widgets.run_table import RunsPanel

# Every problem the console shows is logged here too (RUNS_DIR/logs/console.log is written separately, per store);
# a NullHandler keeps Python's last-resort handler from printing over the screen.
LOG = logging.getLogger("sparse_tui.tui")
LOG.addHandler(logging.NullHandler())


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


class MainScreen(Guarded, Screen):
    """The screen of the panels; guarded like them (a widget's render error surfaces in its screen's loop)."""


class SparseTuiApp(Guarded, App[int]):
    """The console. ``clock`` gives 'now' for run ages (tests inject a fixed one)."""

    CSS_PATH = "app.tcss"
    TITLE = "sparse-tui"
    ENABLE_COMMAND_PALETTE = True  # ctrl+p: panels, presets and actions (commands.py)
    BINDINGS = [
        Binding("1", "panel('presets')", "Presets", show=False),
        Binding("2", "panel('runs')", "Runs", show=False),
        Binding("3", "panel('curves')", "Curves", show=False),
        Binding("4", "panel('attention')", "Attention", show=False),
        Binding("5", "panel('fit')", "Fit", show=False),
        Binding("6", "panel('phase')", "Phase", show=False),
        Binding("f1,question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
    ]

    current: reactive[str | None] = reactive(None, init=False)  # the run under the Runs table's cursor
    marked: reactive[list[str]] = reactive(list, init=False)  # the marked runs (always assigned a new list)

    def __init__(
        self,
        runs_dir: Path,
        presets_dir: Path,
        preset: Path | None = None,
        overrides: list[str] | None = None,
        *,
        clock: Callable[[], float] = time.time,
        poll_interval: float = 0.3,
        gpu: bool = True,
        workers: int | None = None,
        executor: str = "local",
        ray_address: str | None = None,
    ) -> None:
        super().__init__()
        self.executor, self.ray_address = executor, ray_address  # launches and resumes go there (docs/CLUSTER.md)
        self.runs_dir = Path(runs_dir)
        self.presets_dir = Path(presets_dir)
        self.preset = Path(preset) if preset else None
        self.overrides = list(overrides or [])
        self.clock = clock
        self.poll_interval = poll_interval
        self.gpu = gpu
        self.n_workers = workers
        self.store: RunStore | None = None
        self.poller: StorePoller | None = None
        self.records: list[RunRecord] = []
        self.last: dict[str, dict] = {}
        self._gpu_text = ""
        self._active_panel = None  # the .panel shown with focus (see _sync_active_panel)
        self._export_folder = "."  # the export dialog's folder (the last one used)

    def get_default_screen(self) -> Screen:
        return MainScreen(id="_default")

    # -- layout --------------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(icon="◆")
        with TabbedContent(initial="tab-presets", id="panels"):
            for i, (pid, title, cls) in enumerate(PANELS, 1):
                with TabPane(f"{i} {title}", id=f"tab-{pid}"):
                    if cls is PresetsPanel:
                        yield PresetsPanel(self.presets_dir, self.preset, self.overrides, id=pid)
                    elif pid in LAZY:
                        yield Lazy(cls(id=pid, classes="panel"))
                    else:
                        yield cls(id=pid, classes="panel")
        yield KeysFooter()

    def on_mount(self) -> None:
        try:
            self.store = RunStore(self.runs_dir)
        except Exception as e:  # noqa: BLE001
            self.report(f"cannot open the run store in {self.runs_dir}: {e}")
            return
        self.sub_title = f"store {self.runs_dir}"
        self.poller = StorePoller(self.store, self.post_message, self.poll_interval)
        self.run_worker(self.poller.run, name="store poller", group="poll", thread=True, exclusive=True,
                        exit_on_error=False)
        if self.gpu:
            self.probe_gpu()
        self.set_interval(5.0, self._tick_ages)

    # -- reporting -----------------------------------------------------------------------------------------------
    def report(self, error: BaseException | str, severity: str = "error", exc: BaseException | None = None) -> None:
        """Show a problem: a notification; an error also a red line in the panel on screen, an entry (with the
        traceback of ``error`` or ``exc``) in RUNS_DIR/logs/console.log, and a record of the ``sparse_tui.tui``
        logger."""
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        exc = exc if isinstance(error, str) else error
        LOG.log(logging.ERROR if severity == "error" else logging.WARNING, text, exc_info=exc)
        if severity == "error":
            detail = text if exc is None else "".join(traceback.format_exception(exc))
            self.log.error(detail)
            self._log_to_file(detail)
            self._panel_error(text)
        self.notify(text, severity=severity, timeout=8, markup=False)

    def _log_to_file(self, text: str) -> None:
        try:
            path = self.runs_dir / "logs" / "console.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text.rstrip()}\n")
        except OSError:
            pass  # a read-only runs dir: the notification and Textual's log still have it

    def _panel_error(self, text: str) -> None:
        """A red line at the top of the panel on screen (it stays until the panel is shown again)."""
        from rich.text import Text
        from textual.widgets import Static

        try:
            pid = self.query_one("#panels", TabbedContent).active.removeprefix("tab-")
            panel = self.query_one(f"#{pid}")
        except Exception:  # noqa: BLE001 - not composed yet / torn down: the notification is enough
            return
        line = Text(f"⚠ {text} (logged; the console goes on)", style="bold red", no_wrap=True, overflow="ellipsis")
        old = panel.query(".panel-error")
        if old:
            old.first(Static).update(line)
        else:
            panel.mount(Static(line, classes="panel-error"), before=0)

    def _handle_exception(self, error: Exception) -> None:
        """Textual's handler for an exception raised on the UI thread (a message handler, an action, a render)
        exits the app. Once the app runs, this catch-all reports it instead (panel line, notification, log) and the
        console goes on; before that (startup) and while exiting, Textual's handling stands."""
        if getattr(self, "_running", False) and not self._exit and self.screen_stack:
            try:
                self.report(error)
                return
            except Exception:  # noqa: BLE001 - reporting failed too: give up the way Textual does
                pass
        super()._handle_exception(error)

    def on_problem(self, msg: Problem) -> None:
        self.report(msg.text, msg.severity, exc=msg.error)

    def on_done(self, msg: Done) -> None:
        self.notify(msg.text, markup=False)
        if msg.run_ids:
            self.query_one(RunsPanel).reveal(msg.run_ids)
        if msg.switch_to:
            self.show_panel(msg.switch_to)
        self.wake()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state != WorkerState.ERROR:
            return
        from textual.command import CommandPalette
        from textual.css.query import NoMatches

        node, error = event.worker.node, event.worker.error
        cause = getattr(error, "error", error)  # WorkerFailed wraps the exception
        if node is not self and (not getattr(node, "is_attached", True)
                                 or (isinstance(node, CommandPalette) and isinstance(cause, NoMatches))):
            # a worker of a dialog that is closing or closed: Textual 8.2.8's palette, closed (Enter, Esc) while it
            # gathers commands, queries its result list after the list is gone. Nothing is left to show or fix.
            self.log.warning(f"worker {event.worker.name} of closing {node!r}: {error!r}")
            return
        self.report(error or RuntimeError(f"worker {event.worker.name} failed"))

    def _work(self, fn: Callable[..., Message | None], *args: Any, group: str, exclusive: bool = False) -> None:
        """Run ``fn(*args)`` (one of ``actions``) in a thread worker and post the message it returns."""

        def body() -> None:
            msg = fn(*args)
            if msg is not None and not get_current_worker().is_cancelled:
                self.post_message(msg)

        self.run_worker(body, name=fn.__name__, group=group, thread=True, exclusive=exclusive, exit_on_error=False)

    # -- panels --------------------------------------------------------------------------------------------------
    @guarded
    def action_panel(self, pid: str) -> None:
        self.show_panel(pid)

    @on(PanelRequested)
    @guarded
    def _panel_requested(self, msg: PanelRequested) -> None:
        self.show_panel(msg.panel)

    def panels_mounted(self) -> bool:
        """Every panel is in the DOM (not while composing, before a Lazy panel is mounted, or while tearing down)."""
        return bool(self.screen_stack) and all(self.query(f"#{pid}") for pid, _, _ in PANELS)

    def show_panel(self, pid: str) -> None:
        tabs = self.query_one("#panels", TabbedContent)
        tabs.active = f"tab-{pid}"
        self.call_later(self._focus_panel, pid)

    def _focus_panel(self, pid: str) -> None:
        if self.query_one("#panels", TabbedContent).active != f"tab-{pid}":
            return  # a later switch won
        panels = self.query(f"#{pid}")
        if not panels:  # a Lazy panel not mounted yet: it is, after the next frame
            self.call_after_refresh(self._focus_panel, pid)
            return
        panel = panels.first()
        panel.query(".panel-error").remove()  # a problem shown earlier was seen (it stays in the log)
        if pid == "runs":
            self.query_one(RunsPanel).table.focus()
        elif pid == "presets":
            self.query_one(PresetsPanel).focus_form()
        else:
            panel.focus()
        self._panel_shown(pid)

    def _panel_shown(self, pid: str) -> None:
        if pid == "attention":
            self.query_one(AttentionPanel).set_run(self.current)
        elif pid == "phase":
            self.query_one(PhasePanel).update_data(self.records, self.last)
        elif pid == "fit":
            self.query_one(FitPanel).selection_changed(
                selection.fit_selection_key(self.records, self.marked, self.current))

    def _panel_action(self, pid: str, action: str) -> None:
        """A palette command: show the panel, then run its action."""
        self.show_panel(pid)
        self.call_after_refresh(lambda: self.run_action(action, self.query_one(f"#{pid}")))

    @on(TabbedContent.TabActivated)
    @guarded
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        pid = (event.pane.id or "").removeprefix("tab-")
        panel = self.query(f"#{pid}")
        if pid and not (self.focused and panel and panel.first() in [self.focused, *self.focused.ancestors]):
            self.call_later(self._focus_panel, pid)

    # -- focus highlight -------------------------------------------------------------------------------------------
    def on_descendant_focus(self, event) -> None:
        self._sync_active_panel()

    def on_descendant_blur(self, event) -> None:
        self.call_later(self._sync_active_panel)  # focus may have left every panel (the next focus event fixes it)

    def _sync_active_panel(self) -> None:
        """Highlight (round border and title in the accent colour) the innermost ``.panel`` holding the focus of the
        main screen, touching styles only when that panel changes. The highlight is an inline style of that one
        widget: a class (or :focus-within) would restyle the panel's whole subtree, ~340 widgets for the preset
        form (that made each Tab take ~1 s, and each switch to the Presets panel ~70 ms)."""
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

    # -- palette and help ------------------------------------------------------------------------------------------
    def get_system_commands(self, screen: Screen):
        from sparse_tui.tui.commands import system_commands

        yield from system_commands(self)
        yield from super().get_system_commands(screen)

    def action_command_palette(self) -> None:
        from sparse_tui.tui.commands import CommandPalette

        if self.use_command_palette and not CommandPalette.is_open(self):
            self.push_screen(CommandPalette(id="--command-palette"))

    def search_themes(self) -> None:
        from textual.theme import ThemeProvider

        from sparse_tui.tui.commands import CommandPalette

        self.push_screen(CommandPalette(providers=[ThemeProvider], placeholder="Search for themes…"))

    def action_help(self) -> None:
        from sparse_tui.tui.commands import help_groups
        from sparse_tui.tui.screens.help import HelpScreen

        self.push_screen(HelpScreen(help_groups(self)))

    # -- selection (UI state) --------------------------------------------------------------------------------------
    @on(RunHighlighted)
    def _run_highlighted(self, msg: RunHighlighted) -> None:
        self.current = msg.run_id

    @on(MarkedChanged)
    def _marked_changed(self, msg: MarkedChanged) -> None:
        self.marked = list(msg.run_ids)

    def watch_current(self) -> None:
        self._update_watch()

    def watch_marked(self) -> None:
        self._update_watch()

    def view_ids(self) -> list[str]:
        """The runs whose curves are shown: the marked runs, else the current one."""
        return list(self.marked) if self.marked else ([self.current] if self.current else [])

    def _update_watch(self) -> None:
        if self.poller is not None:
            self.poller.watch(self.view_ids())

    def wake(self) -> None:
        if self.poller is not None:
            self.poller.wake()

    # -- what the store poller reads -------------------------------------------------------------------------------
    @guarded
    def on_runs_updated(self, msg: RunsUpdated) -> None:
        self.records, self.last = msg.records, msg.last
        self.query_one(RunsPanel).show(msg.records, msg.last, self.clock())
        active = self.query_one("#panels", TabbedContent).active
        if active == "tab-phase":
            self.query_one(PhasePanel).update_data(msg.records, msg.last)
        if active == "tab-attention":
            ap = self.query_one(AttentionPanel)
            if ap.run_id is not None and ap.step is not None and ap.steps and ap.step == ap.steps[-1]:
                rec = next((r for r in msg.records if r.run_id == ap.run_id), None)
                if rec is not None and rec.status == "running":
                    ap.step = None  # follow the newest snapshot of a running run
                    ap.request()
        self._set_header()

    @guarded
    def on_curves_data(self, msg: CurvesData) -> None:
        self.query_one(CurvesPanel).update_data(msg)

    @guarded
    def _tick_ages(self) -> None:
        panels = self.query(RunsPanel)  # empty while the app tears down (the timer can fire then)
        if self.records and panels:
            panels.first().show(self.records, self.last, self.clock())

    def _set_header(self) -> None:
        n_running = sum(1 for r in self.records if r.status == "running")
        n_queued = sum(1 for r in self.records if r.status == "queued")
        parts = [f"{len(self.records)} runs", f"{n_running} running"]
        if n_queued:
            parts.append(f"{n_queued} queued")
        if self._gpu_text:
            parts.append(self._gpu_text)
        if self.executor != "local":
            parts.append(f"{self.executor} {self.ray_address or 'auto'}")
        self.sub_title = " · ".join(parts)

    # -- GPU -----------------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="gpu", exit_on_error=False)
    def probe_gpu(self) -> None:
        from sparse_tui.tui.sysinfo import gpu_summary

        worker = get_current_worker()
        while not worker.is_cancelled:
            text = gpu_summary()
            self.post_message(GpuInfo(text))
            if text is None:
                return  # no GPU here: stop probing
            for _ in range(20):
                if worker.is_cancelled:
                    return
                time.sleep(0.1)

    def on_gpu_info(self, msg: GpuInfo) -> None:
        self._gpu_text = msg.text or "no GPU"
        self._set_header()

    # -- what the panels ask for -----------------------------------------------------------------------------------
    @on(LaunchRequested)
    def _launch(self, msg: LaunchRequested) -> None:
        self._work(actions.launch, self.store, msg.loaded, self.n_workers, self.executor, self.ray_address,
                   group="launch")

    @on(CancelRequested)
    def _cancel(self, msg: CancelRequested) -> None:
        live = [r.run_id for r in self.records if r.run_id in msg.run_ids and r.status in ("queued", "running")]
        if not live:
            self.notify("nothing to cancel (only queued or running runs can be)", severity="warning")
            return
        self._work(actions.cancel, self.store, live, group="actions")

    @on(ResumeRequested)
    def _resume(self, msg: ResumeRequested) -> None:
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

    @on(CompareRequested)
    def _compare(self, msg: CompareRequested) -> None:
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

    @on(DeleteRequested)
    def _delete(self, msg: DeleteRequested) -> None:
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

    @on(ExportRequested)
    def _export(self, msg: ExportRequested) -> None:
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

    @on(AttentionRequested)
    def _attention(self, m: AttentionRequested) -> None:
        self._work(actions.attention, self.store, m.run_id, m.step, m.layer, m.head, m.example, m.width,
                   group="attention", exclusive=True)

    @guarded
    def on_attention_data(self, msg: AttentionData) -> None:
        ap = self.query_one(AttentionPanel)
        if not msg.steps:
            ap.show_message(msg.info)
        else:
            ap.update_data(msg)

    @on(GuessRequested)
    def _guess(self, msg: GuessRequested) -> None:
        self.query_one(FitPanel).set_guess(self._guess_variables(msg.query))

    def _guess_variables(self, query: str) -> list[str]:
        return selection.guess_fit_variables(self.records, self.marked, self.current, query)

    @on(FitRequested)
    def _fit(self, msg: FitRequested) -> None:
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


def make_app(
    runs_dir: Path | str = "runs",
    presets_dir: Path | str = "presets",
    preset: Path | str | None = None,
    overrides: list[str] | None = None,
    **kw: Any,
) -> SparseTuiApp:
    """The app factory shared by the CLI and the tests."""
    return SparseTuiApp(Path(runs_dir), Path(presets_dir), Path(preset) if preset else None, overrides, **kw)


def run_app(runs_dir: Path, presets_dir: Path, preset: Path | None = None, overrides: list[str] | None = None,
            executor: str = "local", ray_address: str | None = None) -> int:
    """Run the console until the user quits. Returns the process exit code."""
    app = make_app(runs_dir, presets_dir, preset, overrides, executor=executor, ray_address=ray_address)
    result = app.run()
    if app.return_code not in (None, 0):
        return int(ExitCode.RUN_FAILED)
    return int(result or 0)
