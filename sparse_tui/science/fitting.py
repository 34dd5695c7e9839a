"""Power-law fits of the plateau length (paper 002_cc8574166552f4e6.txt, App. D.2, Eqs. 22-23).

    T_plateau = C * prod_i x_i ** beta_i      fitted as      log T_plateau = log C + sum_i beta_i log x_i

by ordinary least squares on the runs of a run table (``fit_power_law``). Pure numpy / scipy.

Rows
----
A row is one run: a dict with flat dotted keys (``params.task.d``, ``task.d``) or nested dicts (flattened here), and
the target (default ``plateau_step``). Seeds are repeated measurements: simply more rows. A pandas DataFrame is
accepted too (``to_dict('records')``).

Variables
---------
Named like run-table columns: ``'task.d'``, ``'params.task.d'`` or the bare ``'d'`` (looked up in the sections task,
model, train, eval, plateau; a bare name found in two sections with different values is an error). Examples: ``d``,
``T``, ``B``, ``n_tokens``, ``n_pairs``, ``model.d_model``, ``train.lr``, ``model.n_heads``, ``model.n_layers``.
Derived variables:

* ``'f'`` = f(p, d) = sqrt(p^2 d + (1-p)^2) from the run's p and d (Eq. 22; App. A.4.2);
* ``'X/Y'`` = X / Y for any two variables, e.g. ``'T/B'`` (Eq. 22).

Censoring
---------
A run whose target is missing, None or NaN never left the plateau (or never reached its threshold) within its
budget. Such runs are **excluded from the least squares and counted** (``n_censored``), never dropped silently.
Their plateau is at least their last step, so for each one ``censored`` records that lower bound (from
``steps_done`` / ``last_step`` / ``train.steps`` when present) and whether the fitted law predicts a value below it
(``n_censored_inconsistent``): such runs say the law under-predicts the slowest settings. Excluding censored runs
biases the exponents of the variables that make runs slow towards smaller values.

Ties
----
``tie=[('d', 0.5), ('T', 1.0), ('f', -1.0)]`` fits one shared scale s with exponents 0.5 s, 1.0 s and -1.0 s (the
paper's Fig. 2 right fit, 2 alpha = beta = -gamma in Eq. 22, is s = 1.02). Tied variables need not be listed in
``variables``; variables listed there but not tied are fitted freely. The scale, its standard error and interval are
``tie_scale``, ``tie_scale_stderr``, ``tie_scale_ci``; the tied exponents are reported with intervals k_i x that of s.

Intervals
---------
95% two-sided Student-t intervals from the OLS covariance s^2 (X'X)^-1 with n - k degrees of freedom (n runs used,
k parameters including log C). The prefactor C = exp(log C) has the exponentiated interval of log C.
``bootstrap=N`` adds percentile intervals from N resamples of the used runs (with replacement; resamples where the
design is singular are skipped and counted).

Errors
------
``FitError`` (a ValueError with a one-line message) for unknown variables, non-numeric or non-positive values,
too few runs (need at least k + 1, i.e. one more than the number of fitted parameters including log C), constant
variables and collinear designs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from scipy.special import stdtrit

from sparse_tui.science.theory import PAPER_FITS, PaperFit, f_rep, forecast_exponents

_SECTIONS = ("task", "model", "train", "eval", "plateau")
_LOWER_BOUND_KEYS = ("steps_done", "last_step", "summary.steps_done", "train.steps", "params.train.steps")


class FitError(ValueError):
    """A problem with a fit request; the message is one line."""


# ---------------------------------------------------------------------------------------------------------------
# Rows and variables
# ---------------------------------------------------------------------------------------------------------------


def flat_rows(rows: Any) -> list[dict[str, Any]]:
    """The fit's rows (a list of dicts or a DataFrame) flattened to dotted keys (``params.task.d``)."""
    from sparse_tui.base.dotted import flatten

    if hasattr(rows, "to_dict") and not isinstance(rows, Mapping):
        rows = rows.to_dict("records")
    if isinstance(rows, Mapping):
        raise FitError("rows must be a list of dicts (one per run), not a single dict")
    out = []
    for r in rows:
        if not isinstance(r, Mapping):
            raise FitError(f"each row must be a dict, got {type(r).__name__}")
        out.append(flatten(r))
    return out


