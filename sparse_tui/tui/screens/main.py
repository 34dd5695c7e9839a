"""The main screen: the panels in tabs, switching between them, and the UI state they share.

Everything here is generated from the panel registry (``tui/panels.PANELS``): the tabs, the keys 1..N, and the calls
of each panel's hooks (``widgets/panel.ConsolePanel``): ``store_changed`` with each read of the store poller,
``panel_shown`` on a switch, ``focus_panel``, ``selection_changed``, ``series_changed``. It keeps the UI state: the
store's newest read (``records``, ``last``), the run under the cursor (``current``) and the Runs table's selection
(``selection``: the marks the filter shows, the runs it shows, the grouping, the runs hidden in the charts), which
the Runs panel owns and says in one ``SelectionChanged``. Its mixin ``PanelRequests`` answers the panels."""

from __future__ import annotations

from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.lazy import Lazy
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Header, Input, TabbedContent, TabPane
from textual.worker import Worker

from sparse_tui.store import RunRecord
from sparse_tui.tui import panels
from sparse_tui.tui.guard import Guarded, guarded
from sparse_tui.tui.messages import (
    CurvesData,
    PanelRequested,
    RunHighlighted,
    RunsUpdated,
    SelectionChanged,
    SeriesWanted,
)
from sparse_tui.tui.requests import PanelRequests
from sparse_tui.tui.widgets.keys_footer import KeysFooter
from sparse_tui.tui.widgets.panel import StoreView


