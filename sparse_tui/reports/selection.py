"""Which runs a fit reads (reports/fitreport.py, the console's Fit panel, ``export``): the command-line style
arguments (``--vars``, ``--tie``, ``--where``) parsed, and the runs of a store selected and split by status.

Runs (``select_runs``)
----------------------
Runs come from the run store as rows of the run table (``export.run_row``: ``run_id``, ``status``,
``plateau_step``, ``step``, ``params.task.d``, ``params.train.steps``, ...). They are selected by preset name,
batch id, run ids (or unique prefixes) and ``--where`` filters, then split by status:

* ``finished`` runs are fitted; a finished run without a plateau never emerged within its budget and is
  **censored** (counted and listed by ``fitting.fit_power_law``, never dropped silently);
* every other status (running, queued, failed, diverged, interrupted, cancelled) is skipped and counted.

Filters (``parse_where``): ``KEY=V``, ``KEY!=V``, ``KEY<V``, ``KEY<=V``, ``KEY>V``, ``KEY>=V``; ``KEY=V1,V2`` means any
of the values. KEY is a run-table column (``seed``, ``status``, ``params.task.B``), a dotted config key
(``task.B``, ``model.kind``) or a bare name looked up in the sections (``B``). Values are compared as numbers when
both sides are numbers, else as strings (``true``/``false`` match booleans)."""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from sparse_tui.base.numbers import fmt_plain
from sparse_tui.base.parse import maybe_number, number, values
from sparse_tui.science.fitting import FitError

__all__ = ["Selection", "parse_vars", "parse_tie", "parse_where", "select_runs", "select_rows", "Where"]

_SECTIONS = ("task", "model", "train", "eval", "plateau")


# ---------------------------------------------------------------------------------------------------------------
# Parsing command-line style arguments
# ---------------------------------------------------------------------------------------------------------------


def parse_vars(text: str | Sequence[str]) -> list[str]:
    """``'d,T,B'`` (or a list of such strings) -> ``['d', 'T', 'B']``."""
    items = [text] if isinstance(text, str) else list(text)
    out = [v.strip() for it in items for v in str(it).split(",") if v.strip()]
    if not out:
        raise FitError("--vars: name at least one variable, e.g. --vars d,T")
    return out


def parse_tie(text: str | None) -> list[tuple[str, float]] | None:
    """``'d:0.5,T:1,f:-1'`` -> ``[('d', 0.5), ('T', 1.0), ('f', -1.0)]`` (None for None / empty)."""
    if text is None or not str(text).strip():
        return None
    out = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, k = item.rpartition(":")
        if not sep or not name.strip():
            raise FitError(f"--tie: {item!r} is not VAR:RATIO (e.g. --tie d:0.5,T:1,f:-1)")
        try:
            out.append((name.strip(), float(k)))
        except ValueError:
            raise FitError(f"--tie: ratio {k!r} of {name.strip()!r} is not a number") from None
    return out


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "!=": operator.ne, "<=": operator.le, ">=": operator.ge, "=": operator.eq, "<": operator.lt, ">": operator.gt,
}
# KEY OP VALUE: the value is the rest, stripped after the match (a lazy `(.*?)\s*$` backtracked quadratically over
# a long run of spaces inside the value; issue 45). Numbers are read by base/parse.py.
_WHERE_RE = re.compile(r"^\s*([A-Za-z_][\w./]*)\s*(!=|<=|>=|==|=|<|>)(.*)$", re.DOTALL)


@dataclass(frozen=True)
class Where:
    key: str
    op: str
    values: tuple[Any, ...]

    def __str__(self) -> str:
        values = (str(v).lower() if isinstance(v, bool) else fmt_plain(v) for v in self.values)
        return f"{self.key}{self.op}{','.join(values)}"


def _parse_scalar(text: str) -> Any:
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    for kw in ({"integer": True}, {"infinite": True}):  # 3 stays an int, 0.5 a float; a long text stays a text
        try:
            return number(t, **kw)
        except ValueError:
            pass
    return t