def short_name(name: str) -> str:
    """'params.task.d' -> 'd'; 'model.n_heads' -> 'n_heads'; derived names ('T/B', 'f') unchanged in form."""
    if "/" in name:
        return "/".join(short_name(p) for p in name.split("/"))
    if name.startswith("params."):
        name = name[len("params."):]
    parts = name.split(".")
    if len(parts) == 2 and parts[0] in _SECTIONS:
        return parts[1]
    return name


def _candidates(name: str) -> list[list[str]]:
    """Groups of keys to try, in order; within a group, several matches must agree."""
    if name.startswith("params."):
        return [[name, name[len("params."):]]]
    if "." in name:
        return [[name, "params." + name]]
    return [[name, "params." + name], [f"{pre}{sec}.{name}" for sec in _SECTIONS for pre in ("params.", "")]]


class Resolver:
    """Looks a variable up in a row, remembering which column it came from."""

    def __init__(self, rows: list[dict[str, Any]]):
        self.rows = rows
        self.columns: dict[str, str] = {}

    def _raw(self, row: dict[str, Any], name: str, i: int) -> tuple[bool, Any]:
        for group in _candidates(name):
            found = [(k, row[k]) for k in group if k in row]
            if not found:
                continue
            sections = {k.replace("params.", "").split(".")[0] for k, _ in found}
            vals = {repr(v) for _, v in found}
            if len(vals) > 1 and len(sections) > 1:
                keys = ", ".join(k for k, _ in found)
                raise FitError(f"variable {name!r} is ambiguous in row {i} ({keys}): name its section, "
                               f"e.g. 'task.{name}'")
            self.columns.setdefault(name, found[0][0])
            return True, found[0][1]
        return False, None

    def known(self, name: str) -> bool:
        if name == "f":
            return self.known("p") and self.known("d")
        if any(self._raw(r, name, i)[0] for i, r in enumerate(self.rows)):
            return True
        if "/" in name:
            a, b = name.split("/", 1)
            return self.known(a) and self.known(b)
        return False

    def value(self, row: dict[str, Any], name: str, i: int) -> float:
        if name == "f":
            p, d = self.value(row, "p", i), self.value(row, "d", i)
            self.columns["f"] = f"f({self.columns.get('p', 'p')}, {self.columns.get('d', 'd')})"
            return float(f_rep(p, d))
        ok, v = self._raw(row, name, i)
        if not ok and "/" in name:
            a, b = name.split("/", 1)
            va, vb = self.value(row, a, i), self.value(row, b, i)
            if vb == 0:
                raise FitError(f"variable {name!r}: division by zero in row {i}")
            self.columns.setdefault(name, f"{self.columns.get(a, a)} / {self.columns.get(b, b)}")
            return va / vb
        if not ok:
            raise FitError(f"variable {name!r} missing in row {i}")
        return _number(v, name, i)


def _number(v: Any, name: str, i: int) -> float:
    if isinstance(v, bool):
        raise FitError(f"variable {name!r} is boolean in row {i}; a power law needs positive numbers")
    try:
        return float(v)
    except (TypeError, ValueError):
        raise FitError(f"variable {name!r} is not a number in row {i} ({v!r})") from None


