"""Select runs, fit a power law, compare it with the theory; and the theory reports (one point, a grid).

Shared by ``sparse-tui fit`` / ``sparse-tui theory`` (cli.py) and the console's fitting panel, so that both show the
same numbers. Pure numpy / scipy plus the run store: no torch, no textual.

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
both sides are numbers, else as strings (``true``/``false`` match booleans).

Targets: ``plateau_step`` (default) or ``plateau_time`` = plateau_step x train.lr (gradient-flow time for the toy
model and ode runs with a constant schedule: time = step x lr, models/ode.py).

Another threshold (``reread_plateaus``, ``sparse-tui fit --threshold X``)
------------------------------------------------------------------------
Each finished run's plateau is re-read from its stored curve of the metric its preset's rule watches
(``plateau.metric``) at the absolute value X, with the training loop's rule (``training.plateau``): the first logged
evaluation at or below X (at or above for an ``above`` rule: accuracies). Nothing is retrained. A run whose curve
never reaches X is censored at its last logged evaluation, which is earlier than its budget for a run stopped
``plateau.stop_after`` steps after its preset's threshold: a threshold stricter than the preset's cannot be read
past that point. The report names X beside the preset's rule and the paper's (App. D.1, from the figure atlas).
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from sparse_tui.base.numbers import fmt_or, fmt_plain
from sparse_tui.base.parse import maybe_number, number, values
from sparse_tui.science.fitting import FitError, FitResult, compare_to_theory, fit_power_law, format_comparison
from sparse_tui.science.theory import (
    PAPER_FITS,
    forecast_exponents,
)

__all__ = [
    "Selection",
    "FitReport",
    "parse_vars",
    "parse_tie",
    "parse_where",
    "select_runs",
    "select_rows",
    "fit_runs",
    "fit_store",
    "format_fit_report",
    "json_safe",
    "Where",
    "TARGETS",
    "Reread",
    "parse_threshold",
    "reread_plateaus",
    "with_time_target",
]

_SECTIONS = ("task", "model", "train", "eval", "plateau")
TARGETS = ("plateau_step", "plateau_time")


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
        ok = True
        for w in ws:
            found, v = _lookup(r, w.key)
            known[w.key] |= found
            if not (found and _match(v, w)) and not (not found and w.op == "!="):
                ok = False
                break
        if not ok:
            continue
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
        if batch:
            recs = [r for r in recs if r.batch_id == batch]
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


# ---------------------------------------------------------------------------------------------------------------
# Fitting a selection
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class FitReport:
    """A fit over selected runs with its theory comparison."""

    selection: Selection
    result: FitResult
    comparison: list[dict[str, Any]]
    paper: str | None  # key of theory.PAPER_FITS compared with, or None
    paper_note: str = ""  # why no paper law is compared (``atlas.law_of_presets``), when none is
    reread: Reread | None = None  # the plateaus were re-read at another threshold (``reread_plateaus``)

    def text(self) -> str:
        return format_fit_report(self)

    def to_dict(self) -> dict[str, Any]:
        res = self.result.to_dict()
        pf = PAPER_FITS.get(self.paper) if self.paper else None
        return json_safe({
            "selection": self.selection.to_dict(),
            "fit": res,
            "formula": self.result.formula(),
            "comparison": self.comparison,
            "paper": None if pf is None else {"key": pf.key, "figure": pf.figure, "setting": pf.setting, "C": pf.C,
                                              "exponents": pf.exponents, "r2": pf.r2},
            "forecast": forecast_exponents(),
            "paper_note": self.paper_note,
            "threshold": None if self.reread is None else self.reread.to_dict(),
        })


def with_time_target(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with ``plateau_time`` = plateau step × learning rate (None without either)."""
    out = []
    for r in rows:
        r = dict(r)
        ps, lr = r.get("plateau_step"), r.get("params.train.lr")
        if ps is None or lr is None or (isinstance(ps, float) and math.isnan(ps)):
            r["plateau_time"] = None
        else:
            r["plateau_time"] = float(ps) * float(lr)
        out.append(r)
    return out


