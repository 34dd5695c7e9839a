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
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from textual import events, work
from textual.app import App
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.screen import Screen
from textual.theme import ThemeProvider
from textual.widgets import Input
from textual.worker import get_current_worker

from sparse_tui.base.exitcodes import ExitCode
from sparse_tui.base.sysmetrics import Nvml
from sparse_tui.executors import ExecutorOptions, executor_for
from sparse_tui.store import DB_NAME, RunStore
from sparse_tui.tui import panels
from sparse_tui.tui.commands import CommandPalette, help_groups, system_commands
from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.highlight import FocusHighlight
from sparse_tui.tui.messages import ExecutorChecked, GpuInfo, Problem
from sparse_tui.tui.poller import StorePoller
from sparse_tui.tui.reporting import Reporting
from sparse_tui.tui.screens.confirm import ConfirmScreen
from sparse_tui.tui.screens.help import HelpScreen
from sparse_tui.tui.screens.main import MainScreen
from sparse_tui.tui.sysinfo import host_summary


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
        self._host = self._gpu = ""  # this machine's CPU and RAM use, its GPUs' (the header)
        self.children_started: set[int] = set()  # training processes this console started (reaped when they end)
        self.held_keys: list[events.Key] | None = []  # keys typed before the console is ready (None: it is)

    def get_default_screen(self) -> Screen:
        self.main = MainScreen()
        return self.main

    def on_mount(self) -> None:
        if self.gpu:
            self.probe_gpu()
        self.set_interval(5.0, self.main.tick)
        self.set_interval(2.0, self.reap_children)

        if (self.runs_dir / DB_NAME).exists():
            if self.open_store():
                self.set_header()
            self.set_timer(30, self.ready)  # a store that takes this long to read: keys pass anyway
        else:  # say where, and ask: opening the console in any folder must not leave a runs/runs.db behind
            self.sub_title = f"no run store in {self.runs_dir.resolve()}"
            self.call_after_refresh(self.ensure_store, "start")

    async def on_event(self, event: events.Event) -> None:
        """Keys typed while the console starts (before its panels are mounted and the first read of the store is
        drawn; seconds under load) went to whatever had the focus then, or nowhere (``2 /blog`` lost the ``/``): they
        are kept and replayed in order once it is ready (``ready``). ctrl+q / ctrl+c quit at once."""
        if (isinstance(event, events.Key) and self.held_keys is not None and not event.is_forwarded
                and event.key not in ("ctrl+q", "ctrl+c")):
            self.held_keys.append(event)
            self.set_header()
            return
        if (isinstance(event, events.Key) and not event.is_forwarded and self.screen is self.main
                and not isinstance(self.focused, Input) and (pid := panels.panel_for_key(event.key))):
            # A panel's key switches here, before the next key is forwarded: Textual forwards each key to the
            # widget focused when the app reads it, and a binding runs only once the key has bubbled back up, so in
            # a burst (`2 /toy d`) `/` went to the old panel and `d` to the run table's delete dialog.
            self.main.show_panel(pid)
            return
        await super().on_event(event)

    async def action_quit(self) -> None:
        """q / ctrl+q: quit; over unsaved edits in the preset form, Save / Discard / Cancel first."""
        presets = self.main._panel("presets") if self.screen_stack and self.main.is_attached else None
        if presets is not None and presets.draft is not None and presets.draft.dirty:
            presets.settle("quit", self.exit)
            return
        self.exit()

    def ready(self, use_keys: bool = True) -> None:
        """The console is ready for keys (the main screen drew its first run table, or a question came first): the
        keys kept during start-up are pressed now, in order, or (``use_keys`` False: a question came first, which
        they were not typed for) refused with a notification that names them."""
        keys, self.held_keys = self.held_keys or [], None
        if self.store is not None:
            self.set_header()  # (no longer 'starting')
        if keys and use_keys:
            # a task of its own (as Pilot presses keys): each key is handled, and what it started (a focus move)
            # done, before the next; from a callback of the app's loop they would arrive in one burst
            self.run_worker(self._press_keys([k.key for k in keys]), name="start-up keys", exit_on_error=False)
        elif keys:
            self.notify(f"{len(keys)} key(s) typed during start-up not used: {' '.join(k.key for k in keys)}",
                        severity="warning", markup=False)

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
            self.ready(use_keys=False)
            self.push_screen(ConfirmScreen(f"No run store at {where}. Create it? {later}".strip(),
                                           yes="Create (y)"), done)
        return False

    def open_store(self) -> bool:
        try:
            self.store = RunStore(self.runs_dir)
        except Exception as e:  # noqa: BLE001
            self.report(f"cannot open the run store in {self.runs_dir}: {e}")
            self.ready(use_keys=False)
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

    def push_screen(self, screen, *args, **kwargs):
        """A dialog that is open already is not opened again (the bell rings). Textual draws a modal screen over a
        picture of the screens under it, one nested render each, and the app's keys (?, ctrl+p and the palette's
        commands) work over every dialog: help from the palette over help, round after round, stacked screens until
        the render passed Python's recursion limit (CI, 2026-11-29). One of each kind bounds the stack."""
        if isinstance(screen, Screen) and any(type(s) is type(screen) for s in self.screen_stack):
            self.bell()
            return AwaitComplete()
        return super().push_screen(screen, *args, **kwargs)

    def wake(self) -> None:
        if self.poller is not None:
            self.poller.wake()

    # -- header, resources and executor ---------------------------------------------------------------------------
    def set_header(self) -> None:
        """The counts of runs, this machine's CPU, RAM and GPU use, and the executor, in the header's width: at 80
        columns zero counts, then the GPU names, then RAM, then CPU make way; the GPU's use stays whole. (While
        the console starts, the header says that instead.)"""
        ray = [f"{self.executor.kind} {self.executor.get('--ray-address') or 'auto'}"] * (self.executor.kind != "local")
        if self.held_keys is not None:
            n = len(self.held_keys)
            self.sub_title = " · ".join([f"starting: {n} key(s) kept, used once the runs are read" if n else
                                         f"starting: reading {self.runs_dir} (keys typed now are kept)", *ray])
            return
        st = [r.status for r in self.main.records]
        counts = [f"{len(st)} runs", f"{st.count('running')} running"] + [f"{st.count('queued')} queued"] * (
            "queued" in st)
        live = [c for c in counts if not c.startswith("0 ")] or counts[:1]
        gpu_short = re.sub(r"(GPU\d+) \S+ (\d+%)", r"\1 \2", self._gpu)
        cpu = self._host.split(" · ")[0]
        room = self.size.width - 18 - len(self.title) - 3  # the header's icon and clock space, " — "
        for parts in ([*counts, self._host, self._gpu], [*live, self._host, self._gpu], [*live, self._host, gpu_short],
                      [*live, cpu, gpu_short], [*live, gpu_short]):
            text = " · ".join(p for p in parts + ray if p)
            if len(text) <= room:
                break
        self.sub_title = text

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
        self._host, self._gpu = msg.host or "", msg.text or "no GPU"
        self.set_header()

    def on_resize(self) -> None:
        if self.held_keys is None and self.store is not None:
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
