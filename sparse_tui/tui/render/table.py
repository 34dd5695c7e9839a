"""The run table's state and layout, without Textual: what the user chose (sort, filter, marks, grouping, expanded
groups, picked columns) and what follows from it and the store (the rows in table order, the groups over seeds, the
columns that fit a width, each row's cells, the summary and detail lines, what ``x`` compares). The Runs panel
(``widgets/run_table.RunsPanel``) mixes ``RunTable`` in and draws it into a DataTable."""

from __future__ import annotations

from rich.text import Text

from sparse_tui.base.numbers import fmt_age
from sparse_tui.science.forecast import detail as forecast_detail
from sparse_tui.science.phase import is_length
from sparse_tui.store import RunRecord
from sparse_tui.tui.render.filters import FIELDS, RESULTS, matches, parse
from sparse_tui.tui.render.groups import Group, group_row, group_runs, split_keys
from sparse_tui.tui.render.names import fit_names, fit_value
from sparse_tui.tui.render.runs import (
    COLUMNS,
    DESCENDING_FIRST,
    STATUS,
    Row,
    batch_eta,
    eta,
    natural,
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

# What 80 columns hold: the full 8-character id, the run's name (as wide as the rest leaves), status, progress and
# results; preset, params, device and age go to the detail line of the run under the cursor.
HEADERS = ("run", "name", "status", "step", "loss", "acc", "plateau")
FIXED = {"run": 8, "status": 9, "step": 9, "loss": 6, "acc": 5, "plateau": 7}
GROUPED = {"status": 9, "loss": 12, "acc": 12, "plateau": 12}  # mean ± std cells (n in the name); no id, no step
NAME_MIN = 20  # hyperparameter columns are added (auto) while the name keeps this much
NAME_PICKED = 12  # columns picked with o: fixed columns make room for them while the name keeps this much
ROOM = ("step", "loss", "acc", "plateau", "status")  # the fixed columns that make room for picked ones, in order
HP_MAX = 10  # widest hyperparameter column
SORTS = ("age", "name", "status", "step", "loss", "acc", "plateau")  # s cycles these, then the hyperparameters

Column = tuple[str, str, int]  # (key, title, width)
Item = tuple[str, Row, str]  # (row key, row, kind: run | group | child)


class RunTable:
    """Mixed into the Runs panel (its attributes are the panel's); pure, so tests can drive it alone."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.rows: list[Row] = []
        self.sort = "age"  # newest first
        self.descending = True
        self.query_text = ""
        self.marked: list[str] = []
        self.hidden: set[str] = set()  # runs hidden in the charts (h): the table shows them, Curves does not
        self.group_keys: list[str] = []  # group by these parameters ([]: one row per run)
        self.expanded: set[str] = set()  # group keys shown with their runs
        self.hp_choice: list[str] | None = None  # hyperparameter columns picked with o (None: as many as fit)
        self.groups: dict[str, Group] = {}
        self.split: list[str] = []  # keys that split the groups besides group_keys (runs differ in them: no pooling)
        self.visible_ids: list[str] = []  # run ids the filter lets through (in collapsed groups too)
        self._records: dict[str, RunRecord] = {}
        self._last: dict[str, dict] = {}
        self._hp_keys: list[str] = []  # hyperparameters that vary among the filtered runs
        self._hp_auto: list[str] = []  # of those, the ones varied within a preset (shown by default)
        self.filter_errors: list[str] = []  # the filter's conditions that could not be read
        self._names: dict[tuple, str] = {}  # (width, kind, run id): the shown runs' names fitted together
        self._collisions: dict[int, bool] = {}  # name width: whether the shown runs' fitted names read alike
        self._fc: dict[str, dict | None] = {}  # run id -> its emergence forecast (forecast.py)
        self._version = 0  # counts the store reads (set_store)
        self._keys_of: tuple = ()  # (store read, shown runs) -> (varying keys, keys varied within a preset)

    def set_store(self, records: list[RunRecord], last: dict[str, dict], now: float,
                  fc: dict[str, dict | None]) -> None:
        """``fc``: each run's emergence forecast (forecast.py; the store poller fits them, off the UI thread)."""
        self._records = {r.run_id: r for r in records}
        self._last = last
        self._fc = fc  # (plateau cell, detail line)
        self._version += 1
        self.rows = [table_row(r, last.get(r.run_id), now, fc.get(r.run_id)) for r in records]

    def _filtered(self) -> list[Row]:
        """The runs the filter lets through (``render/filters``: words and conditions; its errors are kept)."""
        q = parse(self.query_text, {k for r in self.rows for k in r.params})
        self.filter_errors = q.errors
        recs = self._records
        return [r for r in self.rows
                if (r.run_id not in recs or recs[r.run_id].archived == q.archived) and matches(r, q)]

    def items(self) -> list[Item]:
        """The rows in table order (runs, or groups with the runs of the expanded ones under them); sets the visible
        runs, the varying hyperparameters, the groups, and drops grouping keys that no longer vary."""
        rows = self._filtered()
        recs = [self._records[r.run_id] for r in rows if r.run_id in self._records]
        keys, self._hp_auto = self._varying(recs)
        self._hp_keys = keys  # every key that varies: o offers them all
        self.visible_ids = [r.run_id for r in rows]
        self._names, self._collisions = {}, {}
        self.marked = [m for m in self.marked if m in self._records]
        self.hidden &= set(self._records)
        self.group_keys = [k for k in self.group_keys if k in keys] if recs else self.group_keys
        self.groups = {}
        self.split = []
        if not self.group_keys:
            return [(r.run_id, r, "run") for r in sort_rows(rows, self.sort, self.descending)]
        by_id = {r.run_id: r for r in rows}
        pseudo = []
        self.split = split_keys(recs, self.group_keys, self.pooled())
        for g in group_runs(recs, self.group_keys, self._last, self.pooled()):
            self.groups[g.key] = g
            pseudo.append(group_row(g, [by_id[i] for i in g.run_ids]))
        items: list[Item] = []
        for gr in sort_rows(pseudo, self.sort, self.descending):
            items.append((gr.run_id, gr, "group"))
            if gr.run_id in self.expanded:
                members = [by_id[i] for i in self.groups[gr.run_id].run_ids]
                items += [(m.run_id, m, "child") for m in sort_rows(members, self.sort, self.descending)]
        return items

    def _varying(self, recs: list[RunRecord]) -> tuple[list[str], list[str]]:
        """The keys that vary among these runs (the seed last), and those varied within a preset (shown unless o
        picked others); computed once per store read and set of shown runs (every parameter of every run: 0.15 s at
        2,000 runs, and a sort, a mark or a resize redraws the table)."""
        at = (self._version, tuple(r.run_id for r in recs))
        if not self._keys_of or self._keys_of[0] != at:
            keys = swept_keys(recs)
            if len({r.params.get("seed") for r in recs}) > 1:
                keys.append("seed")
            self._keys_of = (at, keys, varied_keys(recs))
        return list(self._keys_of[1]), list(self._keys_of[2])

    def pooled(self) -> list[str]:
        """The swept keys a grouping by some of them pools over (g by one key): a choice, said in the summary."""
        if not self.group_keys:
            return []
        return [k for k in self._hp_auto if k != "seed" and k not in self.group_keys and not is_length(k)]

    def chart_groups(self) -> list[str]:
        """The keys the charts group runs by: the grouping's, and those that split its groups (like with like)."""
        return [*self.group_keys, *self.split]

    def columns(self, width: int) -> list[Column]:
        return self.column_layout(width, self.hp_choice)[0]

    def column_layout(self, width: int, choice: list[str] | None) -> tuple[list[Column], str]:
        """Every column in ``width``, and what the column picker says about it: the fixed ones, the name, then the
        hyperparameters: as many as fit beside a name of ``NAME_MIN`` (``choice`` None), or the ``choice`` (o), for
        which fixed columns make room (``ROOM``) while the name keeps ``NAME_PICKED``; what still does not fit is
        left out, and said."""
        fixed = dict(GROUPED if self.group_keys else FIXED)
        titles = short_keys(self._hp_keys)
        hp: list[Column] = []
        for k in self._hp_auto if choice is None else [k for k in choice if k in self._hp_keys]:
            vals = [param_text(r.params.get(k, "")) for r in self.rows[:200]]
            hp.append((f"hp:{k}", titles[k], min(HP_MAX, max([len(titles[k])] + [len(v) for v in vals]))))

        def room() -> int:  # the name's: less the mark, the cells and their padding (1 + 1), the border
            n = 1 + len(fixed) + len(hp)
            return width - 1 - sum(fixed.values()) - sum(w for _, _, w in hp) - 2 * (n + 1) - 2

        hidden, left_out = [], []
        for h in ROOM if choice is not None else ():
            if room() >= NAME_PICKED:
                break
            if h in fixed:
                fixed.pop(h)
                hidden.append(h)
        while hp and room() < (NAME_MIN if choice is None else NAME_PICKED):
            left_out.insert(0, hp.pop()[1])
        for h in reversed(hidden if left_out else []):  # what left out picks leave room for comes back
            fixed[h] = (GROUPED if self.group_keys else FIXED)[h]
            if room() < NAME_PICKED:
                del fixed[h]
                break
            hidden.remove(h)
        give = "status" if self.group_keys else "step"  # told apart, the names beat this column (the line under
        if choice is None and give in fixed and self._collide(room()):  # the table has it)
            w = fixed.pop(give)
            if self._collide(room()):
                fixed[give] = w
            else:
                hidden.append(give)
        heads = [h for h in HEADERS if h == "name" or h in fixed]
        cols = [("mark", " ", 1)] + [(h, h, max(8, room()) if h == "name" else fixed[h]) for h in heads] + hp
        shown = ", ".join(t for _, t, _ in hp)
        note = (f"{shown or 'no column'} shown" + (f" · {', '.join(hidden)} hidden to make room" if hidden else "")
                + (f" · no room at {width} columns for {', '.join(left_out)}: pick fewer or widen the terminal"
                   if left_out else ""))
        return cols, note

    def _collide(self, width: int) -> bool:
        """Whether the shown runs' names, fitted to ``width``, read alike for runs whose names differ."""
        if width not in self._collisions:  # (reset with the shown runs: 50 ms at 2,000 runs)
            fit = width
            if self.group_keys:  # a group's name: "▸ " + its label + " n=3"
                names = {g.label for g in self.groups.values()}
                fit -= 2 + max((len(f" n={g.n}") for g in self.groups.values()), default=0)
            else:
                names = {self._records[r].name for r in self.visible_ids if r in self._records}
            self._collisions[width] = len(set(fit_names(list(names), max(1, fit)).values())) < len(names)
        return self._collisions[width]

    def visible_marks(self) -> list[str]:
        shown = set(self.visible_ids)
        return [m for m in self.marked if m in shown]

    def mark_cell(self, key: str) -> str:
        """● marked, ◐ some of a group's runs marked; hidden in the charts: ◌ (marked) or · (all of a group's)."""
        ids = self.ids_of(key)
        if ids and all(i in self.hidden for i in ids):
            return "◌" if any(i in self.marked for i in ids) else "·"
        n = sum(1 for r in ids if r in self.marked)
        return "●" if n == len(ids) and n else ("◐" if n else " ")

    def toggle_hidden(self, key: str) -> list[str]:
        """Hide the row's run (or the group's runs) in the charts, or show them again when all are hidden; the row
        keys whose mark cell changes."""
        ids = self.ids_of(key)
        self.hidden ^= set(ids) if set(ids) <= self.hidden else set(ids) - self.hidden
        return self._touched(key, ids)

    def ids_of(self, key: str) -> list[str]:
        """The runs of a row: a group's, or the run's."""
        return self.groups[key].run_ids if key in self.groups else [key]

    def _touched(self, key: str, ids: list[str]) -> list[str]:
        """The row keys whose mark cell changes with the marks (or hiding) of the runs ``ids`` of row ``key``."""
        return [key] + [k for k, g in self.groups.items() if set(ids) & set(g.run_ids)] + ids

    def cells(self, row: Row, kind: str, cols: list[Column]) -> list:
        """The shown cells of a row: the name fitted to its column (whole ``key=value`` pairs, without the words every
        shown run shares when it does not fit), a group's runs indented under it."""
        c = dict(zip(COLUMNS, row.cells))
        out = []
        for key, _, w in cols:
            if key == "mark":
                out.append(self.mark_cell(row.run_id))
            elif key == "name":
                out.append(self._name_cell(row, kind, w))
            elif key.startswith("hp:"):
                v = row.params.get(key[3:])
                out.append("" if v is None else fit_value(v, w))
            else:
                out.append(c[key])
        return out

    def _name_cell(self, row: Row, kind: str, w: int) -> str:
        """A row's name in its column: a run's fitted together with the other shown runs' names (a group's run,
        under it: its label, the preset is the group's); a group's values, and n when it fits."""
        if kind == "group":  # the count always; cut, the values every group shares go first
            g, lead = self.groups[row.run_id], "▾ " if row.run_id in self.expanded else "▸ "
            name = f"{g.label} (n={g.n})"
            if len(name) + len(lead) <= w:
                return lead + name
            n = f" n={g.n}"
            names = fit_names([o.label for o in self.groups.values()], max(1, w - len(lead) - len(n)))
            return lead + names[g.label] + n
        lead = "└ " if kind == "child" else ""
        if (w, kind, row.run_id) not in self._names:
            names = {r: (lead and self._records[r].label) or self._records[r].name for r in self.visible_ids}
            fitted = fit_names(list(names.values()), max(1, w - len(lead)))
            self._names.update({(w, kind, r): fitted[n] for r, n in names.items()})
        return lead + self._names[w, kind, row.run_id]

    def summary(self, cols: list[Column]) -> Text:
        n_run = sum(1 for r in self.rows if r.keys[STATUS] == "running")
        parts = [f"{len(self.visible_ids)}/{len(self.rows)} runs", f"{n_run} running"]
        etas = [batch_eta(self._records.values(), b)
                for b in {r.batch_id for r in self._records.values() if r.status == "running"}]
        if any(e is not None for e in etas):
            parts.append(f"ETA {fmt_age(max(e for e in etas if e is not None))}")
        if self.group_keys:
            by = ', '.join(short_keys(self.chart_groups()).values())
            pooled = list(short_keys(self.pooled()).values())
            parts.append(f"{len(self.groups)} groups by {by}"
                         + (f", pooled over {', '.join(pooled)}" if pooled else ""))
        vis = self.visible_marks()
        if self.marked:
            hidden = len(self.marked) - len(vis)
            parts.append(f"{len(vis)} marked" + (f" ({hidden} hidden by the filter: not used)" if hidden else ""))
        if hidden := [r for r in self.visible_ids if r in self.hidden]:
            parts.append(f"{len(hidden)} hidden in charts")
        title = next((t for k, t, _ in cols if k == self.sort), self.sort)
        parts.append(f"sort {title} {sort_words(self.sort, self.descending)}")
        if self.query_text:
            parts.append(f"filter '{self.query_text}'")
        if self.filter_errors:  # first, in one line: what the filter could not read
            return Text.assemble((self.filter_errors[0], "yellow"), " · ", " · ".join(parts))
        return Text(" · ".join(parts))

    def detail(self, key: str | None) -> Text | str:
        """The row ``key`` in full: a group's numbers; a run's id, name, params, tags, note, preset, device, age,
        speed and ETA, why it failed."""
        if key in self.groups:
            return Text(self.groups[key].detail())
        row = next((r for r in self.rows if r.run_id == key), None)
        if row is None:
            return ""
        c = dict(zip(COLUMNS, row.cells))
        rec = self._records[row.run_id]  # (the rows are the records')
        t = Text(no_wrap=False, overflow="fold")
        t.append(f"{key} ", style="bold")
        t.append(str(c["name"]))
        if c["params"]:
            t.append(f" · params {c['params']}")
        if tags := run_tags(rec):
            t.append(" · tags " + ", ".join(tags), style="cyan")
        if rec.note:
            t.append(f" · note: {rec.note}", style="green")
        if fc := self._fc.get(key):
            t.append(f" · {forecast_detail(fc)}", style="cyan")
        t.append(f" · preset {c['preset']} · {c['device']} · {c['age']} ago")
        if speed(rec):
            t.append(f" · {speed(rec):.1f} steps/s · ETA {fmt_age(eta(rec))}"
                     f" (batch {rec.batch_id}: {fmt_age(batch_eta(self._records.values(), rec.batch_id))})",
                     style="cyan")
        if rec.archived:
            t.append(" · archived", style="magenta")
        if rec.reason:
            t.append(f" · {rec.reason}", style="yellow")
        return t

    def run_of(self, key: str | None) -> str | None:
        """The run of a row (of a group row: the group's first run)."""
        return (self.ids_of(key) or [None])[0] if key else None

    def chosen_for(self, key: str | None) -> list[str]:
        """The marked runs the filter shows, or the run (or the group's runs) of the row ``key``."""
        if vis := self.visible_marks():
            return vis
        return list(self.ids_of(key)) if key else []

    def toggle_mark(self, key: str) -> list[str]:
        """Mark the row's run (or the group's runs), or unmark them when all are marked; the row keys whose mark
        cell changes."""
        ids = self.ids_of(key)
        if all(i in self.marked for i in ids):
            self.marked = [m for m in self.marked if m not in ids]
        else:
            self.marked += [i for i in ids if i not in self.marked]
        return self._touched(key, ids)

    def next_sort(self, cols: list[Column]) -> None:
        order = list(SORTS) + [k for k, _, _ in cols if k.startswith("hp:")]
        i = order.index(self.sort) if self.sort in order else -1
        self.sort = order[(i + 1) % len(order)]
        self.descending = self.sort in DESCENDING_FIRST

    def sort_by(self, key: str) -> None:
        """A column header's sort: by it, or reversed when it is the sort already."""
        key = "age" if key == "run" else key
        if key == self.sort:
            self.descending = not self.descending
        else:
            self.sort, self.descending = key, key in DESCENDING_FIRST

    def next_grouping(self) -> bool:
        """Off → the swept values (seed aside) → each swept parameter alone → off. False: nothing to group by."""
        swept = [k for k in self._hp_auto if k != "seed"]
        options: list[list[str]] = [[]]
        if swept:
            options.append(swept)
            if len(swept) > 1:
                options += [[k] for k in swept]
        i = options.index(self.group_keys) if self.group_keys in options else 0
        self.group_keys = options[(i + 1) % len(options)]
        self.expanded = set()
        return bool(swept)

    def compare_pair(self, cur: str | None, shown: list[str]) -> list[str]:
        """The two marked runs; with one marked, it and the current row; else the current row and the next (two
        group rows compare the groups)."""
        vis = self.visible_marks()
        if len(vis) >= 2:
            return vis[:2]
        if vis and cur and cur != vis[0] and cur not in self.groups:
            return [vis[0], cur]
        if cur and shown.index(cur) + 1 < len(shown):
            nxt = shown[shown.index(cur) + 1]
            if cur in self.groups and nxt not in self.groups:  # an expanded group: the next group
                nxt = next((k for k in shown[shown.index(cur) + 1:] if k in self.groups), nxt)
            return [cur, nxt]
        return [cur] if cur else []

    def filter_keys(self) -> dict[str, list[str]]:
        """What the filter completes: the parameters that vary among the shown runs (short names), the results and
        the fields, each with the values it takes among the runs."""
        recs = list(self._records.values())

        def values(of) -> list[str]:
            return sorted({str(v) for r in recs for v in of(r) if v not in (None, "")}, key=natural)

        keys = {t: values(lambda r, k=k: [param_text(r.params[k])] if k in r.params else [])
                for k, t in short_keys(self._hp_keys).items()}
        fields = {"preset": lambda r: [r.preset], "status": lambda r: [r.status], "tag": run_tags,
                  "device": lambda r: [r.device]}
        return keys | {k: [] for k in RESULTS} | {k: values(fields[k]) if k in fields else [] for k in FIELDS}

    def hides(self, run_ids: list[str]) -> bool:
        """Whether the filter hides any of these runs."""
        known = {r.run_id: r for r in self.rows}
        return bool(self.query_text) and not all(r in known and matches(known[r], self.query_text) for r in run_ids)