def _varying_params(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    vals: dict[str, set] = {}
    for r in rows:
        for k, v in r.items():
            if k.startswith("params.") and not k.endswith(".seed"):
                vals.setdefault(k[len("params."):], set()).add(repr(v))
    return sorted(k for k, s in vals.items() if len(s) > 1)


def fit_runs(selection: Selection | Sequence[Mapping[str, Any]], variables: Sequence[str], *,
             target: str = "plateau_step", tie: Sequence[tuple[str, float]] | None = None, bootstrap: int = 0,
             seed: int = 0, paper: str | None = "auto") -> FitReport:
    """Fit ``target = C prod x^beta`` over the finished runs of ``selection`` (a ``Selection`` or run-table rows,
    which are then filtered to finished runs) and compare with the forecast and the paper (``paper``: a key of
    ``theory.PAPER_FITS``, None, or 'auto': the law of the figure-atlas entry that names the runs' preset,
    ``atlas.law_of_presets``, never a guess from names or the model). Raises ``FitError`` with a one-line message."""
    if not isinstance(selection, Selection):
        selection = select_rows(selection)
    if selection.matched == 0:
        raise FitError("no runs match the selection" + (f" ({', '.join(selection.criteria)})"
                                                         if selection.criteria else ""))
    if not selection.rows:
        raise FitError(f"no finished runs to fit: {selection.describe()}")
    if target not in TARGETS and not any(target in r for r in selection.rows):
        raise FitError(f"unknown target {target!r}: use {' or '.join(TARGETS)}")
    if paper not in (None, "auto") and paper not in PAPER_FITS:
        raise FitError(f"unknown paper fit {paper!r}; one of {', '.join(PAPER_FITS)} (or none)")
    rows = with_time_target(selection.rows) if target == "plateau_time" else selection.rows
    try:
        res = fit_power_law(rows, list(variables), target=target, tie=tie, bootstrap=bootstrap, seed=seed)
    except FitError as e:
        msg = str(e)
        if msg.startswith("unknown variable"):
            vary = _varying_params(rows)
            if vary:
                msg += "; varying over these runs: " + ", ".join(vary[:12]) + (" ..." if len(vary) > 12 else "")
        raise FitError(msg) from None
    for c in res.censored:  # name the censored runs (fit_power_law knows them by row index)
        r = rows[c["row"]]
        c["run_id"] = r.get("run_id")
        c["label"] = r.get("label")
    note = ""
    if paper == "auto":
        from sparse_tui.atlas import law_of_presets

        paper, note = law_of_presets(list(selection.presets))
    cmp_rows = compare_to_theory(res, paper=paper)
    return FitReport(selection=selection, result=res, comparison=cmp_rows, paper=paper, paper_note=note)


def fit_store(store: Any, variables: str | Sequence[str] = "d,T", *, run_ids: Sequence[str] = (),
              preset: str | None = None, batch: str | None = None, where: Iterable[str] = (),
              tie: str | None = None, bootstrap: int = 0, seed: int = 0, target: str = "plateau_step",
              paper: str | None = "auto", threshold: float | str | None = None) -> FitReport:
    """``sparse-tui fit`` from its arguments as typed (``variables`` 'd,T', ``tie`` 'd:0.5,T:1', ``where``
    ['task.B=2'], ``paper`` 'auto' / 'none' / a key, ``threshold`` None or an absolute value: re-read the plateaus
    there, ``reread_plateaus``): parse them, select the runs of ``store`` and fit. The one way to fit runs of a
    store: the CLI command and the console's Fit panel both call this, so they show the same numbers.
    Raises ``FitError`` with a one-line message."""
    if bootstrap < 0:
        raise FitError("--bootstrap: must be >= 0")
    x = parse_threshold(threshold)
    sel = select_runs(store, preset=preset, batch=batch, run_ids=list(run_ids or []), where=parse_where(where))
    reread = None
    if x is not None:
        sel, reread = reread_plateaus(store, sel, x)
    try:
        rep = fit_runs(sel, parse_vars(variables), target=target, tie=parse_tie(tie), bootstrap=bootstrap,
                       seed=seed, paper=None if paper in (None, "none") else paper)
        rep.reread = reread
        return rep
    except (FitError, ValueError) as e:
        names = list(sel.presets)
        if preset or batch or run_ids or len(names) < 2:
            raise
        # a bare `sparse-tui fit` on a store of several presets: their runs rarely share the variables
        shown = ", ".join(names[:6]) + (f", … ({len(names)} in all)" if len(names) > 6 else "")
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise FitError(f"{first}: the selected runs come from {len(names)} presets ({shown}); "
                       f"fit one with --preset NAME") from None


# ---------------------------------------------------------------------------------------------------------------
# Re-reading the plateaus at another threshold (no retraining)
# ---------------------------------------------------------------------------------------------------------------


def parse_threshold(value: float | str | None) -> float | None:
    """``--threshold X`` as typed: None, or a positive finite number (raises ``FitError`` in one line)."""
    if value is None:
        return None
    try:  # base/parse.py: the one parser of typed numbers
        x = float(number(str(value), "--threshold", infinite=True))
    except ValueError:
        if str(value).strip().lower() == "nan":
            raise FitError("--threshold: must be a positive number, got nan") from None
        raise FitError(f"--threshold: {str(value)[:40]!r} is not a number (an absolute value of the plateau "
                       "metric, e.g. --threshold 0.4)") from None
    if not math.isfinite(x) or x <= 0:
        raise FitError(f"--threshold: must be a positive number, got {str(value)[:40]}")
    return x


@dataclass
class Reread:
    """Plateaus re-read from the stored curves at ``value`` (``reread_plateaus``): the rules applied, the presets'
    own rules and the paper's (App. D.1, from the figure atlas), and how many plateaus moved."""

    value: float
    used: list[str]  # the rules applied, e.g. 'test/loss <= 0.4'
    preset_rules: list[str]  # the runs' presets' rules, e.g. 'test/loss <= 0.1'
    paper_rules: list[str]  # the paper's thresholds of the runs' figures (atlas); empty: none known
    changed: int = 0  # runs whose plateau differs from the stored one (censored <-> not included)
    runs: int = 0  # runs re-read
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        def rel(rules: list[str]) -> str:
            return "the same as" if rules == self.used else "not"

        paper = (f"{rel(self.paper_rules)} the paper's ({'; '.join(self.paper_rules)}, App. D.1)"
                 if self.paper_rules else "the paper's threshold for these runs is not in the figure atlas")
        return (f"threshold: plateaus re-read from the stored curves at {'; '.join(self.used)} (--threshold "
                f"{self.value:g}), {rel(self.preset_rules)} the preset's ({'; '.join(self.preset_rules)}); {paper}; "
                f"{self.changed} of {self.runs} plateau(s) differ from the stored ones"
                + "".join(f"; {n}" for n in self.notes))

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "used": list(self.used), "preset": list(self.preset_rules),
                "paper": list(self.paper_rules), "changed": self.changed, "runs": self.runs,
                "notes": list(self.notes)}