def is_missing(v: Any) -> bool:
    """None, NaN: a target the run did not reach."""
    if v is None:
        return True
    try:
        return math.isnan(float(v))
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------------------------------------------------------
# Result
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class FitResult:
    """A fitted power law T = C prod x_i^beta_i (App. D.2). Dicts are keyed by the variable names as given."""

    target: str
    variables: list[str]  # all variables of the law, free then tied
    exponents: dict[str, float]
    stderr: dict[str, float]
    ci: dict[str, tuple[float, float]]  # 95% t-intervals
    log_C: float
    log_C_stderr: float
    C: float
    C_ci: tuple[float, float]
    r2: float
    n: int  # runs used in the least squares
    n_censored: int  # runs with no plateau (excluded, counted)
    dof: int
    residual_std: float  # of log target
    tie: list[tuple[str, float]] | None = None
    tie_scale: float | None = None
    tie_scale_stderr: float | None = None
    tie_scale_ci: tuple[float, float] | None = None
    bootstrap: int = 0
    boot_ci: dict[str, tuple[float, float]] | None = None  # exponents, plus 'C' and (if tied) 'scale'
    boot_skipped: int = 0
    censored: list[dict[str, Any]] = field(default_factory=list)  # {row, lower_bound, predicted, inconsistent}
    n_censored_inconsistent: int = 0
    columns: dict[str, str] = field(default_factory=dict)  # variable -> column it was read from
    model_kind: str | None = None  # the runs' model.kind when they all share one
    notes: list[str] = field(default_factory=list)

    predict = PaperFit.predict  # C prod x_i^beta_i for keyword values of the variables (exponents: in their order)

    def formula(self, digits: int = 2) -> str:
        parts = [f"{self.C:.{digits}f}"]
        for v in self.variables:
            name = f"({v})" if "/" in v else v
            parts.append(f"{name}^{self.exponents[v]:.{digits}f}")
        return f"{self.target} = " + " · ".join(parts)

    def summary(self) -> str:
        lines = [f"{self.formula()}   (R² = {self.r2:.4f}, n = {self.n}, censored = {self.n_censored})"]
        for v in self.variables:
            lo, hi = self.ci[v]
            extra = ""
            if self.boot_ci and v in self.boot_ci:
                b = self.boot_ci[v]
                extra = f"   bootstrap [{b[0]:.3f}, {b[1]:.3f}]"
            lines.append(f"  {v:>12}: {self.exponents[v]:+.3f} ± {self.stderr[v]:.3f}   "
                         f"95% [{lo:.3f}, {hi:.3f}]{extra}")
        lines.append(f"  {'C':>12}: {self.C:.4g}   95% [{self.C_ci[0]:.4g}, {self.C_ci[1]:.4g}]")
        if self.tie:
            lines.append(f"  tied scale s = {self.tie_scale:.3f} ± {self.tie_scale_stderr:.3f} over "
                         + ", ".join(f"{k}·s for {v}" for v, k in self.tie))
        if self.n_censored:
            lines.append(f"  {self.n_censored} run(s) never reached the threshold: excluded from the fit"
                         + (f"; {self.n_censored_inconsistent} of them sit above the fitted law's prediction"
                            if self.n_censored_inconsistent else ""))
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------------------------------
# Fitting
# ---------------------------------------------------------------------------------------------------------------


