"""Fit a power law to a selection of runs (reports/selection.py) and compare it with the theory.

Shared by ``sparse-tui fit`` / ``sparse-tui theory`` (cli.py) and the console's fitting panel, so that both show the
same numbers. Pure numpy / scipy plus the run store: no torch, no textual.

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
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from sparse_tui.base.numbers import fmt_or
from sparse_tui.base.parse import number
from sparse_tui.reports.selection import Selection, parse_tie, parse_vars, parse_where, select_runs
from sparse_tui.science.fitting import FitError, FitResult, compare_to_theory, fit_power_law, format_comparison
from sparse_tui.science.theory import (
    PAPER_FITS,
    forecast_exponents,
)

__all__ = [
    "FitReport",
    "fit_runs",
    "fit_store",
    "json_safe",
    "TARGETS",
    "Reread",
    "parse_threshold",
    "reread_plateaus",
    "with_time_target",
]

TARGETS = ("plateau_step", "plateau_time")


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
        """The text ``sparse-tui fit`` prints: selection, fit summary, censored runs, theory/paper comparison."""
        res = self.result
        lines = [self.selection.describe()]
        if self.reread is not None:
            lines.append(self.reread.text())
        lines.append(f"fitted: {res.n} run(s) with a plateau; censored (never reached the threshold): {res.n_censored}")
        cols = ", ".join(f"{v} <- {c}" for v, c in res.columns.items() if c != v)
        if cols:
            lines.append(f"columns: {cols}")
        lines += ["", res.summary()]
        if res.bootstrap and res.boot_skipped:
            lines.append(f"  bootstrap: {res.bootstrap} resamples, {res.boot_skipped} skipped (singular design)")
        if res.censored:
            lines += ["", "censored runs (plateau >= their last step; excluded from the least squares):"]
            for c in res.censored:
                lb = _fmt(c.get("lower_bound"), "g")
                pred = _fmt(c.get("predicted"), ".4g")
                flag = "   <- the fitted law predicts an earlier plateau" if c.get("inconsistent") else ""
                lines.append(f"  {c.get('run_id') or '#' + str(c['row'])}  {c.get('label') or ''}  "
                             f"plateau > {lb}  law predicts {pred}{flag}")
        lines.append("")
        pf = PAPER_FITS.get(self.paper) if self.paper else None
        head = "comparison with the forecast sqrt(d)·T/(B·f) (App. A.3.2 / A.4.2; log factor dropped)"
        if pf is not None:
            head += f" and the paper's {pf.figure} fit ({law_text(pf)}, R² = {pf.r2:g}; {pf.setting})"
        lines += [head + ":", format_comparison(self.comparison)]
        if self.paper_note:
            lines.append(f"  no paper law: {self.paper_note}")
        lines += [f"  note: {r['variable']}: {r['forecast_note']}" for r in self.comparison if r.get("forecast_note")]
        return "\n".join(lines)

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


def law_text(pf: Any) -> str:
    """A paper law (``theory.PaperFit``) as the reports write it: "0.55 · n_tokens^0.79 · n_pairs^2.25"."""
    return f"{pf.C:g} · " + " · ".join(f"{k}^{v:g}" for k, v in pf.exponents.items())


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


def fit_runs(selection: Selection, variables: Sequence[str], *,
             target: str = "plateau_step", tie: Sequence[tuple[str, float]] | None = None, bootstrap: int = 0,
             seed: int = 0, paper: str | None = "auto") -> FitReport:
    """Fit ``target = C prod x^beta`` over the finished runs of ``selection`` (``select_runs``,
    ``reread_plateaus``) and compare with the forecast and the paper (``paper``: a key of
    ``theory.PAPER_FITS``, None, or 'auto': the law of the figure-atlas entry that names the runs' preset,
    ``atlas.law_of_presets``, never a guess from names or the model). Raises ``FitError`` with a one-line message."""
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
    return replace(selection, rows=rows, skipped=skipped), Reread(threshold, list(used), list(own), paper_rules,
                                                                  changed=changed, runs=len(rows), notes=notes)


_fmt = partial(fmt_or, missing="—")  # the reports mark a missing number with a dash


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
