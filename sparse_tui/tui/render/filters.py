"""The runs filter (the Runs panel's ``/``, and the Fit and Phase panels' run fields): words that must all occur, and
conditions on a run's results, fields and parameters, after W&B's and wandb-tui's filters (issue 34):

    acc>0.9   lr<1e-3   plateau>=1000   d=16,32 (any of)   preset~fig4 (contains)   seed!=0   status:failed

A condition is ``KEY OP VALUE`` with OP one of ``>= <= != > < = ~``. KEY is a result (``acc``, ``loss``, ``plateau``,
``step``), a field (``preset``, ``status``, ``name``, ``tag``, ``device``, ``id``) or a parameter by its full or short
name (``task.d`` or ``d``; a short name means every parameter it ends). Numbers compare by value (``16`` = ``16.0``);
a run without the key never matches. ``status:X`` and ``is:archived`` are as before; every other word must occur in
the run's id, preset, label, params, tags or note. A condition it cannot read is said in one line (``Query.errors``)
and left out. Pure: no Textual."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Collection, Iterable

from sparse_tui.base.parse import maybe_number
from sparse_tui.base.parse import values as split_values
from sparse_tui.tui.render.runs import COLUMNS, STATUS, Row

OPS = (">=", "<=", "!=", ">", "<", "=", "~")
RESULTS = ("acc", "loss", "plateau", "step")
FIELDS = ("preset", "status", "name", "tag", "device", "id")
_COND = re.compile(r"^([A-Za-z_][\w.]*)(>=|<=|!=|>|<|=|~)(.*)$")


@dataclass(frozen=True)
class Cond:
    key: str  # a result, a field or a parameter key as typed
    op: str
    values: tuple[str, ...]  # '=' / '!=' / '~': any of these
    params: tuple[str, ...] = ()  # the full parameter keys a parameter's name means
    nums: tuple[float | None, ...] = ()  # ``values`` read as numbers once (base/parse.py), not once per run

    def __post_init__(self) -> None:
        if len(self.nums) != len(self.values):
            object.__setattr__(self, "nums", tuple(maybe_number(v) for v in self.values))


@dataclass
class Query:
    words: list[str] = field(default_factory=list)
    conds: list[Cond] = field(default_factory=list)
    archived: bool = False  # is:archived: the archived runs instead of the others
    errors: list[str] = field(default_factory=list)  # the conditions it could not read, each in one line


def param_keys(key: str, params: Iterable[str]) -> tuple[str, ...]:
    """The parameter keys ``key`` names: itself, or those it is the last part(s) of (``d`` -> ``task.d``)."""
    return tuple(k for k in params if k == key or k.endswith("." + key))


def parse(text: str, params: Collection[str]) -> Query:
    """A filter's words and conditions; ``params``: the parameter keys of the runs (conditions on others fail)."""
    q = Query()
    for word in text.split():
        if word.lower() == "is:archived":
            q.archived = True
        elif word.lower().startswith("status:"):
            q.conds.append(Cond("status", "=", (word[7:].lower(),)))
        elif m := _COND.match(word):
            try:
                q.conds.append(_cond(word, *m.groups(), params))
            except ValueError as e:
                q.errors.append(str(e))
        else:
            q.words.append(word.lower())
    return q


def _cond(word: str, key: str, op: str, value: str, params: Collection[str]) -> Cond:
    if not value:
        raise ValueError(f"filter '{word}': no value after {op}")
    keys = () if key in RESULTS or key in FIELDS else param_keys(key, params)
    if not keys and key not in RESULTS and key not in FIELDS:
        raise ValueError(f"filter '{word}': no key '{key}' (a result {'/'.join(RESULTS)}, a field "
                         f"{'/'.join(FIELDS)} or a parameter of the runs; → completes)")
    values = tuple(split_values(value, f"filter '{word[:40]}'")) if op in ("=", "!=", "~") else (value,)
    if op in (">", "<", ">=", "<=") and maybe_number(value) is None:
        raise ValueError(f"filter '{word}': {op} needs a number, not '{value}'")
    return Cond(key, op, values, keys)


def _values(c: Cond, row: Row) -> list[Any]:
    """What a run has for a condition's key (none: it never matches)."""
    if c.params:
        return [row.params[k] for k in c.params if k in row.params]
    if c.key in ("acc", "loss", "plateau"):
        missing, v = row.keys[COLUMNS.index(c.key)]
        return [] if missing else [v]
    if c.key == "step":
        return [row.step]
    if c.key == "tag":
        return list(row.tags)
    return [str(row.keys[STATUS] if c.key == "status" else row.cells[COLUMNS.index({"id": "run"}.get(c.key, c.key))])]


def _holds(c: Cond, v: Any) -> bool:
    x = maybe_number(v)
    if c.op in (">", "<", ">=", "<="):
        y = c.nums[0]
        return x is not None and {">": x > y, "<": x < y, ">=": x >= y, "<=": x <= y}[c.op]
    if c.op == "~":
        return any(s.lower() in str(v).lower() for s in c.values)
    same = any((x is not None and n == x) or s.lower() == str(v).lower() for s, n in zip(c.values, c.nums))
    return same if c.op == "=" else not same


def _holds_for(c: Cond, row: Row) -> bool:
    vals = _values(c, row)
    return bool(vals) and (all(_holds(c, v) for v in vals) if c.op == "!=" else any(_holds(c, v) for v in vals))


def matches(row: Row, query: Query | str) -> bool:
    """Every word occurs in the run's text and every condition holds. A text is parsed first (against the run's own
    parameters, once per text and set of parameter keys, not once per run); one with a condition it cannot read
    matches nothing."""
    if isinstance(query, str):
        query = _parsed(query, frozenset(row.params))
        if query.errors:
            return False
    return all(w in row.text for w in query.words) and all(_holds_for(c, row) for c in query.conds)


@functools.lru_cache(maxsize=32)
def _parsed(text: str, params: frozenset[str]) -> Query:
    return parse(text, params)


def suggest(text: str, keys: dict[str, list[str]]) -> str | None:
    """Completion of the filter's last word (a Textual suggester's answer: the whole text, longer): a key of
    ``keys`` (results, fields, parameters' short names), or after ``KEY=`` / ``KEY~`` / ``KEY,`` a value it takes."""
    head, _, last = text.rpartition(" ")
    if not last:
        return None
    lead = f"{head} " if head else ""
    m = re.match(r"^([A-Za-z_][\w.]*)(>=|<=|!=|>|<|=|~)((?:[^,]*,)*)([^,]*)$", last)
    if m:
        key, op, done, part = m.groups()
        cands = [v for v in keys.get(key, []) if v.lower().startswith(part.lower()) and v not in done.split(",")
                 and v != part]
        return f"{lead}{key}{op}{done}{cands[0]}" if cands else None
    cands = [k for k in keys if k.startswith(last) and k != last]
    return f"{lead}{cands[0]}" if cands else None