def _ols(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ coef
    return coef, resid, float(resid @ resid)


def _parse_tie(tie: Any) -> list[tuple[str, float]] | None:
    if tie is None:
        return None
    if isinstance(tie, Mapping):
        tie = list(tie.items())
    out = []
    try:
        for name, k in tie:
            out.append((str(name), float(k)))
    except (TypeError, ValueError):
        raise FitError("tie must be a list of (variable, ratio) pairs, e.g. [('d', 0.5), ('T', 1.0)]") from None
    if len(out) < 2:
        raise FitError("tie needs at least two (variable, ratio) pairs")
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise FitError("tie names a variable twice")
    if any(k == 0 or not math.isfinite(k) for _, k in out):
        raise FitError("tie ratios must be finite and non-zero")
    return out


def fit_power_law(
    rows: Any,
    variables: Sequence[str],
    target: str = "plateau_step",
    tie: Sequence[tuple[str, float]] | Mapping[str, float] | None = None,
    bootstrap: int = 0,
    seed: int = 0,
) -> FitResult:
    """Fit log target = log C + sum beta_i log x_i by least squares over the runs in ``rows`` (see module doc): the
    request checked (``_variables``, ``_target_columns``), the runs split into used and censored (``_split``), the
    design (``_design``), the least squares with t-intervals (``_least_squares``), the bootstrap (``_bootstrap``) and
    the censored runs against the law (``_judge_censored``)."""
    rows = flat_rows(rows)
    tie_l = _parse_tie(tie)
    free, allvars = _variables(variables, tie_l)
    if not rows:
        raise FitError("no runs to fit")
    res = Resolver(rows)
    tcols = _target_columns(res, rows, allvars, target)
    used_x, used_y, censored = _split(rows, res, allvars, target, tcols)
    X, ly = _design(used_x, used_y, free, tie_l, allvars, n_censored=len(censored))
    fit = _least_squares(X, ly, free, tie_l)
    boot = _bootstrap(X, ly, free, tie_l, bootstrap, seed)
    n_incons = _judge_censored(censored, rows, res, allvars, fit["log_C"], fit["exponents"])
    kinds = {r.get("params.model.kind", r.get("model.kind")) for r in rows}
    kinds.discard(None)
    notes = []
    if censored:
        notes.append(f"{len(censored)} censored run(s) excluded from the least squares (their plateau is only "
                     "bounded below); exponents of variables that slow runs down are biased low")
    if fit["dof"] < 3:
        notes.append(f"only {fit['dof']} residual degree(s) of freedom: intervals are wide")
    return FitResult(
        target=target, variables=allvars, **fit, n_censored=len(censored), tie=tie_l, bootstrap=int(bootstrap or 0),
        **boot, censored=censored, n_censored_inconsistent=n_incons, model_kind=next(iter(kinds)) if len(kinds) == 1
        else None, columns={v: res.columns.get(v, v) for v in allvars}, notes=notes,
    )


def _variables(variables: Sequence[str], tie_l: list[tuple[str, float]] | None) -> tuple[list[str], list[str]]:
    """The free variables, and all of the law's (free, then tied)."""
    variables = [str(v) for v in variables]
    if len(set(variables)) != len(variables):
        raise FitError("a variable is listed twice")
    tied_names = [n for n, _ in tie_l] if tie_l else []
    free = [v for v in variables if v not in tied_names]
    if not free + tied_names:
        raise FitError("no variables to fit")
    return free, free + tied_names


def _target_columns(res: Resolver, rows: list[dict[str, Any]], allvars: list[str], target: str) -> list[str]:
    """Where the target may be read in a row; FitError for a variable or a target the run table does not have."""
    for v in allvars:
        if not res.known(v):
            raise FitError(f"unknown variable {v!r}: not a column of the run table"
                           + (" (f needs p and d)" if v == "f" else ""))
    tcols = [target, "params." + target, "summary." + target]
    if not any(any(c in r for c in tcols) for r in rows):
        raise FitError(f"unknown target {target!r}: not a column of the run table")
    return tcols


def _split(rows: list[dict[str, Any]], res: Resolver, allvars: list[str], target: str, tcols: list[str]):
    """The variables and targets of the runs with a target, and the censored runs (no target: never left the
    plateau), each with the lower bound of its plateau when a row says how far it ran."""
    used_x: list[list[float]] = []
    used_y: list[float] = []
    censored: list[dict[str, Any]] = []
    for i, r in enumerate(rows):
        tv = next((r[c] for c in tcols if c in r), None)
        if is_missing(tv):
            censored.append({"row": i, "lower_bound": _lower_bound(r), "predicted": None, "inconsistent": False,
                             "status": r.get("status")})
            continue
        y = _number(tv, target, i)
        if y <= 0:
            raise FitError(f"target {target!r} is {y:g} in row {i}: a power law needs positive values")
        xs = []
        for v in allvars:
            x = res.value(r, v, i)
            if not x > 0 or not math.isfinite(x):
                raise FitError(f"variable {v!r} is {x:g} in row {i}: a power law needs positive values"
                               + (" (use 'f' for p)" if short_name(v) == "p" else ""))
            xs.append(x)
        used_x.append(xs)
        used_y.append(y)
    return used_x, used_y, censored


def _lower_bound(row: dict[str, Any]) -> float | None:
    for k in _LOWER_BOUND_KEYS:
        if k in row and not is_missing(row[k]):
            try:
                return float(row[k])
            except (TypeError, ValueError):
                pass
    return None


def _design(used_x: list[list[float]], used_y: list[float], free: list[str], tie_l: list[tuple[str, float]] | None,
            allvars: list[str], n_censored: int) -> tuple[np.ndarray, np.ndarray]:
    """The least-squares design [1, log x_free..., (tied combination)] and log y; FitError when it cannot be fitted
    (too few runs, a constant variable or tied combination, collinear variables)."""
    n = len(used_y)
    k = 1 + len(free) + (1 if tie_l else 0)
    if n < k + 1:
        raise FitError(f"too few runs with a plateau: {n} for {k} parameters (need at least {k + 1})"
                       + (f"; {n_censored} censored" if n_censored else ""))
    LX = np.log(np.array(used_x, dtype=float))
    ly = np.log(np.array(used_y, dtype=float))
    for j, v in enumerate(allvars):
        if np.ptp(LX[:, j]) == 0 and v in free:
            raise FitError(f"variable {v!r} is constant ({math.exp(LX[0, j]):g}) over the {n} runs used: "
                           "its exponent cannot be fitted")
    cols = [np.ones(n)] + [LX[:, j] for j in range(len(free))]
    if tie_l:
        z = LX[:, len(free):] @ np.array([kk for _, kk in tie_l])
        if np.ptp(z) == 0:
            raise FitError("the tied combination " + " · ".join(f"{v}^{kk:g}" for v, kk in tie_l)
                           + " is constant over the runs used: its scale cannot be fitted")
        cols.append(z)
    X = np.column_stack(cols)
    if np.linalg.matrix_rank(X) < X.shape[1]:
        raise FitError("the variables are collinear over the runs used (e.g. T and T/B with B fixed): "
                       "drop one of " + ", ".join(allvars))
    return X, ly


def _least_squares(X: np.ndarray, ly: np.ndarray, free: list[str],
                   tie_l: list[tuple[str, float]] | None) -> dict[str, Any]:
    """OLS with 95% Student-t intervals from s^2 (X'X)^-1 (n - k degrees of freedom): the ``FitResult`` fields of the
    exponents (tied ones as k_i times the scale), log C and C, R², n, dof and the residual spread."""
    n, k = X.shape
    coef, resid, rss = _ols(X, ly)
    dof = n - k
    s2 = rss / dof
    se = np.sqrt(np.maximum(np.diag(s2 * np.linalg.inv(X.T @ X)), 0.0))
    tq = float(stdtrit(dof, 0.975))  # Student t quantile (scipy.special: scipy.stats costs ~1 s to import)
    tss = float(((ly - ly.mean()) ** 2).sum())
    exps: dict[str, float] = {}
    ses: dict[str, float] = {}
    cis: dict[str, tuple[float, float]] = {}
    for j, v in enumerate(free):
        b, e = float(coef[1 + j]), float(se[1 + j])
        exps[v], ses[v], cis[v] = b, e, (b - tq * e, b + tq * e)
    scale = scale_se = scale_ci = None
    if tie_l:
        scale, scale_se = float(coef[-1]), float(se[-1])
        scale_ci = (scale - tq * scale_se, scale + tq * scale_se)
        for v, kk in tie_l:
            lo, hi = sorted((kk * scale_ci[0], kk * scale_ci[1]))
            exps[v], ses[v], cis[v] = kk * scale, abs(kk) * scale_se, (lo, hi)
    logC, logC_se = float(coef[0]), float(se[0])
    return dict(exponents=exps, stderr=ses, ci=cis, log_C=logC, log_C_stderr=logC_se, C=math.exp(logC),
                C_ci=(math.exp(logC - tq * logC_se), math.exp(logC + tq * logC_se)),
                r2=1.0 - rss / tss if tss > 0 else float("nan"), n=n, dof=dof, residual_std=math.sqrt(s2),
                tie_scale=scale, tie_scale_stderr=scale_se, tie_scale_ci=scale_ci)


def _bootstrap(X: np.ndarray, ly: np.ndarray, free: list[str], tie_l: list[tuple[str, float]] | None,
               bootstrap: int, seed: int) -> dict[str, Any]:
    """Percentile intervals from ``bootstrap`` resamples of the used runs (with replacement; resamples whose design
    is singular are skipped and counted): the ``FitResult`` fields ``boot_ci`` and ``boot_skipped``."""
    if not bootstrap or bootstrap <= 0:
        return dict(boot_ci=None, boot_skipped=0)
    n = len(ly)
    rng = np.random.default_rng(seed)
    draws, skipped = [], 0
    for _ in range(int(bootstrap)):
        ix = rng.integers(0, n, n)
        if np.linalg.matrix_rank(X[ix]) < X.shape[1]:
            skipped += 1
            continue
        draws.append(_ols(X[ix], ly[ix])[0])
    if not draws:
        return dict(boot_ci=None, boot_skipped=skipped)
    D = np.array(draws)

    def pct(a):
        lo, hi = np.percentile(a, [2.5, 97.5])
        return (float(lo), float(hi))

    boot_ci = {v: pct(D[:, 1 + j]) for j, v in enumerate(free)}
    if tie_l:
        boot_ci["scale"] = pct(D[:, -1])
        for v, kk in tie_l:
            boot_ci[v] = pct(kk * D[:, -1])
    boot_ci["C"] = pct(np.exp(D[:, 0]))
    return dict(boot_ci=boot_ci, boot_skipped=skipped)


def _judge_censored(censored: list[dict[str, Any]], rows: list[dict[str, Any]], res: Resolver, allvars: list[str],
                    log_C: float, exps: dict[str, float]) -> int:
    """Each censored run's predicted plateau (set in place), and how many sit above the law (their lower bound
    exceeds the prediction: the law under-predicts the slowest settings)."""
    n_incons = 0
    for c in censored:
        r = rows[c["row"]]
        try:
            xs = [res.value(r, v, c["row"]) for v in allvars]
        except FitError:
            continue
        if all(x > 0 and math.isfinite(x) for x in xs):
            pred = math.exp(log_C + sum(exps[v] * math.log(x) for v, x in zip(allvars, xs)))
            c["predicted"] = pred
            if c["lower_bound"] is not None and pred < c["lower_bound"]:
                c["inconsistent"] = True
                n_incons += 1
    return n_incons


# ---------------------------------------------------------------------------------------------------------------
# Theory comparison
# ---------------------------------------------------------------------------------------------------------------

# recall: the paper replaces d by the vocabulary size and T by the number of pairs (App. D.2)
_RECALL_ANALOGUE = {"n_tokens": "d", "n_pairs": "T"}


def compare_to_theory(result: FitResult, paper: str | None = None) -> list[dict[str, Any]]:
    """Each fitted exponent beside the theory's forecast (``theory.forecast_exponents``; for recall by analogy
    N_tokens ~ d, N_pairs ~ T) and the paper's own fit (``theory.PAPER_FITS[paper]``, None for none: which law
    applies is the figure atlas's decision, ``atlas.law_of_presets``), with differences and whether each lies in the
    95% interval."""
    fc = forecast_exponents()
    fc["T/B"] = 1.0
    if paper is not None and paper not in PAPER_FITS:
        raise FitError(f"unknown paper fit {paper!r}; one of {', '.join(PAPER_FITS)}")
    pf = PAPER_FITS.get(paper) if paper else None
    out = []
    for v in result.variables:
        s = short_name(v)
        fkey = _RECALL_ANALOGUE.get(s, s)
        forecast = fc.get(fkey)
        pe = None
        if pf is not None:
            pe = pf.exponents.get(s)
            if pe is None and s == "T/B" and "T" in pf.exponents:
                pe = pf.exponents["T"]
        b = result.exponents[v]
        lo, hi = result.ci[v]
        out.append({
            "variable": v,
            "fitted": b,
            "stderr": result.stderr[v],
            "ci": (lo, hi),
            "forecast": forecast,
            "forecast_diff": None if forecast is None else b - forecast,
            "forecast_in_ci": None if forecast is None else bool(lo <= forecast <= hi),
            "forecast_note": "by analogy with the toy model" if s in _RECALL_ANALOGUE else "",
            "paper": pe,
            "paper_fig": pf.figure if (pf is not None and pe is not None) else None,
            "paper_diff": None if pe is None else b - pe,
            "paper_in_ci": None if pe is None else bool(lo <= pe <= hi),
        })
    return out


def format_comparison(rows: Iterable[Mapping[str, Any]]) -> str:
    """A plain-text table of ``compare_to_theory`` rows."""

    def f(x, fmt="+.3f"):
        return "—" if x is None else format(x, fmt)

    lines = [f"{'variable':>12}  {'fitted':>8}  {'95% CI':>18}  {'theory':>7}  {'diff':>7}  {'paper':>7}  "
             f"{'diff':>7}  fig"]
    for r in rows:
        ci = f"[{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]"
        lines.append(f"{r['variable']:>12}  {r['fitted']:>+8.3f}  {ci:>18}  {f(r['forecast']):>7}  "
                     f"{f(r['forecast_diff']):>7}  {f(r['paper']):>7}  {f(r['paper_diff']):>7}  {r['paper_fig'] or ''}")
    return "\n".join(lines)
