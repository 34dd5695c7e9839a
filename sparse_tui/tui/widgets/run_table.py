"""The Runs panel: the run table from the store (sortable, filterable, live), marking runs and acting on them."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Input, Static

from sparse_tui.tui.guard import Guarded
from sparse_tui.store import RunRecord
from sparse_tui.tui.render import COLUMNS, Row, matches, run_row, sort_rows

HEADERS = ("run", "status", "params", "step", "plateau", "loss", "acc", "preset", "device", "age")
# index of each header in render.COLUMNS (the Row's cells / keys)
ORDER = [COLUMNS.index(h) for h in HEADERS]


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
        Binding("d,delete", "delete", "Delete"),
        Binding("e", "export", "Export"),
        Binding("f", "fit", "Fit", show=False),
    ]
    HELP = "Runs"

    DEFAULT_CSS = """
    RunsPanel #run-filter { height: 1; }
    RunsPanel DataTable { height: 1fr; }
    RunsPanel #runs-summary { height: 1; color: $text-muted; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.rows: list[Row] = []
        self.shown: list[str] = []
        self.sort_col = HEADERS.index("age")
        self.reverse = False
        self.query_text = ""
        self.marked: list[str] = []

    def compose(self) -> ComposeResult:
        yield Input(placeholder="/ filter: words or status:running", id="run-filter", compact=True)
        table = DataTable(id="run-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static("", id="runs-summary")

    def on_mount(self) -> None:
        t = self.query_one(DataTable)
        t.add_column(" ", key="mark", width=1)
        for h in HEADERS:
            t.add_column(h, key=h)
        self.border_title = "Runs"

    @property
    def table(self) -> DataTable:
        return self.query_one(DataTable)

    # -- data ----------------------------------------------------------------------------------------------------
    def show(self, records: list[RunRecord], last: dict, now: float) -> None:
        self.rows = [run_row(r, last.get(r.run_id), now) for r in records]
        self.render_rows()

    def render_rows(self) -> None:
        rows = [r for r in self.rows if matches(r, self.query_text)] if self.query_text else list(self.rows)
        rows = sort_rows(rows, ORDER[self.sort_col], self.reverse)
        ids = [r.run_id for r in rows]
        t = self.table
        cur = self.current_run()
        if ids == self.shown:
            for r in rows:
                for h, ci in zip(HEADERS, ORDER):
                    if t.get_cell(r.run_id, h) != r.cells[ci]:
                        t.update_cell(r.run_id, h, r.cells[ci], update_width=True)
                t.update_cell(r.run_id, "mark", "●" if r.run_id in self.marked else " ")
        else:
            t.clear()
            for r in rows:
                t.add_row("●" if r.run_id in self.marked else " ", *(r.cells[ci] for ci in ORDER), key=r.run_id)
            self.shown = ids
            if cur in ids:
                t.move_cursor(row=ids.index(cur), animate=False)
        self.marked = [m for m in self.marked if any(r.run_id == m for r in self.rows)]
        self._summary()

    def _summary(self) -> None:
        n_run = sum(1 for r in self.rows if r.keys[1] == "running")
        arrow = "↑" if self.reverse else "↓"
        parts = [f"{len(self.shown)}/{len(self.rows)} runs", f"{n_run} running"]
        if self.marked:
            parts.append(f"{len(self.marked)} marked")
        parts.append(f"sort {HEADERS[self.sort_col]} {arrow}")
        if self.query_text:
            parts.append(f"filter '{self.query_text}'")
        self.query_one("#runs-summary", Static).update(" · ".join(parts))

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

    # -- events --------------------------------------------------------------------------------------------------
    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.app.set_current_run(self.current_run())

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
        self.app.set_marked(self.marked)

    def action_mark_all(self) -> None:
        self.marked = [] if self.marked else list(self.shown)
        self.render_rows()
        self.app.set_marked(self.marked)

    def action_sort(self) -> None:
        self.sort_col = (self.sort_col + 1) % len(HEADERS)
        self.render_rows()

    def action_reverse(self) -> None:
        self.reverse = not self.reverse
        self.render_rows()

    def action_filter(self) -> None:
        self.query_one("#run-filter", Input).focus()

    def action_view(self) -> None:
        if self.chosen():
            self.app.show_panel("curves")

    def action_attention(self) -> None:
        if self.current_run():
            self.app.show_panel("attention")

    def action_fit(self) -> None:
        self.app.show_panel("fit")

    def action_cancel(self) -> None:
        self.app.cancel_runs(self.chosen())

    def action_delete(self) -> None:
        self.app.delete_runs(self.chosen())

    def action_export(self) -> None:
        ids = self.marked or list(self.shown)
        self.app.export_runs(ids)