def _rule(row: Mapping[str, Any]) -> tuple[str, str, float]:
    """(metric, mode, value) of a run-table row's ``[plateau]`` rule (the preset's defaults where a row lacks one)."""
    keys = ("metric", "mode", "value")
    got = [row.get(f"params.plateau.{k}") for k in keys]
    if any(v is None for v in got):
        from sparse_tui.presets.schema import PlateauConfig

        dflt = PlateauConfig()
        got = [getattr(dflt, k) if v is None else v for k, v in zip(keys, got)]
    return str(got[0]), str(got[1]), float(got[2])


def reread_plateaus(store: Any, selection: Selection, threshold: float,
                    paper: Sequence[Any] | None = None) -> tuple[Selection, Reread]:
    """``selection`` with each finished run's ``plateau_step`` re-read from its stored curve at the absolute
    ``threshold`` (see the module doc), and what was done (``Reread``). A run with no stored curve of its metric is
    moved to ``skipped``. ``paper``: the paper's thresholds (``atlas.Threshold``) to name; default: those of the
    atlas entries of the runs' presets."""
    from sparse_tui.atlas import Threshold, entries_of_preset
    from sparse_tui.training.plateau import plateau_step

    rows: list[dict[str, Any]] = []
    skipped = dict(selection.skipped)
    used: dict[str, None] = {}  # the rules' texts, in order, once each
    own: dict[str, None] = {}
    changed = 0
    for r in selection.rows:
        metric, mode, value = _rule(r)
        direction = "above" if mode == "above" else "below"
        steps, vals = store.metrics(str(r["run_id"]), [metric]).get(metric, ([], []))
        if not steps:
            key = f"no stored {metric} curve"
            skipped[key] = skipped.get(key, 0) + 1
            continue
        if metric.rsplit("/", 1)[-1].startswith("acc") and not 0 < threshold <= 1:
            raise FitError(f"--threshold: {metric} is an accuracy, it lies in [0, 1]; got {threshold:g}")
        r = dict(r)
        new = plateau_step(steps, vals, mode=direction, value=threshold)
        if new is not None and new <= 0:
            raise FitError(f"--threshold {threshold:g}: run {r['run_id']} is past it at its first evaluation "
                           f"({metric} {'>=' if direction == 'above' else '<='} {threshold:g} at step 0), a plateau "
                           "of 0 steps; choose a value the curves cross later")
        changed += new != r.get("plateau_step")
        r["plateau_step"] = new
        r["last_step"] = steps[-1]  # a censored run's plateau is only known to lie beyond its last evaluation
        rows.append(r)
        used[Threshold(metric, direction, threshold).text()] = None
        own[Threshold(metric, mode, value).text()] = None
    if paper is None:
        paper = [e.threshold for p in selection.presets for e in entries_of_preset(p) if e.threshold is not None]
    paper_rules = list(dict.fromkeys(t.text() for t in paper))
    notes = []
    grids = sorted({r.get("params.eval.every") for r in rows if r.get("params.model.kind") == "ode"} - {None})
    if grids:  # models/ode.py locates the crossing on the integrator's dense output; the store keeps the grid only
        notes.append("ode runs: the stored plateaus are the flow's exact crossings, the re-read ones lie on the "
                     f"evaluation grid (every {', '.join(f'{g:g}' for g in grids)} steps)")
    sel = Selection(rows=rows, skipped=skipped, matched=selection.matched, criteria=list(selection.criteria),
                    presets=list(selection.presets))
    return sel, Reread(threshold, list(used), list(own), paper_rules, changed=changed, runs=len(rows), notes=notes)