def parse_where(items: Iterable[str] | None) -> list[Where]:
    """``['task.B=2', 'seed<3', 'model.kind=toy,ode']`` -> filters (see the module doc)."""
    out = []
    for it in items or []:
        shown = repr(str(it)) if len(str(it)) <= 60 else repr(f"{str(it)[:40]}…")
        m = _WHERE_RE.match(str(it))
        val = m.group(3).strip() if m else ""
        if not val:
            raise FitError(f"--where {shown}: expected KEY=VALUE (also !=, <, <=, >, >=), e.g. --where task.B=2")
        key, op = m.group(1), m.group(2)
        op = "=" if op == "==" else op
        try:
            parts = values(val, f"--where {shown}") if op in ("=", "!=") else [val]
        except ValueError as e:
            raise FitError(str(e)) from None
        if not parts:
            raise FitError(f"--where {shown}: no value after {op}")
        vals = tuple(_parse_scalar(v) for v in parts)
        if op in ("<", "<=", ">", ">=") and not _is_num(vals[0]):
            raise FitError(f"--where {shown}: {op} needs a number")
        out.append(Where(key, op, vals))
    return out


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _lookup(row: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    """A filter key in a run-table row: exact column, then params.KEY, then a bare name in the config sections."""
    for k in (key, "params." + key):
        if k in row:
            return True, row[k]
    if "." not in key:
        hits = [f"params.{s}.{key}" for s in _SECTIONS if f"params.{s}.{key}" in row]
        if len(hits) == 1:
            return True, row[hits[0]]
        if len(hits) > 1:
            raise FitError(f"--where {key}: ambiguous ({', '.join(h[7:] for h in hits)}); name its section")
    return False, None


def _match(v: Any, w: Where) -> bool:
    if w.op in ("=", "!="):
        hit = any(_equal(v, x) for x in w.values)
        return hit if w.op == "=" else not hit
    if v is None or isinstance(v, bool):
        return False
    fv, fx = maybe_number(v), maybe_number(w.values[0])  # None, never OverflowError, for an int above 1e308
    return fv is not None and fx is not None and _OPS[w.op](fv, fx)


def _equal(v: Any, x: Any) -> bool:
    if isinstance(x, bool) or isinstance(v, bool):
        if isinstance(v, str):
            return v.lower() == str(x).lower()
        return v is not None and bool(v) == x and isinstance(v, bool) == isinstance(x, bool)
    if _is_num(x):
        if v is None or isinstance(v, bool):
            return False
        fv, fx = maybe_number(v), maybe_number(x)
        if fv is None or fx is None:
            return not isinstance(v, str) and v == x  # exact for ints beyond a float's range
        return math.isclose(fv, fx, rel_tol=1e-12)
    return v is not None and str(v) == str(x)


# ---------------------------------------------------------------------------------------------------------------
# Selecting runs
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Selection:
    """Runs picked from the store: ``rows`` (finished, fitted or censored) and the skipped runs by status."""

    rows: list[dict[str, Any]]
    skipped: dict[str, int] = field(default_factory=dict)  # status -> count (not finished)
    matched: int = 0  # runs matching the criteria, whatever their status
    criteria: list[str] = field(default_factory=list)
    presets: list[str] = field(default_factory=list)

    def describe(self) -> str:
        crit = ", ".join(self.criteria) if self.criteria else "all runs"
        s = f"runs: {self.matched} matching ({crit}); {len(self.rows)} finished"
        if self.skipped:
            s += "; skipped " + ", ".join(f"{n} {st}" for st, n in sorted(self.skipped.items()))
        return s

    def to_dict(self) -> dict[str, Any]:
        return {"matched": self.matched, "finished": len(self.rows), "skipped": dict(self.skipped),
                "criteria": list(self.criteria), "presets": list(self.presets),
                "run_ids": [r.get("run_id") for r in self.rows]}


def select_rows(rows: Iterable[Mapping[str, Any]], *, where: Sequence[Where] | Sequence[str] = (),
                criteria: Sequence[str] = ()) -> Selection:
    """Filter run-table rows by ``where`` and split them by status (finished -> ``rows``, others counted)."""
    ws = [w if isinstance(w, Where) else parse_where([w])[0] for w in where]
    kept: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    matched = 0
    known = {w.key: False for w in ws}
    rows = list(rows)
    for r in rows:
        for w in ws:
            found, v = _lookup(r, w.key)
            known[w.key] |= found
            if not (found and _match(v, w)) and not (not found and w.op == "!="):
                break
        else:  # every filter holds
            matched += 1
            st = r.get("status") or "finished"
            if st == "finished":
                kept.append(dict(r))
            else:
                skipped[st] = skipped.get(st, 0) + 1
    if rows:
        for w in ws:
            if not known[w.key] and not any(_lookup(r, w.key)[0] for r in rows):
                raise FitError(f"--where {w}: no column {w.key!r} in the run table (e.g. task.d, model.kind, seed)")
    presets = sorted({str(r.get("preset")) for r in kept if r.get("preset") is not None})
    crit = list(criteria) + [f"where {w}" for w in ws]
    return Selection(rows=kept, skipped=skipped, matched=matched, criteria=crit, presets=presets)


def select_runs(store: Any, *, preset: str | None = None, batch: str | None = None,
                run_ids: Sequence[str] = (), where: Sequence[Where] | Sequence[str] = ()) -> Selection:
    """Runs of a ``store.RunStore`` picked by preset name, batch id (or unique prefix), run ids (or unique
    prefixes) and ``where`` filters; see ``select_rows``. Raises ``FitError`` when a run id is unknown."""
    from sparse_tui.export.tables import run_row
    from sparse_tui.store import StoreError

    criteria = []
    if batch:  # the store's one resolver of ids and prefixes (store.find)
        try:
            batch = store.find(batch, ("batch",), what="--batch")[1]
        except StoreError as e:
            raise FitError(str(e)) from None
    if run_ids:
        recs = []
        for rid in run_ids:
            try:
                recs.append(store.get(rid))
            except StoreError as e:
                raise FitError(str(e)) from None
        criteria.append(f"{len(run_ids)} run id(s)")
        if preset:
            recs = [r for r in recs if r.preset == preset]
        store.reap()
    else:
        recs = store.runs(preset=preset)
    if batch:
        recs = [r for r in recs if r.batch_id == batch]
    if preset:
        criteria.insert(0, f"preset {preset}")
    if batch:
        criteria.append(f"batch {batch}")
    unique: dict[str, Any] = {}  # a run named twice counts once
    for r in recs:
        unique.setdefault(r.run_id, r)
    rows = [run_row(r, store) for r in unique.values()]
    return select_rows(rows, where=where, criteria=criteria)
