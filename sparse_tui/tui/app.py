"""The sparse-tui console: the app shell (panels, keys, palette, help), the UI state and the store's data.

``make_app`` builds the app (the CLI and the tests share it); ``run_app`` runs it and returns an exit code.

How it is built (after harlequin / toolong): the panels (``widgets/``) only draw and post messages
(``messages.py``): what the user asked for (``LaunchRequested``, ``FitRequested`` ...) and what changed
(``RunHighlighted``, ``MarkedChanged``). The app keeps the UI state (the current and the marked runs, as reactives)
and applies what the store poller (``poller.py``, one thread) reads: ``RunsUpdated`` and ``CurvesData``, which
coalesce. Its mixins hold the rest: ``requests.py`` answers the panels' requests (running ``actions.py`` in thread
workers), ``reporting.py`` shows problems, ``highlight.py`` marks the panel with the focus. Workers only
``post_message``; widgets are touched on the UI thread only; worker loops check cancellation.

Training runs in detached processes (``runner.detach``), so quitting the app or losing the terminal stops nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.lazy import Lazy
from textual.reactive import reactive
from textual.screen import Screen
from textual.theme import ThemeProvider
from textual.widgets import Header, Input, TabbedContent, TabPane
from textual.worker import get_current_worker

from sparse_tui.executors import probe
from sparse_tui.exitcodes import ExitCode
from sparse_tui.store import DB_NAME, RunRecord, RunStore
from sparse_tui.tui import selection
from sparse_tui.tui.commands import CommandPalette, help_groups, system_commands
from sparse_tui.tui.guard import Guarded, guarded
from sparse_tui.tui.highlight import FocusHighlight
from sparse_tui.tui.messages import (
    CurvesData,
    ExecutorChecked,
    GpuInfo,
    GridToggled,
    GroupingChanged,
    MarkedChanged,
    PanelRequested,
    Problem,
    RunHighlighted,
    RunsUpdated,
)
from sparse_tui.tui.panels import LAZY, PANELS
from sparse_tui.tui.poller import StorePoller
from sparse_tui.tui.reporting import Reporting
from sparse_tui.tui.requests import PanelRequests
from sparse_tui.tui.screens.confirm import ConfirmScreen
from sparse_tui.tui.screens.help import HelpScreen
from sparse_tui.tui.sysinfo import Nvml, host_summary
from sparse_tui.tui.widgets.attention_map import AttentionPanel
from sparse_tui.tui.widgets.curves import CurvesPanel
from sparse_tui.tui.widgets.fit_panel import FitPanel
from sparse_tui.tui.widgets.keys_footer import KeysFooter
from sparse_tui.tui.widgets.phase_diagram import PhasePanel
from sparse_tui.tui.widgets.presets_panel import PresetsPanel
from sparse_tui.tui.widgets.run_table import RunsPanel


class MainScreen(Guarded, Screen):
    """The screen of the panels; guarded like them (a widget's render error surfaces in its screen's loop)."""


class SparseTuiApp(Reporting, PanelRequests, FocusHighlight, Guarded, App[int]):
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
        self._export_folder: Path | None = None  # the export dialog's folder (the last one used)
        self.group_keys: list[str] = []  # the Runs table's grouping (the Curves grid draws one chart per group)
        self.children_started: set[int] = set()  # training processes this console started (reaped when they end)
        self._figures_pending: set[Path] = set()  # figure files asked for (each request gets a name of its own)

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
        if self.gpu:
            self.probe_gpu()
        self.set_interval(5.0, self._tick_ages)
        self.set_interval(2.0, self.reap_children)

        if (self.runs_dir / DB_NAME).exists():
            self.open_store()
        else:  # say where, and ask: opening the console in any folder must not leave a runs/runs.db behind
            self.sub_title = f"no run store in {self.runs_dir.resolve()}"
            self.call_after_refresh(self.ensure_store, "start")

    def ensure_store(self, why: str) -> bool:
        """True when the run store is open; else ask whether to create it (where, in full) and return False (a
        launch asks again)."""
        if self.store is not None:
            return True

        if (self.runs_dir / DB_NAME).exists():
            return self.open_store()
        where = (self.runs_dir / DB_NAME).resolve()
        later = "Without it the presets can be edited; a launch asks again." if why == "start" else ""

        def done(yes: bool | None) -> None:
            if yes:
                self.open_store()

        if not any(isinstance(s, ConfirmScreen) for s in self.screen_stack):
            self.push_screen(ConfirmScreen(f"No run store at {where}. Create it? {later}".strip(),
                                           yes="Create (y)"), done)
        return False

    def open_store(self) -> bool:
        try:
            self.store = RunStore(self.runs_dir)
        except Exception as e:  # noqa: BLE001
            self.report(f"cannot open the run store in {self.runs_dir}: {e}")
            return False
        self.sub_title = f"store {self.runs_dir}"
        self.poller = StorePoller(self.store, self.post_message, self.poll_interval)
        self.poller.watch(self.view_ids())
        self.run_worker(self.poller.run, name="store poller", group="poll", thread=True, exclusive=True,
                        exit_on_error=False)
        return True

    def reap_children(self) -> None:
        """Collect the exit status of the ``work`` processes this console started once they end (a detached
        process is still the console's child: unreaped it stays a zombie as long as the console runs). Only those
        pids are waited for, never any other child."""
        for pid in list(self.children_started):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid  # not our child (or reaped already)
            if done:
                self.children_started.discard(pid)

    def export_folder(self) -> str:
        """Where the export dialog proposes to write: the folder used last, else RUNS_DIR/exports (never the
        current folder: a git checkout collected untracked CSVs), in full."""
        return str((self._export_folder or self.runs_dir / "exports").resolve())

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
        if isinstance(self.focused, Input) and panel in self.focused.ancestors:
            pass  # a key typed right after the switch put the focus in a field (2 then / : the filter keeps it)
        elif pid == "runs":
            self.query_one(RunsPanel).table.focus()
        elif pid == "presets":
            self.query_one(PresetsPanel).focus_list()  # 1: the file list (Enter opens the form), not a field
        else:
            panel.focus()
        self._panel_shown(pid)

    def _panel_shown(self, pid: str) -> None:
        if pid == "attention":
            self.query_one(AttentionPanel).set_run(self.current)
        elif pid == "phase":
            self.query_one(PhasePanel).update_data(self.records, self.last, self.current)
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

    # -- palette and help ------------------------------------------------------------------------------------------
    def get_system_commands(self, screen: Screen):
        yield from system_commands(self)
        # Textual's "Keys" (its key panel) would list help a second time beside the console's "Help: all keys"
        yield from (c for c in super().get_system_commands(screen) if c.title != "Keys")

    def action_command_palette(self) -> None:
        if self.use_command_palette and not CommandPalette.is_open(self):
            self.push_screen(CommandPalette(id="--command-palette"))

    def search_themes(self) -> None:


        self.push_screen(CommandPalette(providers=[ThemeProvider], placeholder="Search for themes…"))

    def action_help(self) -> None:
        self.push_screen(HelpScreen(help_groups(self)))

    # -- selection (UI state) --------------------------------------------------------------------------------------
    @on(RunHighlighted)
    def _run_highlighted(self, msg: RunHighlighted) -> None:
        self.current = msg.run_id

    @on(MarkedChanged)
    def _marked_changed(self, msg: MarkedChanged) -> None:
        self.marked = list(msg.run_ids)

    @on(GroupingChanged)
    @guarded
    def _grouping_changed(self, msg: GroupingChanged) -> None:
        self.group_keys = list(msg.keys)
        self.query_one(CurvesPanel).set_groups(self.group_keys, self.records)

    def watch_current(self) -> None:
        self._update_watch()

    def watch_marked(self) -> None:
        self._update_watch()

    GRID_RUNS = 64  # at most this many runs in the Curves grid

    def view_ids(self) -> list[str]:
        """The runs whose curves are shown: the marked runs, else (the Curves grid) the runs the Runs table shows,
        else the current one."""
        if self.marked:
            return list(self.marked)
        curves = self.query(CurvesPanel)
        if curves and curves.first().grid:
            return self.query_one(RunsPanel).visible_ids[: self.GRID_RUNS]
        return [self.current] if self.current else []

    @on(GridToggled)
    def _grid_toggled(self, msg: GridToggled) -> None:
        self._update_watch()

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
        self._update_watch()  # the grid follows the table's runs
        active = self.query_one("#panels", TabbedContent).active
        if active == "tab-phase":
            self.query_one(PhasePanel).update_data(msg.records, msg.last, self.current)
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

    # -- resources ---------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="gpu", exit_on_error=False)
    def probe_gpu(self) -> None:
        """CPU, RAM and (NVML) GPU use for the header, every 2 s; the loop checks cancellation."""
        worker = get_current_worker()
        nvml = Nvml()
        try:
            while not worker.is_cancelled:
                self.post_message(GpuInfo(nvml.summary(), host_summary()))
                for _ in range(20):
                    if worker.is_cancelled:
                        return
                    time.sleep(0.1)
        finally:
            nvml.close()

    def on_gpu_info(self, msg: GpuInfo) -> None:
        self._gpu_text = " · ".join(t for t in (msg.host, msg.text or "no GPU") if t)
        self._set_header()

    # -- executor --------------------------------------------------------------------------------------------------
    def action_executor(self, executor: str) -> None:
        """Train the next launches and resumes on ``executor`` (local, or ray at ``--ray-address``, default auto;
        docs/CLUSTER.md), once it is checked: the same check as ``sparse-tui --executor ray``, in a thread (it may
        wait seconds for an address to answer). Runs already started stay where they are."""
        self.check_executor(executor)

    @work(thread=True, exclusive=True, group="executor", exit_on_error=False)
    def check_executor(self, executor: str) -> None:
        self.post_message(ExecutorChecked(executor, probe(executor, self.ray_address)))

    def on_executor_checked(self, msg: ExecutorChecked) -> None:
        if msg.problem:
            self.post_message(Problem(f"launches stay on {self._where()}: {msg.problem}", severity="warning"))
            return
        self.executor = msg.executor
        self._set_header()
        self.notify(f"launches and resumes now train on {self._where()}", timeout=6)

    def _where(self) -> str:
        return "this machine" if self.executor == "local" else f"the Ray cluster ({self.ray_address or 'auto'})"


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
