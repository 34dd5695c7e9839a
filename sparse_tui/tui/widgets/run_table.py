"""The Runs panel: the run table from the store (sortable, filterable, grouped over seeds, live), marking runs and
acting on them (each action posts its request).

The panel owns its table, ``render/table.RunTable`` (``self.model``: pure, tested alone), and keeps the user's
choices as reactive variables (sort, filter, marks, hidden runs, grouping, expanded groups, picked columns; Textual's
``var`` + ``watch_``, as its examples/code_browser.py): each change is written into the table and redrawn by its
watcher. What the rest of the console needs of it (the marked runs the filter shows, the runs it shows, the
charts' grouping, the runs hidden in the charts) goes out as one ``SelectionChanged`` when it changes."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import var
from textual.suggester import Suggester
from textual.widgets import DataTable, Input, Static

from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.messages import (
    ArchiveRequested,
    CancelRequested,
    CompareRequested,
    DeleteRequested,
    ExportRequested,
    NoteRequested,
    PanelRequested,
    ResumeRequested,
    RunHighlighted,
    SelectionChanged,
)
from sparse_tui.tui.render.filters import suggest
from sparse_tui.tui.render.table import RunTable
from sparse_tui.tui.screens.columns import ColumnsScreen
from sparse_tui.tui.widgets.ordered_input import OrderedInput
from sparse_tui.tui.widgets.panel import ConsolePanel, StoreView


class FilterSuggester(Suggester):
    """Completes the filter's last word: a key, or a value the key takes among the runs (→ takes it)."""

    def __init__(self, table: RunTable) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.table = table

    async def get_suggestion(self, value: str) -> str | None:
        return suggest(value, self.table.filter_keys())


def _cell(value):
    """A cell as the DataTable gets it: text as ``Text``, never parsed as markup (a run named ``[bold]x`` showed as a
    bold x; parsing every cell's markup was half of a 2,000-run table's layout time)."""
    return Text(value, no_wrap=True, end="") if isinstance(value, str) else value


# the user's choices: each a reactive variable of the panel, written into its table (``RunTable``) by a watcher
STATE = ("sort", "descending", "query_text", "marked", "hidden", "group_keys", "expanded", "hp_choice")


def _watcher(name: str):
    """The watcher of the user's choice ``name``: written into the table, then redrawn."""
    return lambda self, value: self._state_changed(name, value)


