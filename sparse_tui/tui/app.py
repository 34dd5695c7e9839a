"""The sparse-tui console: a Textual app over the run store and the preset files.

``make_app`` builds the app (the CLI and the tests share it); ``run_app`` runs it and returns an exit code.

Threading model (after harlequin / toolong): one thread worker polls the store a few times per second
(``PRAGMA data_version`` is cheap) and posts ``RunsUpdated`` / ``CurvesData`` messages; launching, cancelling,
deleting, exporting, fitting, attention loading and the GPU probe run in thread workers too. Workers only
``post_message``; widgets are touched on the UI thread only. Worker loops check ``is_cancelled``.

Training runs in detached processes (``runner.detach``), so quitting the app or losing the terminal stops nothing.
"""

from __future__ import annotations

import functools
import math
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Header, TabbedContent, TabPane
from textual.worker import Worker, WorkerState, get_current_worker

from sparse_tui.tui.guard import Guarded
from sparse_tui.exitcodes import ExitCode
from sparse_tui.store import RunRecord, RunStore
from sparse_tui.tui.messages import AttentionData, CurvesData, Done, FitDone, GpuInfo, Problem, RunsUpdated
from sparse_tui.tui.widgets.attention_map import AttentionPanel
from sparse_tui.tui.widgets.curves import CurvesPanel
from sparse_tui.tui.widgets.fit_panel import FitPanel
from sparse_tui.tui.widgets.keys_footer import KeysFooter
from sparse_tui.tui.widgets.phase_diagram import PhasePanel
from sparse_tui.tui.widgets.presets_panel import PresetsPanel
from sparse_tui.tui.widgets.run_table import RunsPanel

PANELS = (
    ("presets", "Presets", PresetsPanel),
    ("runs", "Runs", RunsPanel),
    ("curves", "Curves", CurvesPanel),
    ("attention", "Attention", AttentionPanel),
    ("fit", "Fit", FitPanel),
    ("phase", "Phase", PhasePanel),
)
CURVE_POINTS = 1500  # points per series kept by the poller (the plot downsamples further to its width)


def guarded(fn: Callable) -> Callable:
    """Run a UI-thread action; an exception becomes an error notification instead of a crash."""

    @functools.wraps(fn)
    def wrapper(self: "SparseTuiApp", *a: Any, **kw: Any) -> Any:
        try:
            return fn(self, *a, **kw)
        except NoMatches as e:
            # A worker's message can arrive while the app is still composing or already tearing down its panels
            # (quit with a poll in flight): nothing to update then. With the panels mounted it is a real bug.
            if self._exit or not all(self.query(f"#{pid}") for pid, _, _ in PANELS):
                self.log.warning(f"{fn.__name__}: {e} (panels not mounted; ignored)")
                return None
            self.report(e)
            return None
        except Exception as e:  # noqa: BLE001 - the catch-all that keeps the console alive
            self.report(e)
            return None

    return wrapper


class MainScreen(Guarded, Screen):
    """The screen of the panels; guarded like them (a widget's render error surfaces in its screen's loop)."""


