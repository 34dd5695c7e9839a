"""The sparse-tui console: the app (the run store and its poller, the palette and help, the GPU probe, the executor).

The CLI and the tests build the same ``SparseTuiApp``; ``run_app`` runs it and returns an exit code.

How it is built (after toolong's ``LogScreen`` and posting's ``MainScreen``): the app keeps what outlives a screen: the
run store, its poller (``poller.py``, one thread), the GPU probe, the executor and the reporting of problems
(``reporting.py``). The main screen (``screens/main.py``) composes the panels (``widgets/``, registered in
``panels.py``), switches between them, keeps the UI state and answers the panels' requests. The panels only draw
and post messages (``messages.py``). Workers only ``post_message``; widgets are touched on the UI thread only; worker
loops check cancellation.

Training runs in detached processes (``runner.detach``), so quitting the app or losing the terminal stops nothing.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.screen import Screen
from textual.theme import ThemeProvider
from textual.worker import get_current_worker

from sparse_tui.executors import ExecutorOptions, executor_for
from sparse_tui.exitcodes import ExitCode
from sparse_tui.store import DB_NAME, RunStore
from sparse_tui.tui.commands import CommandPalette, help_groups, system_commands
from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.highlight import FocusHighlight
from sparse_tui.tui.messages import ExecutorChecked, GpuInfo, Problem
from sparse_tui.tui.poller import StorePoller
from sparse_tui.tui.reporting import Reporting
from sparse_tui.tui.screens.confirm import ConfirmScreen
from sparse_tui.tui.screens.help import HelpScreen
from sparse_tui.tui.screens.main import MainScreen
from sparse_tui.tui.sysinfo import Nvml, host_summary


class SparseTuiApp(Reporting, FocusHighlight, Guarded, App[int]):
    """The console. ``clock`` gives 'now' for run ages (tests inject a fixed one)."""

    CSS_PATH = "app.tcss"
    TITLE = "sparse-tui"
    ENABLE_COMMAND_PALETTE = True  # ctrl+p: panels, presets and actions (commands.py)
    BINDINGS = [  # the main screen adds the panels' keys, 1..N (panels.PANELS)
        Binding("f1,question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
    ]
    main: MainScreen  # the screen of the panels (the default screen)

    def __init__(self, runs_dir: Path | str = "runs", presets_dir: Path | str = "presets",
                 preset: Path | str | None = None, overrides: list[str] | None = None, *,
                 clock: Callable[[], float] = time.time, poll_interval: float = 0.3, gpu: bool = True,
                 workers: int | None = None, executor: ExecutorOptions = ExecutorOptions()) -> None:
        super().__init__()
        self.executor = executor  # launches and resumes train there (docs/CLUSTER.md)
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
        self._gpu_text = ""
        self.children_started: set[int] = set()  # training processes this console started (reaped when they end)

    def get_default_screen(self) -> Screen:
        self.main = MainScreen()
        return self.main

    def on_mount(self) -> None:
        if self.gpu:
            self.probe_gpu()
        self.set_interval(5.0, self.main.tick)
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
        self.poller = StorePoller(self.store, self.main.post_message, self.poll_interval)
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

    def wake(self) -> None:
        if self.poller is not None:
            self.poller.wake()

    # -- header, resources and executor ---------------------------------------------------------------------------
    def set_header(self) -> None:
        records = self.main.records
        n_running = sum(1 for r in records if r.status == "running")
        n_queued = sum(1 for r in records if r.status == "queued")
        parts = [f"{len(records)} runs", f"{n_running} running"]
        if n_queued:
            parts.append(f"{n_queued} queued")
        if self._gpu_text:
            parts.append(self._gpu_text)
        if self.executor.kind != "local":
            parts.append(f"{self.executor.kind} {self.executor.address or 'auto'}")
        self.sub_title = " · ".join(parts)

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
        self.set_header()

    # -- executor --------------------------------------------------------------------------------------------------
    def action_executor(self, kind: str) -> None:
        """Train the next launches and resumes on the executor ``kind`` (local, or ray at ``--ray-address``, default
        auto; docs/CLUSTER.md), once it is checked: the same check as ``sparse-tui --executor ray``, in a thread (it
        may wait seconds for an address to answer). Runs already started stay where they are."""
        self.check_executor(replace(self.executor, kind=kind))

    @work(thread=True, exclusive=True, group="executor", exit_on_error=False)
    def check_executor(self, executor: ExecutorOptions) -> None:
        self.post_message(ExecutorChecked(executor, executor_for(executor).probe()))

    def on_executor_checked(self, msg: ExecutorChecked) -> None:
        if msg.problem:
            self.post_message(Problem(f"launches stay on {self._where()}: {msg.problem}", severity="warning"))
            return
        self.executor = msg.executor
        self.set_header()
        self.notify(f"launches and resumes now train on {self._where()}", timeout=6)

    def _where(self) -> str:
        return executor_for(self.executor).where()


def run_app(runs_dir: Path, presets_dir: Path, preset: Path | None = None, overrides: list[str] | None = None,
            executor: ExecutorOptions = ExecutorOptions()) -> int:
    """Run the console until the user quits. Returns the process exit code."""
    app = SparseTuiApp(runs_dir, presets_dir, preset, overrides, executor=executor)
    result = app.run()
    if app.return_code not in (None, 0):
        return int(ExitCode.RUN_FAILED)
    return int(result or 0)
