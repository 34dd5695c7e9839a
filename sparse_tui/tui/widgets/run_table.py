"""The Runs panel: the run table from the store (sortable, filterable, live), marking runs and acting on them."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Input, Static

from sparse_tui.store import RunRecord
from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.messages import (
    CancelRequested,
    CompareRequested,
    DeleteRequested,
    ExportRequested,
    MarkedChanged,
    PanelRequested,
    ResumeRequested,
    RunHighlighted,
)
from sparse_tui.tui.render.runs import COLUMNS, STATUS, Row, fit_name, matches, run_row, run_tags, sort_rows
from sparse_tui.tui.widgets.ordered_input import OrderedInput

# What 80 columns hold: the full 8-character id, the run's name (as wide as the rest leaves), status, progress and
# results; preset, params, device and age go to the detail line of the run under the cursor.
HEADERS = ("run", "name", "status", "step", "loss", "acc", "plateau")
FIXED = {"run": 8, "status": 9, "step": 9, "loss": 6, "acc": 5, "plateau": 7}
# index of each header in render.COLUMNS (the Row's cells / keys)
ORDER = [COLUMNS.index(h) for h in HEADERS]
SORTS = HEADERS + ("age",)  # s cycles through these; age (newest first) is the default


class RunsPanel(Guarded, Vertical):
    BINDINGS = [
        Binding("space", "toggle_mark", "Mark"),
        Binding("a", "mark_all", "Mark all"),
        Binding("enter", "view", "Curves", show=False),
        Binding("v", "view", "Curves"),
        Binding("t", "attention", "Attention"),
        Binding("s", "sort", "Sort"),
        Binding("r", "reverse", "Reverse", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("c", "cancel", "Cancel run"),
        Binding("u", "resume", "Resume"),
        Binding("x", "compare", "Compare", show=False),
        Binding("d,delete", "delete", "Delete"),
        Binding("e", "export", "Export"),
        Binding("f", "fit", "Fit", show=False),
        Binding("escape", "leave_input", "Leave filter", show=False),
    ]
    HELP = "Runs"

    DEFAULT_CSS = """
    RunsPanel #run-filter { height: 1; }
    RunsPanel DataTable { height: 1fr; }
    RunsPanel #runs-summary { height: 1; color: $text-muted; }
    RunsPanel #run-detail { height: 2; color: $text-muted; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.rows: list[Row] = []
        self.shown: list[str] = []
        self.sort_col = len(HEADERS)  # newest first (the age column of render.COLUMNS, not shown)
        self.reverse = False
        self.query_text = ""
        self.marked: list[str] = []
        self._records: dict[str, RunRecord] = {}
        self._reveal: list[str] = []  # launched runs to show and put the cursor on once they are in the table

    def compose(self) -> ComposeResult:
        yield OrderedInput(placeholder="/ filter: words or status:running", id="run-filter", compact=True)
        table = DataTable(id="run-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static("", id="run-detail")
        yield Static("", id="runs-summary")

    def on_mount(self) -> None:
        t = self.query_one(DataTable)
        t.add_column(" ", key="mark", width=1)
        for h in HEADERS:
            t.add_column(h, key=h, width=FIXED.get(h, self._name_width()))
        self.border_title = "Runs"

    def _name_width(self) -> int:
        """The name column gets what the fixed columns leave (cell padding 1 + 1, border, scroll bar)."""
        width = self.size.width or self.app.size.width or 80  # hidden (another panel shown): the screen's width
        used = 1 + sum(FIXED.values()) + 2 * (len(HEADERS) + 1) + 2  # + the panel border
        return max(8, width - used)

    def on_resize(self) -> None:
        t = self.query_one(DataTable)
        col = t.columns.get("name")
        w = self._name_width()
        if col is not None and col.width != w:
            col.width = w
            col.auto_width = False
            t._require_update_dimensions = True
            self.shown = []  # re-add the rows: names are cut to the new width
            self.render_rows()

    @property
    def table(self) -> DataTable:
        return self.query_one(DataTable)

    # -- data ----------------------------------------------------------------------------------------------------
    def show(self, records: list[RunRecord], last: dict, now: float) -> None:
        self._records = {r.run_id: r for r in records}
        self.rows = [run_row(r, last.get(r.run_id), now) for r in records]
        self.render_rows()

    def render_rows(self) -> None:
        rows = [r for r in self.rows if matches(r, self.query_text)] if self.query_text else list(self.rows)
        rows = sort_rows(rows, COLUMNS.index(SORTS[self.sort_col]), self.reverse)
        ids = [r.run_id for r in rows]
        t = self.table
        cur = self.current_run()
        if ids == self.shown:
            for r in rows:
                for h, cell in zip(HEADERS, self._cells(r)):
                    if t.get_cell(r.run_id, h) != cell:
                        t.update_cell(r.run_id, h, cell)
                t.update_cell(r.run_id, "mark", "●" if r.run_id in self.marked else " ")
        else:
            t.clear()
            for r in rows:
                t.add_row("●" if r.run_id in self.marked else " ", *self._cells(r), key=r.run_id)
            self.shown = ids
            if cur in ids:
                t.move_cursor(row=ids.index(cur), animate=False)
        self._detail()
        if self._reveal:
            target = next((i for i, rid in enumerate(ids) if rid in self._reveal), None)
            if target is not None:
                self._reveal = []
                t.move_cursor(row=target, animate=False)
                self.post_message(RunHighlighted(ids[target]))
        self.marked = [m for m in self.marked if any(r.run_id == m for r in self.rows)]
        self._summary()

    def _summary(self) -> None:
        n_run = sum(1 for r in self.rows if r.keys[STATUS] == "running")
        arrow = "↑" if self.reverse else "↓"
        parts = [f"{len(self.shown)}/{len(self.rows)} runs", f"{n_run} running"]
        if self.marked:
            parts.append(f"{len(self.marked)} marked")
        parts.append(f"sort {SORTS[self.sort_col]} {arrow}")
        if self.query_text:
            parts.append(f"filter '{self.query_text}'")
        self.query_one("#runs-summary", Static).update(" · ".join(parts))

    def _cells(self, row: Row) -> list:
        """The shown cells of a row; the name cut to its column, keeping the swept values at its end."""
        w = self._name_width()
        c = dict(zip(COLUMNS, row.cells))
        return [fit_name(str(c["name"]), w) if h == "name" else c[h] for h in HEADERS]

    def _detail(self) -> None:
        """The run under the cursor in full: id, name, preset, swept params, tags, device, age, reason."""
        from rich.text import Text

        cur = self.current_run()
        row = next((r for r in self.rows if r.run_id == cur), None)
        w = self.query_one("#run-detail", Static)
        if row is None:
            w.update("")
            return
        c = dict(zip(COLUMNS, row.cells))
        rec = self._records.get(cur)
        t = Text(no_wrap=False, overflow="fold")
        t.append(f"{cur} ", style="bold")
        t.append(str(c["name"]))
        if c["params"]:
            t.append(f" · params {c['params']}")
        tags = run_tags(rec) if rec is not None else []
        if tags:
            t.append(" · tags " + ", ".join(tags), style="cyan")
        t.append(f" · preset {c['preset']} · {c['device']} · {c['age']} ago")
        if rec is not None and rec.reason:
            t.append(f" · {rec.reason}", style="yellow")
        w.update(t)

    def current_run(self) -> str | None:
        t = self.table
        if not self.shown or t.cursor_row is None or t.cursor_row >= len(self.shown):
            return None
        return self.shown[t.cursor_row]

    def chosen(self) -> list[str]:
        """The marked runs, or the one under the cursor."""
        if self.marked:
            return list(self.marked)
        cur = self.current_run()
        return [cur] if cur else []

    def reveal(self, run_ids: list[str]) -> None:
        """Show runs that were just launched: a filter that hides them is cleared, and the cursor moves to the
        first of them as soon as the store poller brings them (Enter then shows their curves, not an old run's)."""
        self._reveal = list(run_ids)
        if self.query_text:
            known = {r.run_id: r for r in self.rows}
            if not all(rid in known and matches(known[rid], self.query_text) for rid in run_ids):
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
        self.action_view()

    @on(Input.Changed, "#run-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value.strip()
        self.render_rows()

    @on(Input.Submitted, "#run-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.table.focus()

    # -- actions -------------------------------------------------------------------------------------------------
    def action_toggle_mark(self) -> None:
        cur = self.current_run()
        if cur is None:
            return
        if cur in self.marked:
            self.marked.remove(cur)
        else:
            self.marked.append(cur)
        self.table.update_cell(cur, "mark", "●" if cur in self.marked else " ")
        t = self.table
        if t.cursor_row is not None and t.cursor_row + 1 < len(self.shown):
            t.move_cursor(row=t.cursor_row + 1, animate=False)
        self._summary()
        self.post_message(MarkedChanged(list(self.marked)))

    def action_mark_all(self) -> None:
        self.marked = [] if self.marked else list(self.shown)
        self.render_rows()
        self.post_message(MarkedChanged(list(self.marked)))

    def action_sort(self) -> None:
        self.sort_col = (self.sort_col + 1) % len(SORTS)
        self.render_rows()

    def action_reverse(self) -> None:
        self.reverse = not self.reverse
        self.render_rows()

    def action_leave_input(self) -> None:
        """Esc in the filter: back to the table (the filter stays; digits switch panels again)."""
        self.table.focus()

    def action_filter(self) -> None:
        self.query_one("#run-filter", Input).focus()

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

    def action_compare(self) -> None:
        """The two marked runs; with one marked, it and the current run; else the current run and the next."""
        cur = self.current_run()
        if len(self.marked) >= 2:
            pair = self.marked[:2]
        elif self.marked and cur and cur != self.marked[0]:
            pair = [self.marked[0], cur]
        elif cur and cur in self.shown and self.shown.index(cur) + 1 < len(self.shown):
            pair = [cur, self.shown[self.shown.index(cur) + 1]]
        else:
            pair = [cur] if cur else []
        self.post_message(CompareRequested(pair))

    def set_marked(self, ids: list[str]) -> None:
        self.marked = list(ids)
        self.render_rows()
        self.post_message(MarkedChanged(list(self.marked)))

    def action_delete(self) -> None:
        self.post_message(DeleteRequested(self.chosen()))

    def action_export(self) -> None:
        ids = self.marked or list(self.shown)
        self.post_message(ExportRequested(ids))