_fmt = partial(fmt_or, missing="—")  # the reports mark a missing number with a dash


def format_fit_report(rep: FitReport) -> str:
    """The text ``sparse-tui fit`` prints: selection, fit summary, censored runs, theory/paper comparison."""
    res = rep.result
    lines = [rep.selection.describe()]
    if rep.reread is not None:
        lines.append(rep.reread.text())
    lines.append(f"fitted: {res.n} run(s) with a plateau; censored (never reached the threshold): {res.n_censored}")
    cols = ", ".join(f"{v} <- {c}" for v, c in res.columns.items() if c != v)
    if cols:
        lines.append(f"columns: {cols}")
    lines.append("")
    lines.append(res.summary())
    if res.bootstrap and res.boot_skipped:
        lines.append(f"  bootstrap: {res.bootstrap} resamples, {res.boot_skipped} skipped (singular design)")
    if res.censored:
        lines.append("")
        lines.append("censored runs (plateau >= their last step; excluded from the least squares):")
        for c in res.censored:
            lb = _fmt(c.get("lower_bound"), "g")
            pred = _fmt(c.get("predicted"), ".4g")
            flag = "   <- the fitted law predicts an earlier plateau" if c.get("inconsistent") else ""
            lines.append(f"  {c.get('run_id') or '#' + str(c['row'])}  {c.get('label') or ''}  "
                         f"plateau > {lb}  law predicts {pred}{flag}")
    lines.append("")
    pf = PAPER_FITS.get(rep.paper) if rep.paper else None
    head = "comparison with the forecast sqrt(d)·T/(B·f) (App. A.3.2 / A.4.2; log factor dropped)"
    if pf is not None:
        expo = " · ".join(f"{k}^{v:g}" for k, v in pf.exponents.items())
        head += f" and the paper's {pf.figure} fit ({pf.C:g} · {expo}, R² = {pf.r2:g}; {pf.setting})"
    lines.append(head + ":")
    lines.append(format_comparison(rep.comparison))
    if rep.paper_note:
        lines.append(f"  no paper law: {rep.paper_note}")
    notes = [r["variable"] + ": " + r["forecast_note"] for r in rep.comparison if r.get("forecast_note")]
    for n in notes:
        lines.append(f"  note: {n}")
    return "\n".join(lines)


def json_safe(obj: Any) -> Any:
    """NaN / inf -> None, tuples -> lists, numpy scalars -> Python numbers (strict JSON)."""
    if isinstance(obj, Mapping):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