class MainScreen(PanelRequests, Guarded, Screen):
    """The screen of the panels; guarded like them (a widget's render error surfaces in its screen's loop)."""

    current: reactive[str | None] = reactive(None, init=False)  # the run under the Runs table's cursor

    def __init__(self) -> None:
        super().__init__(id="_default")
        for b in panels.panel_bindings():
            self._bindings.bind(b.key, b.action, b.description, show=False)
        self.records: list[RunRecord] = []
        self._read_at = float("-inf")  # the app clock at the last store read the panels were given
        self.last: dict[str, dict] = {}
        self.forecasts: dict[str, dict | None] = {}
        self.selection = SelectionChanged([], [], [], [])  # the Runs table's, as it last said it
        self.figures_pending: set[Path] = set()  # figure files asked for (each request gets a name of its own)
        self.export_dir: Path | None = None  # the export dialog's folder (the last one used)
        self._found: dict[str, Widget | None] = {}  # panel id -> its mounted widget (_panel)

    def compose(self) -> ComposeResult:
        yield Header(icon="◆")
        with TabbedContent(initial=f"tab-{panels.PANELS[0].id}", id="panels"):
            for i, p in enumerate(panels.PANELS, 1):
                with TabPane(f"{i} {p.title}", id=f"tab-{p.id}"):
                    panel = p.cls.create(self.app, p.id)
                    yield Lazy(panel) if p.lazy else panel
        yield KeysFooter()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.app.on_worker_state_changed(event)  # a failed request's worker is reported like the app's own

    # -- the UI state the panels see -------------------------------------------------------------------------------
    @property
    def marked(self) -> list[str]:
        """The marked runs that count: those the Runs table's filter shows (the Runs panel owns the marks)."""
        return list(self.selection.marked)

    @property
    def hidden(self) -> set[str]:
        """The runs hidden in the charts (h in Runs); ``view_ids`` leaves them out."""
        return set(self.selection.hidden)

    def _panel(self, pid: str) -> Widget | None:
        """The mounted panel ``pid``, found once: a DOM query walks the whole tree (the preset form's hundreds of
        rows), and the poller's every read asks for the panels several times."""
        w = self._found.get(pid)
        if w is None or not w.is_attached:
            found = self.query(f"#{pid}")
            w = self._found[pid] = found.first() if found else None
        return w

    def view(self) -> StoreView:
        sel = self.selection
        return StoreView(self.records, self.last, self.current, list(sel.marked), self.app.clock(), list(sel.shown),
                         list(sel.groups), frozenset(sel.hidden), self.forecasts)

    def _panels(self, which: str = "shown"):
        """The mounted panels: ``all``, the ``live`` ones, or (``shown``) the live ones and the one shown."""
        active = self.query_one("#panels", TabbedContent).active if which == "shown" else None
        for p in panels.PANELS:
            if (which == "all" or p.cls.LIVE or (which == "shown" and active == f"tab-{p.id}")) \
                    and (w := self._panel(p.id)) is not None:
                yield w

    @guarded
    def on_runs_updated(self, msg: RunsUpdated) -> None:
        self.records, self.last, self.forecasts = msg.records, msg.last, msg.forecasts
        self._read_at = self.app.clock()
        view = self.view()
        for panel in self._panels():
            panel.store_changed(view)
        self._update_watch()  # the grid follows the table's runs
        self.app.set_header()
        if self.app.held_keys is not None:
            self.call_after_refresh(self._ready)

    def _ready(self) -> None:
        """The first run table is drawn: once the panels are mounted (Lazy ones after a frame), the app takes keys."""
        if self.panels_mounted():
            self.app.ready()
        else:
            self.call_after_refresh(self._ready)

    @guarded
    def tick(self) -> None:
        """Every few seconds: the live panels again with the time now (run ages), unless a store read gave them
        that time within the last 4 s (every row is made again: 0.6 s of CPU at 2,000 runs)."""
        if self.records and self.app.clock() - self._read_at >= 4.0:
            view = self.view()
            for panel in self._panels("live"):
                panel.store_changed(view)

    @guarded
    def on_curves_data(self, msg: CurvesData) -> None:
        for panel in self._panels("all"):
            panel.series_changed(msg)

    @on(RunHighlighted)
    def _run_highlighted(self, msg: RunHighlighted) -> None:
        self.current = msg.run_id

    def view_ids(self) -> list[str]:
        """The runs whose metric series the panels draw (each panel's ``selection_changed`` says which)."""
        view = self.view()
        wanted = dict.fromkeys(r for panel in self._panels("all") for r in panel.selection_changed(view))
        return [r for r in wanted if r not in self.hidden]  # never those hidden in the charts (h in Runs)

    @on(SeriesWanted)
    @guarded
    def _update_watch(self) -> None:
        if self.app.poller is not None:
            self.app.poller.watch(self.view_ids())

    watch_current = _update_watch

    @on(SelectionChanged)
    def _selection_changed(self, msg: SelectionChanged) -> None:
        self.selection = msg
        self._update_watch()

    def export_folder(self) -> str:
        """Where the export dialog proposes to write: the folder used last, else RUNS_DIR/exports (never the
        current folder: a git checkout collected untracked CSVs), in full."""
        return str((self.export_dir or self.app.runs_dir / "exports").resolve())

    # -- switching panels ------------------------------------------------------------------------------------------
    @guarded
    def action_panel(self, pid: str) -> None:
        self.show_panel(pid)

    @on(PanelRequested)
    @guarded
    def _panel_requested(self, msg: PanelRequested) -> None:
        self.show_panel(msg.panel)

    def panels_mounted(self) -> bool:
        """Every panel is in the DOM (not while composing, before a Lazy panel is mounted, or while tearing down)."""
        return self.is_attached and all(self.query(f"#{p.id}") for p in panels.PANELS)

    def show_panel(self, pid: str) -> None:
        """Switch to the panel and give it the focus at once: a key typed in the same burst as the switch (`2 /toy`
        right after start-up) goes to the new panel (with a deferred focus, `/` went to the preset list and a later
        `d` to the run table's delete dialog)."""
        self.query_one("#panels", TabbedContent).active = f"tab-{pid}"
        self._focus_panel(pid)

    def _focus_panel(self, pid: str) -> None:
        if self.query_one("#panels", TabbedContent).active != f"tab-{pid}":
            return  # a later switch won
        found = self.query(f"#{pid}")
        if not found:  # a Lazy panel not mounted yet: it is, after the next frame
            self.call_after_refresh(self._focus_panel, pid)
            return
        panel = found.first()
        panel.query(".panel-error").remove()  # a problem shown earlier was seen (it stays in the log)
        focused = self.focused
        if not (isinstance(focused, Input) and panel in focused.ancestors):
            panel.focus_panel()  # (a key typed right after the switch put the focus in a field: 2 then /: it stays)
        panel.panel_shown(self.view())

    def panel_action(self, pid: str, action: str) -> None:
        """A palette command: show the panel, then run its action."""
        self.show_panel(pid)
        self.call_after_refresh(lambda: self.app.run_action(action, self.query_one(f"#{pid}")))

    @on(TabbedContent.TabActivated)
    @guarded
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        pid = (event.pane.id or "").removeprefix("tab-")
        panel = self.query(f"#{pid}")
        if pid and not (self.focused and panel and panel.first() in [self.focused, *self.focused.ancestors]):
            self.call_later(self._focus_panel, pid)
