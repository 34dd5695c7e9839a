"""The Runs panel: the run table from the store (sortable, filterable, grouped over seeds, live), marking runs and
acting on them.

Columns: the run id, its name (what the others leave), status, progress, final loss / accuracy, plateau step, then
one column per hyperparameter that varies among the shown runs (W&B's runs table, TensorBoard's HParams), as many
as fit (``o`` picks them). ``s`` / a click on a header sorts (numbers by value, names in natural order), ``r``
reverses. ``g`` groups the runs by their swept values (one row per group: mean ± std and n; Enter expands it)."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Input, Static

from sparse_tui.numbers import fmt_age
from sparse_tui.store import RunRecord
from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.messages import (
    ArchiveRequested,
    CancelRequested,
    CompareRequested,
    DeleteRequested,
    ExportRequested,
    GroupingChanged,
    MarkedChanged,
    NoteRequested,
    PanelRequested,
    ResumeRequested,
    RunHighlighted,
)
from sparse_tui.tui.render.groups import Group, group_row, group_runs
from sparse_tui.tui.render.runs import (
    COLUMNS,
    DESCENDING_FIRST,
    STATUS,
    Row,
    batch_eta,
    eta,
    fit_name,
    matches,
    param_text,
    run_tags,
    short_keys,
    sort_rows,
    sort_words,
    speed,
    swept_keys,
    table_row,
    varied_keys,
)
from sparse_tui.tui.screens.columns import ColumnsScreen
from sparse_tui.tui.widgets.ordered_input import OrderedInput
from sparse_tui.tui.widgets.panel import ConsolePanel, StoreView

# What 80 columns hold: the full 8-character id, the run's name (as wide as the rest leaves), status, progress and
# results; preset, params, device and age go to the detail line of the run under the cursor.
HEADERS = ("run", "name", "status", "step", "loss", "acc", "plateau")
FIXED = {"run": 8, "status": 9, "step": 9, "loss": 6, "acc": 5, "plateau": 7}
GROUPED = {"status": 9, "loss": 12, "acc": 12, "plateau": 12}  # mean ± std cells (n in the name); no id, no step
NAME_MIN = 20  # hyperparameter columns are added (auto) while the name keeps this much
HP_MAX = 10  # widest hyperparameter column
SORTS = ("age", "name", "status", "step", "loss", "acc", "plateau")  # s cycles these, then the hyperparameters


class RunsPanel(ConsolePanel, Guarded, Vertical):
    BINDINGS = [
        Binding("space", "toggle_mark", "Mark"),
        Binding("a", "mark_all", "Mark all"),
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

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.rows: list[Row] = []
        self.shown: list[str] = []  # row keys in table order: run ids, and group keys (GROUP_PREFIX + label)
        self.sort = "age"  # newest first
        self.descending = True
        self.query_text = ""
        self.marked: list[str] = []
        self.group_keys: list[str] = []  # group by these parameters ([]: one row per run)
        self.expanded: set[str] = set()  # group keys shown with their runs
        self.hp_choice: list[str] | None = None  # hyperparameter columns picked with o (None: as many as fit)
        self.groups: dict[str, Group] = {}
        self.visible_ids: list[str] = []  # run ids the filter lets through (in collapsed groups too)
        self._records: dict[str, RunRecord] = {}
        self._cols: list[tuple[str, str, int]] = []
        self._hp_keys: list[str] = []  # hyperparameters that vary among the filtered runs
        self._hp_auto: list[str] = []  # of those, the ones varied within a preset (shown by default)
        self._sent_marks: list[str] | None = None
        self._reveal: list[str] = []  # launched runs to show and put the cursor on once they are in the table

    def compose(self) -> ComposeResult:
        yield OrderedInput(placeholder="/ filter: words, status:failed, is:archived", id="run-filter", compact=True)
        yield DataTable(id="run-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="run-detail")
        yield Static("", id="runs-summary")

    def on_mount(self) -> None:
        self.border_title = "Runs"
        self._set_columns()

    def on_resize(self) -> None:
        self.render_rows()

    @property
    def table(self) -> DataTable:
        return self.query_one(DataTable)

    # -- columns -------------------------------------------------------------------------------------------------
    def _width(self) -> int:
        return self.size.width or self.app.size.width or 80  # hidden (another panel shown): the screen's width

    def _columns(self) -> list[tuple[str, str, int]]:
        """(key, title, width) of every column: the fixed ones, the name, then the hyperparameters that fit."""
        fixed = GROUPED if self.group_keys else FIXED
        heads = [h for h in HEADERS if h == "name" or h in fixed]
        used = 1 + sum(fixed.values()) + 2 * (len(heads) + 1) + 2  # mark, cell padding 1 + 1, border
        room = self._width() - used
        titles = short_keys(self._hp_keys)
        hp: list[tuple[str, str, int]] = []
        chosen = self._hp_auto if self.hp_choice is None else [k for k in self.hp_choice if k in self._hp_keys]
        for k in chosen:
            vals = [param_text(r.params.get(k, "")) for r in self.rows[:200]]
            w = min(HP_MAX, max([len(titles[k])] + [len(v) for v in vals]))
            if self.hp_choice is None and room - (w + 2) < NAME_MIN:
                break
            hp.append((f"hp:{k}", titles[k], w))
            room -= w + 2
        name_w = max(8, room)
        cols = [("mark", " ", 1)] + [(h, h, name_w if h == "name" else fixed[h]) for h in heads]
        return cols + hp

    def _set_columns(self) -> bool:
        cols = self._columns()
        if cols == self._cols:
            return False
        t = self.table
        t.clear(columns=True)
        for key, title, w in cols:
            arrow = ""
            if key == self.sort or (key == "run" and self.sort == "age"):
                arrow = "" if key == "run" else (" ↓" if self.descending else " ↑")
            t.add_column(title + arrow if key != "mark" else " ", key=key, width=w)
        self._cols = cols
        self.shown = []
        return True

    # -- data ----------------------------------------------------------------------------------------------------
    def store_changed(self, view: StoreView) -> None:
        self._records = {r.run_id: r for r in view.records}
        self._last = view.last
        self.rows = [table_row(r, view.last.get(r.run_id), view.now) for r in view.records]
        self.render_rows()

    def focus_panel(self) -> None:
        self.table.focus()

    def _filtered(self) -> list[Row]:
        words = self.query_text.split()
        archived = "is:archived" in words
        query = " ".join(w for w in words if w != "is:archived")
        out = []
        for r in self.rows:
            rec = self._records.get(r.run_id)
            if rec is not None and rec.archived != archived:
                continue
            if not query or matches(r, query):
                out.append(r)
        return out

    def render_rows(self) -> None:
        if not self.is_mounted or not self.query("#run-table"):  # (not yet composed, or torn down with the app)
            return
        cur = self.current_key()  # kept across a rebuild of the columns (a resize) or of the rows
        rows = self._filtered()
        recs = [self._records[r.run_id] for r in rows if r.run_id in self._records]
        keys = swept_keys(recs)
        if len({r.params.get("seed") for r in recs}) > 1:
            keys.append("seed")
        self._hp_keys = keys  # every key that varies: o offers them all
        self._hp_auto = varied_keys(recs)  # shown unless o picked others: what was varied within a preset
        self.visible_ids = [r.run_id for r in rows]
        self.group_keys = [k for k in self.group_keys if k in keys] if recs else self.group_keys
        if self.group_keys != list(getattr(self, "_sent_groups", [])):  # a filter took a grouping key away
            self._sent_groups = list(self.group_keys)
            self.post_message(GroupingChanged(list(self.group_keys)))
        self._set_columns()
        desc = self.descending
        items: list[tuple[str, Row, str]] = []  # (row key, row, kind: run | group | child)
        self.groups = {}
        if self.group_keys:
            by_id = {r.run_id: r for r in rows}
            pseudo = []
            for g in group_runs(recs, self.group_keys, getattr(self, "_last", {})):
                self.groups[g.key] = g
                pseudo.append(group_row(g, [by_id[i] for i in g.run_ids]))
            for gr in sort_rows(pseudo, self.sort, desc):
                items.append((gr.run_id, gr, "group"))
                if gr.run_id in self.expanded:
                    members = [by_id[i] for i in self.groups[gr.run_id].run_ids]
                    items += [(m.run_id, m, "child") for m in sort_rows(members, self.sort, desc)]
        else:
            items = [(r.run_id, r, "run") for r in sort_rows(rows, self.sort, desc)]
        ids = [k for k, _, _ in items]
        t = self.table
        if ids == self.shown:
            for key, row, kind in items:
                for (col, _, _), cell in zip(self._cols, self._cells(row, kind)):
                    if t.get_cell(key, col) != cell:
                        t.update_cell(key, col, cell)
        else:
            t.clear()
            for key, row, kind in items:
                t.add_row(*self._cells(row, kind), key=key)
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
        self.marked = [m for m in self.marked if m in self._records]
        self._marks_changed()
        self._summary()

    def _marks_changed(self) -> None:
        """Tell the app which marked runs count (those the filter shows): marks on hidden runs are kept, not used."""
        vis = self.visible_marks()
        if vis != self._sent_marks:
            self._sent_marks = vis
            self.post_message(MarkedChanged(vis))

    def visible_marks(self) -> list[str]:
        shown = set(self.visible_ids)
        return [m for m in self.marked if m in shown]

    def _mark_cell(self, key: str) -> str:
        g = self.groups.get(key)
        if g is not None:
            n = sum(1 for r in g.run_ids if r in self.marked)
            return "●" if n == g.n else ("◐" if n else " ")
        return "●" if key in self.marked else " "

    def _cells(self, row: Row, kind: str) -> list:
        """The shown cells of a row: the name cut to its column (keeping the swept values at its end), a group's
        runs indented under it."""
        c = dict(zip(COLUMNS, row.cells))
        out = []
        for key, _, w in self._cols:
            if key == "mark":
                out.append(self._mark_cell(row.run_id))
            elif key == "name":
                name, lead = str(c["name"]), ""
                if kind == "child":  # a group's run, under it: its label (the preset is the group's)
                    rec = self._records.get(row.run_id)
                    name, lead = (rec.label if rec is not None and rec.label else name), "└ "
                elif kind == "group":
                    lead = "▾ " if row.run_id in self.expanded else "▸ "
                out.append(lead + fit_name(name, max(1, w - len(lead))))
            elif key.startswith("hp:"):
                v = row.params.get(key[3:])
                out.append("" if v is None else fit_name(param_text(v), w))
            else:
                out.append(c[key])
        return out

    def _summary(self) -> None:
        n_run = sum(1 for r in self.rows if r.keys[STATUS] == "running")
        parts = [f"{len(self.visible_ids)}/{len(self.rows)} runs", f"{n_run} running"]
        etas = [batch_eta(self._records.values(), b)
                for b in {r.batch_id for r in self._records.values() if r.status == "running"}]
        if any(e is not None for e in etas):
            parts.append(f"ETA {fmt_age(max(e for e in etas if e is not None))}")
        if self.group_keys:
            parts.append(f"{len(self.groups)} groups by {', '.join(short_keys(self.group_keys).values())}")
        vis = self.visible_marks()
        if self.marked:
            hidden = len(self.marked) - len(vis)
            parts.append(f"{len(vis)} marked" + (f" ({hidden} hidden by the filter: not used)" if hidden else ""))
        title = next((t for k, t, _ in self._cols if k == self.sort), self.sort)
        parts.append(f"sort {title} {sort_words(self.sort, self.descending)}")
        if self.query_text:
            parts.append(f"filter '{self.query_text}'")
        self.query_one("#runs-summary", Static).update(Text(" · ".join(parts)))

    def _detail(self) -> None:
        """The run under the cursor in full: id, name, preset, swept params, tags, note, device, age, reason."""
        key = self.current_key()
        details = self.query("#run-detail")
        if not details:  # torn down with the app
            return
        w = details.first(Static)
        if key in self.groups:
            w.update(Text(self.groups[key].detail()))
            return
        row = next((r for r in self.rows if r.run_id == key), None)
        if row is None:
            w.update("")
            return
        c = dict(zip(COLUMNS, row.cells))
        rec = self._records.get(key)
        t = Text(no_wrap=False, overflow="fold")
        t.append(f"{key} ", style="bold")
        t.append(str(c["name"]))
        if c["params"]:
            t.append(f" · params {c['params']}")
        tags = run_tags(rec) if rec is not None else []
        if tags:
            t.append(" · tags " + ", ".join(tags), style="cyan")
        if rec is not None and rec.note:
            t.append(f" · note: {rec.note}", style="green")
        t.append(f" · preset {c['preset']} · {c['device']} · {c['age']} ago")
        if rec is not None and speed(rec):
            t.append(f" · {speed(rec):.1f} steps/s · ETA {fmt_age(eta(rec))}"
                     f" (batch {rec.batch_id}: {fmt_age(batch_eta(self._records.values(), rec.batch_id))})",
                     style="cyan")
        if rec is not None and rec.archived:
            t.append(" · archived", style="magenta")
        if rec is not None and rec.reason:
            t.append(f" · {rec.reason}", style="yellow")
        w.update(t)

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
        key = self.current_key()
        if key in self.groups:
            return self.groups[key].run_ids[0] if self.groups[key].run_ids else None
        return key

    def chosen(self) -> list[str]:
        """The marked runs the filter shows, or the run (or the group's runs) under the cursor."""
        vis = self.visible_marks()
        if vis:
            return vis
        key = self.current_key()
        if key in self.groups:
            return list(self.groups[key].run_ids)
        return [key] if key else []

    def reveal(self, run_ids: list[str]) -> None:
        """Show runs that were just launched: a filter that hides them is cleared, and the cursor moves to the
        first of them as soon as the store poller brings them (Enter then shows their curves, not an old run's)."""
        self._reveal = list(run_ids)
        self.group_keys = []
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
        self.action_enter()

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        """A click on a column header sorts by it; a second click reverses."""
        key = str(event.column_key.value)
        if key == "mark":
            return
        if key == "run":
            key = "age"
        if key == self.sort:
            self.descending = not self.descending
        else:
            self.sort, self.descending = key, key in DESCENDING_FIRST
        self._resort()

    @on(Input.Changed, "#run-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value.strip()
        self.render_rows()

    @on(Input.Submitted, "#run-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.table.focus()

    # -- actions -------------------------------------------------------------------------------------------------
    def action_toggle_mark(self) -> None:
        key = self.current_key()
        if key is None:
            return
        ids = self.groups[key].run_ids if key in self.groups else [key]
        if all(i in self.marked for i in ids):
            self.marked = [m for m in self.marked if m not in ids]
        else:
            self.marked += [i for i in ids if i not in self.marked]
        for k in [key] + [k for k, g in self.groups.items() if set(ids) & set(g.run_ids)] + ids:
            if k in self.shown:
                self.table.update_cell(k, "mark", self._mark_cell(k))
        t = self.table
        if t.cursor_row is not None and t.cursor_row + 1 < len(self.shown):
            t.move_cursor(row=t.cursor_row + 1, animate=False)
        self._marks_changed()
        self._summary()

    def action_mark_all(self) -> None:
        self.set_marked([] if self.visible_marks() else self.visible_ids)

    def _resort(self) -> None:
        self._cols = []  # the header arrows follow the sort
        self.render_rows()

    def action_sort(self) -> None:
        order = list(SORTS) + [k for k, _, _ in self._cols if k.startswith("hp:")]
        i = order.index(self.sort) if self.sort in order else -1
        self.sort = order[(i + 1) % len(order)]
        self.descending = self.sort in DESCENDING_FIRST
        self._resort()

    def action_reverse(self) -> None:
        self.descending = not self.descending
        self._resort()

    def action_group(self) -> None:
        """Off → the swept values (seed aside) → each swept parameter alone → off."""
        swept = [k for k in self._hp_auto if k != "seed"]
        options: list[list[str]] = [[]]
        if swept:
            options.append(swept)
            if len(swept) > 1:
                options += [[k] for k in swept]
        i = options.index(self.group_keys) if self.group_keys in options else 0
        self.group_keys = options[(i + 1) % len(options)]
        self.expanded = set()
        self._sent_groups = list(self.group_keys)
        if not swept:
            self.app.notify("nothing to group: the shown runs differ in no parameter but the seed", markup=False)
        self.post_message(GroupingChanged(list(self.group_keys)))
        self.render_rows()

    def action_enter(self) -> None:
        key = self.current_key()
        if key in self.groups:
            self.expanded ^= {key}
            self.render_rows()
            return
        self.action_view()

    def action_columns(self) -> None:
        """Pick the hyperparameter columns (at 80 columns not all fit)."""
        if not self._hp_keys:
            self.app.notify("no hyperparameter varies among the shown runs", markup=False)
            return

        shown = [k[3:] for k, _, _ in self._cols if k.startswith("hp:")]

        def done(keys: list[str] | None) -> None:
            if keys is not None:
                self.hp_choice = keys
                self.render_rows()

        self.app.push_screen(ColumnsScreen(self._hp_keys, shown), done)

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
        """The two marked runs; with one marked, it and the current run; else the current row and the next (two
        group rows compare the groups)."""
        cur = self.current_key()
        vis = self.visible_marks()
        if len(vis) >= 2:
            pair = vis[:2]
        elif vis and cur and cur != vis[0] and cur not in self.groups:
            pair = [vis[0], cur]
        elif cur and self.shown.index(cur) + 1 < len(self.shown):
            nxt = self.shown[self.shown.index(cur) + 1]
            if cur in self.groups and nxt not in self.groups:  # an expanded group: the next group
                nxt = next((k for k in self.shown[self.shown.index(cur) + 1:] if k in self.groups), nxt)
            pair = [cur, nxt]
        else:
            pair = [cur] if cur else []
        groups = {k: self.groups[k].run_ids for k in pair if k in self.groups}
        self.post_message(CompareRequested(pair, groups))

    def set_marked(self, ids: list[str]) -> None:
        self.marked = list(ids)
        self.shown = []
        self.render_rows()

    def action_delete(self) -> None:
        self.post_message(DeleteRequested(self.chosen()))

    def action_export(self) -> None:
        self.post_message(ExportRequested(self.visible_marks() or list(self.visible_ids)))