class RunsPanel(ConsolePanel, Guarded, Vertical):
    BINDINGS = [
        Binding("space", "toggle_mark", "Mark"),
        Binding("a", "mark_all", "Mark all"),
        Binding("h", "hide", "Hide in charts", show=False),
        Binding("enter", "enter", "Curves / expand", show=False),
        Binding("v", "view", "Curves"),
        Binding("g", "group", "Group"),
        Binding("t", "attention", "Attention"),
        Binding("s", "sort", "Sort"),
        Binding("r", "reverse", "Reverse", show=False),
        # priority: handled as the key arrives, so the keys typed after it in one burst go into the filter (a
        # plain binding runs once the key has bubbled up, after the next keys were handed to the table)
        Binding("slash", "filter", "Filter", priority=True),
        Binding("o", "columns", "Columns", show=False),
        Binding("n", "note('note')", "Note", show=False),
        Binding("T", "note('tags')", "Tags", show=False),
        Binding("c", "cancel", "Cancel run"),
        Binding("u", "resume", "Resume"),
        Binding("x", "compare", "Compare", show=False),
        Binding("d,delete", "delete", "Delete"),
        Binding("A", "archive", "Archive", show=False),
        Binding("e", "export", "Export"),
        Binding("f", "fit", "Fit", show=False),
        Binding("escape", "leave_input", "Leave filter", show=False),
    ]
    LIVE = True  # the marks, the cursor and the curve grid's runs follow the table, shown or not

    DEFAULT_CSS = """
    RunsPanel #run-filter { height: 1; }
    RunsPanel DataTable { height: 1fr; }
    RunsPanel #runs-summary { height: 1; color: $text-muted; }
    RunsPanel #run-detail { height: 2; color: $text-muted; }
    """

    sort: var[str] = var("age", init=False)  # newest first
    descending: var[bool] = var(True, init=False)
    query_text: var[str] = var("", init=False)  # the filter
    marked: var[list[str]] = var(list, init=False)
    hidden: var[set[str]] = var(set, init=False)  # runs hidden in the charts (h): the table shows them, Curves not
    group_keys: var[list[str]] = var(list, init=False)  # group by these parameters ([]: one row per run)
    expanded: var[set[str]] = var(set, init=False)  # group keys shown with their runs
    hp_choice: var[list[str] | None] = var(None, init=False)  # columns picked with o (None: as many as fit)

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.model = RunTable()  # the table: its state is written by the variables' watchers
        self.shown: list[str] = []  # row keys in table order: run ids, and group keys (GROUP_PREFIX + label)
        self._cols: list[tuple[str, str, int]] = []
        self._sent: SelectionChanged | None = None  # the selection last said
        self._quiet = False  # the table itself changed a choice (pruned marks, a filter dropped a key): no redraw
        self._reveal: list[str] = []  # launched runs to show and put the cursor on once they are in the table
        self._drawn: dict[str, list] = {}  # row key -> the cells last written into the DataTable

    def compose(self) -> ComposeResult:
        yield OrderedInput(placeholder="/ filter: words acc>0.9 lr<1e-3 d=16,32 preset~fig status:failed is:archived",
                           id="run-filter", compact=True, suggester=FilterSuggester(self.model))
        yield DataTable(id="run-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="run-detail")
        yield Static("", id="runs-summary")

    def on_mount(self) -> None:
        self.border_title = "Runs"
        self._set_columns()

    def on_resize(self) -> None:
        self.render_rows()

    # -- the user's choices: written into the table, then redrawn --------------------------------------------------
    def _state_changed(self, name: str, value) -> None:
        setattr(self.model, name, value if not isinstance(value, (list, set)) else type(value)(value))
        if not self._quiet and self.is_mounted:
            if name in ("sort", "descending"):
                self._cols = []  # the header arrows follow the sort
            if name in ("marked", "group_keys", "expanded"):
                self.shown = []
            self.render_rows()

    # one watcher per choice, in the order of STATE
    watch_sort, watch_descending, watch_query_text, watch_marked, watch_hidden, watch_group_keys, watch_expanded, \
        watch_hp_choice = map(_watcher, STATE)

    def _pull(self) -> None:
        """The choices the table changed itself (marks of deleted runs dropped, a grouping key the filter took
        away, a sort or grouping stepped by a key), back into the variables, without a second redraw."""
        self._quiet = True
        try:
            for name in STATE:
                value = getattr(self.model, name)
                if getattr(self, name) != value:
                    setattr(self, name, type(value)(value) if isinstance(value, (list, set)) else value)
        finally:
            self._quiet = False

    # -- what the table knows, read through (tests and the column picker read them) --------------------------------
    @property
    def rows(self):
        return self.model.rows

    @property
    def groups(self):
        return self.model.groups

    @property
    def visible_ids(self) -> list[str]:
        return self.model.visible_ids

    @property
    def _records(self):
        return self.model._records

    @property
    def table(self) -> DataTable:
        return self.query_one(DataTable)

    def _width(self) -> int:
        """The panel's width; hidden (another panel shown), the width it will have: the screen's less the panel's
        border, so that showing it does not lay out and rebuild every row again (0.5 s at 2,000 runs)."""
        return self.size.width or max(1, (self.app.size.width or 80) - self.styles.gutter.width)

    def _set_columns(self) -> None:
        cols = self.model.columns(self._width())
        if cols == self._cols:
            return
        t = self.table
        t.clear(columns=True)
        for key, title, w in cols:
            arrow = ""
            if key == self.sort or (key == "run" and self.sort == "age"):
                arrow = "" if key == "run" else (" ↓" if self.descending else " ↑")
            t.add_column(title + arrow if key != "mark" else " ", key=key, width=w)
        self._cols = cols
        self.shown = []

    def store_changed(self, view: StoreView) -> None:
        self.model.set_store(view.records, view.last, view.now, view.forecasts)
        self.render_rows()

    def focus_panel(self) -> None:
        self.screen.set_focus(self.table)

    def render_rows(self) -> None:
        if not self.is_mounted or not self.query("#run-table"):  # (not yet composed, or torn down with the app)
            return
        cur = self.current_key()  # kept across a rebuild of the columns (a resize) or of the rows
        items = self.model.items()
        self._pull()
        self._set_columns()
        ids = [k for k, _, _ in items]
        t = self.table
        drawn = self._drawn
        if ids == self.shown:
            for key, row, kind in items:
                cells = self.model.cells(row, kind, self._cols)
                old = drawn.get(key)
                if cells != old:
                    for i, ((col, _, _), cell) in enumerate(zip(self._cols, cells)):
                        if old is None or cell != old[i]:
                            t.update_cell(key, col, _cell(cell))
                    drawn[key] = cells
        else:
            t.clear()
            drawn.clear()
            for key, row, kind in items:
                drawn[key] = cells = self.model.cells(row, kind, self._cols)
                t.add_row(*map(_cell, cells), key=key)
            self.shown = ids
            if cur in ids:
                t.move_cursor(row=ids.index(cur), animate=False)
        self._detail()
        if self._reveal:
            target = next((i for i, rid in enumerate(ids) if rid in self._reveal), None)
            if target is not None:
                self._reveal = []
                t.move_cursor(row=target, animate=False)
                self.post_message(RunHighlighted(self.current_run()))
        self._marks_changed()

    def _update_mark(self, key: str) -> None:
        cell = self.model.mark_cell(key)
        self.table.update_cell(key, "mark", _cell(cell))
        if key in self._drawn:
            self._drawn[key][0] = cell  # (the mark is the first column)

    def _marks_changed(self) -> None:
        """Tell the console what it needs of the table when it changed, in one ``SelectionChanged``: the marked
        runs that count (those the filter shows: marks on filtered-out runs are kept, not used), the runs shown,
        the charts' grouping, the runs hidden in the charts; and the summary line."""
        sel = SelectionChanged(self.model.visible_marks(), list(self.visible_ids), self.model.chart_groups(),
                               sorted(self.hidden))
        if sel != self._sent:
            self._sent = sel
            self.post_message(sel)
        self.query_one("#runs-summary", Static).update(self.model.summary(self._cols))

    def _detail(self) -> None:
        if details := self.query("#run-detail"):  # (not when torn down with the app)
            details.first(Static).update(self.model.detail(self.current_key()))

    def current_key(self) -> str | None:
        """The row key under the cursor: a run id or a group key."""
        tables = self.query(DataTable)
        if not tables:  # torn down with the app (a late resize or highlight)
            return None
        t = tables.first()
        if not self.shown or t.cursor_row is None or t.cursor_row >= len(self.shown):
            return None
        return self.shown[t.cursor_row]

    def current_run(self) -> str | None:
        """The run under the cursor (on a group row: the group's first run)."""
        return self.model.run_of(self.current_key())

    def chosen(self) -> list[str]:
        """The marked runs the filter shows, or the run (or the group's runs) under the cursor."""
        return self.model.chosen_for(self.current_key())

    def reveal(self, run_ids: list[str]) -> None:
        """Show runs that were just launched: a filter that hides them is cleared, and the cursor moves to the
        first of them as soon as the store poller brings them (Enter then shows their curves, not an old run's)."""
        self._reveal = list(run_ids)
        self.group_keys = []
        if self.model.hides(run_ids):
            self.query_one("#run-filter", Input).value = ""  # Input.Changed re-renders without the filter
            self.query_text = ""
        self.render_rows()

    # -- events --------------------------------------------------------------------------------------------------
    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.post_message(RunHighlighted(self.current_run()))
        self._detail()

    @on(DataTable.RowSelected)
    def _selected(self, event: DataTable.RowSelected) -> None:
        self.action_enter()

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        """A click on a column header sorts by it; a second click reverses."""
        if (key := str(event.column_key.value)) != "mark":
            self.model.sort_by(key)
            self._pull_and_resort()

    @on(Input.Changed, "#run-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value.strip()  # (its watcher redraws)

    @on(Input.Submitted, "#run-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.screen.set_focus(self.table)

    # -- actions -------------------------------------------------------------------------------------------------
    def _toggle(self, toggle) -> str | None:
        """Mark or hide (``toggle``: the table's) the row under the cursor: its mark cells updated, no redraw of the
        table; the row's key."""
        key = self.current_key()
        if key is not None:
            for k in toggle(key):
                if k in self.shown:
                    self._update_mark(k)
            self._pull()
        return key

    def action_toggle_mark(self) -> None:
        if self._toggle(self.model.toggle_mark) is None:
            return
        t = self.table
        if t.cursor_row is not None and t.cursor_row + 1 < len(self.shown):
            t.move_cursor(row=t.cursor_row + 1, animate=False)
        self._marks_changed()

    def action_hide(self) -> None:
        """Hide the run (or the group's runs) under the cursor in the charts, or show them again."""
        key = self._toggle(self.model.toggle_hidden)
        if key is None:
            return
        ids = set(self.model.ids_of(key))
        self.say(f"{'hidden in' if ids <= self.hidden else 'shown again in'} the charts: "
                 f"{self.groups[key].label if key in self.groups else key}")
        self._marks_changed()

    def action_mark_all(self) -> None:
        vis = self.model.visible_marks()
        self.set_marked([] if vis else self.visible_ids)
        self.say(f"unmarked {len(vis)} run(s)" if vis else f"marked the {len(self.visible_ids)} shown run(s)")

    def say(self, text: str) -> None:
        """What a key changed, said (a key that changes state says so)."""
        self.app.notify(text, timeout=3, markup=False)

    def _pull_and_resort(self) -> None:
        """The table stepped the sort (or the grouping) itself: into the variables, one redraw."""
        self._pull()
        self._cols = []  # the header arrows follow the sort
        self.shown = []
        self.render_rows()

    def action_sort(self) -> None:
        self.model.next_sort(self._cols)
        self._pull_and_resort()

    def action_reverse(self) -> None:
        self.descending = not self.descending  # (its watcher redraws)

    def action_group(self) -> None:
        if not self.model.next_grouping():
            self.app.notify("nothing to group: the shown runs differ in no parameter but the seed", markup=False)
        self._pull_and_resort()  # (the table says the new grouping: SelectionChanged)

    def action_enter(self) -> None:
        key = self.current_key()
        if key in self.groups:
            self.expanded = self.expanded ^ {key}  # (its watcher redraws)
            return
        self.action_view()

    def action_columns(self) -> None:
        """Pick the hyperparameter columns (at 80 columns not all fit)."""
        hp_keys = self.model._hp_keys
        if not hp_keys:
            self.app.notify("no hyperparameter varies among the shown runs", markup=False)
            return

        width = self.size.width or self.app.size.width

        def done(keys: list[str] | None) -> None:
            if keys is not None:
                self.hp_choice = keys  # (its watcher redraws)
                self.say(self.model.column_layout(width, keys)[1])

        shown = [k[3:] for k, _, _ in self._cols if k[:3] == "hp:"]
        self.app.push_screen(ColumnsScreen(hp_keys, shown, lambda keys: self.model.column_layout(width, keys)[1]),
                             done)

    def action_filter(self) -> None:
        field = self.query_one("#run-filter", OrderedInput)
        if self.app.focused is field:  # a / typed in the filter itself (tags may hold one)
            field.insert_text_at_cursor("/")
            return
        if self.screen is self.app.screen:  # (not under a dialog)
            field.focus_now()

    def action_view(self) -> None:
        if self.chosen():
            self.post_message(PanelRequested("curves"))

    def action_attention(self) -> None:
        if self.current_run():
            self.post_message(PanelRequested("attention"))

    def action_fit(self) -> None:
        self.post_message(PanelRequested("fit"))

    def action_cancel(self) -> None:
        self.post_message(CancelRequested(self.chosen()))

    def action_resume(self) -> None:
        self.post_message(ResumeRequested(self.chosen()))

    def action_note(self, what: str) -> None:
        """n / T: the note or the tags (``what``) of the run under the cursor (not of a group row)."""
        rid = self.current_run() if self.current_key() not in self.groups else None
        if rid:
            self.post_message(NoteRequested(rid, what))

    def action_archive(self) -> None:
        archived = "is:archived" in self.query_text.split()
        self.post_message(ArchiveRequested(self.chosen(), not archived))

    def action_compare(self) -> None:
        pair = self.model.compare_pair(self.current_key(), self.shown)
        self.post_message(CompareRequested(pair, {k: self.groups[k].run_ids for k in pair if k in self.groups}))

    def set_marked(self, ids: list[str]) -> None:
        self.marked = list(ids)  # (its watcher redraws)

    def action_delete(self) -> None:
        self.post_message(DeleteRequested(self.chosen()))

    def action_export(self) -> None:
        self.post_message(ExportRequested(self.model.visible_marks() or list(self.visible_ids)))