class SparseTuiApp(Guarded, App[int]):
    """The console. ``clock`` gives 'now' for run ages (tests inject a fixed one)."""

    CSS_PATH = "app.tcss"
    TITLE = "sparse-tui"
    ENABLE_COMMAND_PALETTE = True  # ctrl+p: panels, presets and actions (get_system_commands)
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
        self.records: list[RunRecord] = []
        self.last: dict[str, dict] = {}
        self.marked: list[str] = []
        self.current: str | None = None
        self.errors: list[str] = []  # every problem reported (tests assert on it)
        self.updates = 0  # RunsUpdated messages applied
        self.curve_updates = 0
        self._watch: tuple[str, ...] = ()
        self._wake = threading.Event()
        self._gpu_text = ""
        self._theory_cache: dict[str, tuple[list[float], list[float]]] = {}
        self._active_panel = None  # the .panel shown with focus (see _sync_active_panel)
        self._export_folder = "."  # the export dialog's folder (the last one used)

    def get_default_screen(self) -> Screen:
        return MainScreen(id="_default")

    # -- layout --------------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(icon="◆")
        initial = "tab-presets"
        with TabbedContent(initial=initial, id="panels"):
            for pid, title, cls in PANELS:
                with TabPane(f"{PANELS.index((pid, title, cls)) + 1} {title}", id=f"tab-{pid}"):
                    if cls is PresetsPanel:
                        yield PresetsPanel(self.presets_dir, self.preset, self.overrides, id=pid)
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
        self.poll_store()
        if self.gpu:
            self.probe_gpu()
        self.set_interval(5.0, self._tick_ages)

    # -- reporting -----------------------------------------------------------------------------------------------
    def report(self, error: Exception | str, severity: str = "error") -> None:
        """Show a problem (a notification and a red line in the panel on screen), keep it in ``errors`` and append
        it, with its traceback, to RUNS_DIR/logs/console.log."""
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        self.errors.append(text)
        detail = text if isinstance(error, str) else "".join(traceback.format_exception(error))
        if severity == "error":
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
        self.report(msg.text, msg.severity)

    def on_done(self, msg: Done) -> None:
        self.notify(msg.text, markup=False)
        if msg.run_ids:
            self.query_one(RunsPanel).reveal(msg.run_ids)
        if msg.switch_to:
            self.show_panel(msg.switch_to)
        self.wake()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.report(event.worker.error or RuntimeError(f"worker {event.worker.name} failed"))

    # -- panels --------------------------------------------------------------------------------------------------
    @guarded
    def action_panel(self, pid: str) -> None:
        self.show_panel(pid)

    def show_panel(self, pid: str) -> None:
        tabs = self.query_one("#panels", TabbedContent)
        tabs.active = f"tab-{pid}"
        self.call_later(self._focus_panel, pid)

    def _focus_panel(self, pid: str) -> None:
        if self.query_one("#panels", TabbedContent).active != f"tab-{pid}":
            return  # a later switch won
        panel = self.query_one(f"#{pid}")
        panel.query(".panel-error").remove()  # a problem shown earlier was seen (it stays in the log)
        if pid == "runs":
            self.query_one(RunsPanel).table.focus()
        elif pid == "presets":
            self.query_one(PresetsPanel).focus_form()
        else:
            panel.focus()
        self._panel_shown(pid)

    # -- focus highlight ---------------------------------------------------------------------------------------------
    def on_descendant_focus(self, event) -> None:
        self._sync_active_panel()

    def on_descendant_blur(self, event) -> None:
        self.call_later(self._sync_active_panel)  # focus may have left every panel (the next focus event fixes it)

    def _sync_active_panel(self) -> None:
        """Put ``-active`` (the highlighted round border, app.tcss) on the innermost ``.panel`` holding the focus of
        the main screen, touching classes only when that panel changes: a class change restyles the panel's subtree,
        which for the preset form is ~340 widgets (that, and :focus-within, made each Tab take ~1 s)."""
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
            old.remove_class("-active")
        if panel is not None:
            panel.add_class("-active")
        self._active_panel = panel

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        pid = (event.pane.id or "").removeprefix("tab-")
        if pid and not (self.focused and self.query_one(f"#{pid}") in [self.focused, *self.focused.ancestors]):
            self.call_later(self._focus_panel, pid)

    def _panel_shown(self, pid: str) -> None:
        if pid == "attention":
            self.query_one(AttentionPanel).set_run(self.current)
        elif pid == "phase":
            self.query_one(PhasePanel).update_data(self.records, self.last)
        elif pid == "fit":
            self.query_one(FitPanel).selection_changed(self.fit_selection_key())

    def get_system_commands(self, screen: Screen):
        """The command palette (ctrl+p): every panel, every preset file, the actions of the panels, then Textual's
        own (theme, keys, quit)."""
        from functools import partial

        from textual.app import SystemCommand

        for i, (pid, title, cls) in enumerate(PANELS, 1):
            yield SystemCommand(f"Panel: {title}", f"switch to the {title} panel (key {i})", partial(self.show_panel, pid))
        presets = self.query_one(PresetsPanel)
        for path in presets.files:
            yield SystemCommand(f"Preset: {path.name}", f"open {path} in the form",
                                partial(self.call_later, presets.open_path, path))
        actions = [
            ("Launch the preset in the form", "ctrl+l: record its runs and start them", "presets", "launch"),
            ("Save the preset", "ctrl+s", "presets", "save"),
            ("Diff of the unsaved preset edits", "ctrl+d", "presets", "diff"),
            ("Compare two runs", "x: the two marked runs (or the current one and the next): config diff, then "
             "their curves", "runs", "compare"),
            ("Export runs", "e: CSV / JSON lines / Parquet, run table or per-step metrics", "runs", "export"),
            ("Cancel runs", "c: the marked (or current) queued / running runs", "runs", "cancel"),
            ("Resume runs", "u: the marked (or current) failed / interrupted / queued runs, from their checkpoint",
             "runs", "resume"),
            ("Fit the plateau law", "enter in the Fit panel", "fit", "fit"),
            ("Guess the fit variables", "g in the Fit panel", "fit", "guess"),
            ("Next phase-diagram value", "m in the Phase panel", "phase", "value"),
            ("Attention of the current run", "t in the Runs panel", "runs", "attention"),
        ]
        for title, help_, pid, action in actions:
            yield SystemCommand(title, help_, partial(self._panel_action, pid, action))
        yield SystemCommand("Help: all keys", "f1 / ?", self.action_help)
        yield from super().get_system_commands(screen)

    def _panel_action(self, pid: str, action: str) -> None:
        self.show_panel(pid)
        panel = self.query_one(f"#{pid}")
        self.call_later(self.run_action, action, panel)

    def action_help(self) -> None:
        from sparse_tui.tui.screens.help import HelpScreen

        groups = [("everywhere", [b for b in self.BINDINGS if isinstance(b, Binding)])]
        for pid, title, cls in PANELS:
            groups.append((title, list(cls.BINDINGS)))
        from sparse_tui.tui.widgets.preset_form import PresetForm  # noqa: F401

        groups.append(("Presets form", [Binding("tab, shift+tab", "", "next / previous field"),
                                        Binding("escape", "", "back to the preset list (then 1-6 switch panels)"),
                                        Binding("down, up", "", "next / previous field (also on a closed list)"),
                                        Binding("enter, space", "", "open a choice list"),
                                        Binding("enter", "", "add a sweep key (on its line)")]))
        self.push_screen(HelpScreen(groups))

    # -- selection -----------------------------------------------------------------------------------------------
    def set_current_run(self, run_id: str | None) -> None:
        self.current = run_id
        self._update_watch()

    def set_marked(self, ids: list[str]) -> None:
        self.marked = list(ids)
        self._update_watch()

    def view_ids(self) -> list[str]:
        return list(self.marked) if self.marked else ([self.current] if self.current else [])

    def _update_watch(self) -> None:
        new = tuple(self.view_ids())
        if new != self._watch:
            self._watch = new
            self.wake()

    def wake(self) -> None:
        self._wake.set()

    # -- the store poller ------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="poll", exit_on_error=False)
    def poll_store(self) -> None:
        worker = get_current_worker()
        store = self.store
        last_version = None
        last_reap = 0.0
        sent_watch: tuple[str, ...] | None = None
        failures = 0
        while not worker.is_cancelled:
            woken = self._wake.is_set()
            self._wake.clear()
            try:
                reaped: list[str] = []
                now = time.monotonic()
                if now - last_reap >= 1.0:
                    reaped = store.reap()
                    last_reap = now
                version = store.data_version()
                watch = self._watch
                changed = version != last_version or bool(reaped)
                if changed:
                    records = store.runs(reap=False)
                    last = {r.run_id: store.last_metrics(r.run_id) for r in records if r.status == "running"}
                    if worker.is_cancelled:
                        break
                    self.post_message(RunsUpdated(records, last))
                    last_version = version
                if changed or woken or watch != sent_watch:
                    self.post_message(self._curves(store, watch))
                    sent_watch = watch
                failures = 0
            except Exception as e:  # noqa: BLE001 - reported, then retried with back-off
                failures += 1
                if failures in (1, 10) or failures % 100 == 0:
                    self.post_message(Problem(f"reading the run store failed: {e}"))
                self._wake.wait(min(5.0, self.poll_interval * failures))
                continue
            self._wake.wait(self.poll_interval)

    def _curves(self, store: RunStore, watch: tuple[str, ...]) -> CurvesData:
        from sparse_tui.plotting import downsample
        from sparse_tui.tui import render

        series: dict[str, dict] = {}
        theory: dict[str, tuple[list[float], list[float]]] = {}
        plateau: dict[str, float | None] = {}
        labels: dict[str, str] = {}
        for rid in watch:
            try:
                rec = store.get(rid)
            except Exception:  # noqa: BLE001 - deleted meanwhile
                continue
            raw = store.metrics(rid)
            series[rid] = {
                k: tuple(map(list, downsample(v[0], v[1], CURVE_POINTS))) for k, v in raw.items() if "/H" not in k
            }
            plateau[rid] = rec.plateau_step
            labels[rid] = render.run_name(rec)
            th = self._theory(rec)
            if th is not None:
                theory[rid] = th
        return CurvesData(list(watch), series, theory, plateau, labels)

    def _theory(self, rec: RunRecord) -> tuple[list[float], list[float]] | None:
        """The reduced dynamics' test loss for linreg runs (toy, ode, transformer), cached per run."""
        if rec.config.get("task", {}).get("kind") != "linreg":
            return None
        if rec.run_id in self._theory_cache:
            return self._theory_cache[rec.run_id]
        try:
            from sparse_tui.models.ode import ode_curve
            from sparse_tui.presets import config_from_json

            cfg = config_from_json(rec.config)
            total = int(rec.total_steps or cfg.train.steps)
            steps = [round(i * total / 300) for i in range(301)]
            vals = [float(v) for v in ode_curve(cfg, steps)]
            out = ([float(s) for s in steps], vals)
        except Exception:  # noqa: BLE001 - no theory curve for this run; the plot says nothing then
            out = None
        self._theory_cache[rec.run_id] = out
        return out

    @guarded
    def on_runs_updated(self, msg: RunsUpdated) -> None:
        self.records, self.last = msg.records, msg.last
        self.updates += 1
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

    @guarded
    def on_curves_data(self, msg: CurvesData) -> None:
        self.curve_updates += 1
        self.query_one(CurvesPanel).update_data(msg)

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

    # -- launching -----------------------------------------------------------------------------------------------
    @work(thread=True, group="launch", exit_on_error=False)
    def launch(self, loaded: Any) -> None:
        from sparse_tui import runner
        from sparse_tui.presets import expand

        # the same launch path as `sparse-tui run --detach`: detached processes, planned by the sweep scheduler
        self._check_executor()
        batch_id, ids, pid = runner.start_detached(self.store, expand(loaded), workers=self.n_workers or None,
                                                   executor=self.executor, ray_address=self.ray_address)
        self.post_message(
            Done(f"launched {loaded.name}: batch {batch_id}, {len(ids)} run(s), pid {pid} "
                 f"(log {runner.log_path(self.store, batch_id)})", switch_to="runs", run_ids=list(ids))
        )

    def _check_executor(self) -> None:
        """``--executor ray``: refuse to launch while Ray is missing or its cluster unreachable (one line)."""
        from sparse_tui.executors import ExecutorError, probe

        problem = probe(self.executor, self.ray_address)
        if problem:
            raise ExecutorError(problem)

    # -- run actions ---------------------------------------------------------------------------------------------
    def cancel_runs(self, ids: list[str]) -> None:
        live = [r.run_id for r in self.records if r.run_id in ids and r.status in ("queued", "running")]
        if not live:
            self.notify("nothing to cancel (only queued or running runs can be)", severity="warning")
            return
        self._cancel(live)

    @work(thread=True, group="actions", exit_on_error=False)
    def _cancel(self, ids: list[str]) -> None:
        running = self.store.request_cancel(ids)
        self.post_message(Done(f"cancel requested for {len(ids)} run(s)"
                               + (f"; {len(running)} running will stop within ~1 s" if running else "")))

    @on(RunsPanel.ResumeRequested)
    def _resume_requested(self, msg: RunsPanel.ResumeRequested) -> None:
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
        self._resume(todo)

    @work(thread=True, group="launch", exit_on_error=False)
    def _resume(self, ids: list[str]) -> None:
        from sparse_tui import runner
        from sparse_tui.store import StoreError

        try:
            self._check_executor()
            started = runner.resume_runs_detached(self.store, ids, workers=self.n_workers or None,
                                                  executor=self.executor, ray_address=self.ray_address)
        except StoreError as e:  # the run changed since the table was drawn (it finished, or another resume won)
            self.post_message(Problem(f"cannot resume: {e}", severity="warning"))
            return
        n = sum(len(r) for _, r, _ in started)
        where = "; ".join(f"batch {b} pid {pid}" for b, _, pid in started)
        self.post_message(Done(f"resuming {n} run(s) from their last checkpoint: {where}", switch_to="runs",
                               run_ids=[rid for _, r, _ in started for rid in r]))

    @on(RunsPanel.CompareRequested)
    def _compare_requested(self, msg: RunsPanel.CompareRequested) -> None:
        """``x`` in Runs (or the palette): the config keys two runs differ in; Enter there overlays their curves,
        each labelled by its run name."""
        from sparse_tui.tui import render
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

        self.push_screen(CompareScreen((render.run_name(a), render.run_name(b)), (a.run_id, b.run_id),
                                       render.config_diff(a, b)), done)

    def delete_runs(self, ids: list[str]) -> None:
        if not ids:
            return
        live = [r.run_id for r in self.records if r.run_id in ids and r.status in ("queued", "running")]
        if live:
            self.notify(f"{len(live)} run(s) still queued or running: cancel them first (c)", severity="warning")
            return
        from sparse_tui.tui.screens.confirm import ConfirmScreen

        def done(yes: bool | None) -> None:
            if yes:
                self._delete(ids)

        self.push_screen(ConfirmScreen(f"Delete {len(ids)} run(s) with their metrics and attention maps?"), done)

    @work(thread=True, group="actions", exit_on_error=False)
    def _delete(self, ids: list[str]) -> None:
        n = self.store.delete(ids)
        self.post_message(Done(f"deleted {n} run(s)"))

    def export_runs(self, ids: list[str]) -> None:
        if not ids:
            self.notify("no runs to export", severity="warning")
            return
        from sparse_tui.tui.screens.export import ExportScreen

        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(self.clock()))

        def done(req) -> None:
            if req is not None and req.path:
                self._export(ids, req)

        self.push_screen(ExportScreen(len(ids), stamp, folder=self._export_folder), done)

    @work(thread=True, group="actions", exit_on_error=False)
    def _export(self, ids: list[str], req: Any) -> None:
        import os

        from sparse_tui.export import export

        store = self.store
        recs = sorted((store.get(r) for r in ids), key=lambda r: (r.created_at, r.run_id))
        out = Path(req.path).expanduser()
        out.parent.mkdir(parents=True, exist_ok=True)
        self._export_folder = str(out.parent)
        tmp = out.with_name(out.name + ".part")
        try:
            if req.fmt == "parquet":
                with open(tmp, "wb") as fh:
                    n = export(store, recs, "parquet", fh, metrics=req.metrics)
            else:
                with open(tmp, "w", newline="") as fh:
                    n = export(store, recs, req.fmt, fh, metrics=req.metrics)
            os.replace(tmp, out)
        except RuntimeError as e:
            tmp.unlink(missing_ok=True)
            self.post_message(Problem(str(e)))
            return
        self.post_message(Done(f"exported {n} row(s) to {out}"))

    # -- attention -----------------------------------------------------------------------------------------------
    def load_attention(self, run_id: str, step: int | None, layer: str | None, head: int, example: int,
                       width: int) -> None:
        self._attention(run_id, step, layer, head, example, width)

    @work(thread=True, exclusive=True, group="attention", exit_on_error=False)
    def _attention(self, run_id: str, step: int | None, layer: str | None, head: int, example: int,
                   width: int) -> None:
        from sparse_tui.tui.render import render_attention

        store = self.store
        steps = store.attention_steps(run_id)
        if not steps:
            self.post_message(AttentionData(run_id, [], -1, [], 1, 1, "", f"run {run_id}: no attention snapshots yet"))
            return
        if step not in steps:
            step = steps[-1]
        maps, meta = store.attention(run_id, step)
        layers = sorted(maps, key=lambda k: int(k[1:]) if k[1:].isdigit() else 0)
        if layer not in maps:
            layer = layers[0]
        H, E = maps[layer].shape[:2]
        task = store.get(run_id).config.get("task", {}).get("kind")
        body, info = render_attention(maps, meta, layer, head, example, width, task)
        if get_current_worker().is_cancelled:
            return
        self.post_message(AttentionData(run_id, steps, step, layers, H, E, body, info))

    @guarded
    def on_attention_data(self, msg: AttentionData) -> None:
        ap = self.query_one(AttentionPanel)
        if not msg.steps:
            ap.show_message(msg.info)
        else:
            ap.update_data(msg)

    # -- fitting -------------------------------------------------------------------------------------------------
    def _fit_records(self, query: str) -> list[RunRecord]:
        from sparse_tui.tui.render import matches, run_row

        if not query and self.marked:
            ids = set(self.marked)
            return [r for r in self.records if r.run_id in ids]
        if not query:  # the runs of the current run's preset
            cur = next((r for r in self.records if r.run_id == self.current), None)
            if cur is None:
                return list(self.records)
            return [r for r in self.records if r.preset == cur.preset]
        return [r for r in self.records if matches(run_row(r, None, 0.0), query)]

    def fit_selection_key(self) -> tuple:
        """What the Fit panel's default runs are (marked runs, else the current run's preset): guessed variables
        are guessed again when this changes (a fit of the previous preset's variables fails: 'unknown variable')."""
        if self.marked:
            return ("marked", tuple(self.marked))
        cur = next((r for r in self.records if r.run_id == self.current), None)
        return ("preset", cur.preset if cur is not None else None)

    def guess_fit_variables(self, query: str) -> list[str]:
        from sparse_tui.fitting import short_name
        from sparse_tui.tui.render import swept_keys

        recs = self._fit_records(query)
        keys = [k for k in swept_keys(recs)
                if all(isinstance(r.params.get(k), (int, float)) and not isinstance(r.params.get(k), bool)
                       for r in recs if k in r.params)]
        shorts = [short_name(k) for k in keys]
        return [s if shorts.count(s) == 1 else k for s, k in zip(shorts, keys)]

    def fit_request(self, query: str, variables: list[str], options: str = "") -> Any:
        """The ``sparse-tui fit`` arguments for the panel's fields: the marked runs (their ids), else the runs of
        the current run's preset (--preset), else the runs matching the filter words (their ids); ``options`` adds
        --tie / --bootstrap / --seed / --target / --paper / --where / --preset / --batch. None when nothing matches.
        Raises ``FitError`` for a bad options line."""
        from sparse_tui.tui.render import FitRequest, parse_fit_options

        opts = parse_fit_options(options)
        req = FitRequest(list(variables), **opts)
        if not query and self.marked:
            req.run_ids = list(self.marked)
        elif not query:
            cur = next((r for r in self.records if r.run_id == self.current), None)
            if cur is not None and "preset" not in opts and cur.preset:
                req.preset = cur.preset
            elif cur is not None and not cur.preset:
                req.run_ids = [r.run_id for r in self._fit_records(query)]
        else:
            req.run_ids = [r.run_id for r in self._fit_records(query)]
            if not req.run_ids:
                return None
        return req

    def fit_runs(self, query: str, variables: list[str], options: str = "") -> None:
        from sparse_tui.fitreport import FitError

        try:
            req = self.fit_request(query, variables, options)
        except FitError as e:
            self.query_one(FitPanel).show_error(str(e))
            return
        if req is None:
            self.query_one(FitPanel).show_error("no runs match")
            return
        self._fit(req)

    @work(thread=True, exclusive=True, group="fit", exit_on_error=False)
    def _fit(self, req: Any) -> None:
        """``fitreport.fit_store`` with the request's arguments: the code path (and numbers) of ``sparse-tui fit``."""
        from sparse_tui.fitreport import FitError
        from sparse_tui.tui import render

        try:
            rep = render.run_fit(self.store, req)
        except (FitError, ValueError) as e:
            self.post_message(FitDone(None, {}, f"fit failed: {str(e).splitlines()[0] if str(e) else e!r}",
                                      request=req))
            return
        info = f"{rep.result.formula()}  R²={rep.result.r2:.3f}"
        self.post_message(FitDone(render.fit_table(rep, req), render.fit_plot(rep), info, report=rep, request=req))

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
