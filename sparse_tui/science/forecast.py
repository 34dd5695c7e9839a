"""Live emergence forecast: when will a run leave its plateau? (issues 33, 41; the laws are arXiv 2505.17863's subject)

For a run whose preset belongs to an atlas entry with a law (``atlas.law_of_presets``), or a toy / ODE run, the
forecast plateau step with an interval of stated coverage (``NOMINAL``, 80 %), from the first source that applies:

* ``refit`` (3 or more of the preset's runs ended with a plateau) and ``paper`` (1 or 2): one Bayesian least-squares
  fit of log plateau = log C + sum_i beta_i log x_i (App. D.2) over the entry's fit variables, on the preset's finished
  runs that left their plateau, each seed a row. A run logged by the user's own script (``sparse_tui.init``) has no
  atlas entry: its group is fitted on the numeric parameters the group varies, with no prior (``_swept``). The
  exponents have the paper's law (``theory.PAPER_FITS``) as a normal prior of standard deviation ``TAU`` each; log C
  is free. With few runs the exponents are the paper's, with many the data's (docs/THEORY.md, "Live emergence
  forecast", says the weights). The interval is the posterior predictive: the residual scatter (seed scatter and
  misfit; a weak log-normal prior around ``SIGMA0``, heavy-tailed while few residuals say what it is) plus the
  exponents' uncertainty at the run's point, which grows with its log distance from the runs fitted; out of their
  range a misfit allowance of ``KAPPA`` residual scatters per e-fold is added (power laws bend).
* ``theory``: a toy or ODE run trained by SGD / integrated: the reduced flow's time scale sqrt(d) T / (B f(p, d))
  (App. A.3.2, A.4.2, sqrt(dT) read as sqrt(d) T) x 1.39, divided by lr; interval x 1.27 .. 1.50, the range of
  integrated plateau / time scale over d 16-256, T 64-4096 (docs/THEORY.md, "Closed forms").

Scale: ``forecasts`` fits once per preset and group of peers (cached by the peers' plateaus) and forecasts every run
from that fit; a peer's own forecast is its exact leave-one-out prediction (the hat matrix, no refit). ``FITS``
counts the fits.

Rows it cannot use: a run whose fit variable or plateau is not a finite positive number (d = 0, a negative d, a
missing key, a plateau stored as text or infinite) is left out of its peers' fit, named in ``Forecasts.warnings``, and
its own forecast is ``{"step": None, "reason": ...}``.

``eta_s``: seconds from the run's last heartbeat to the forecast step, at its speed so far (running runs). After the
plateau: ``ratio`` = measured / forecast. ``where``: ``in-grid`` (inside the range of the fitted runs in every fit
variable) or ``extrapolated``, with ``beyond`` = {variable: factor outside that range}.

No torch, no textual; reads records (``store.RunRecord``-like: ``run_id``, ``preset``, ``params``, ``plateau_step``,
``status``, ``step``, ``started_at``, ``heartbeat_at``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Iterable, Sequence

import numpy as np

from sparse_tui import atlas
from sparse_tui.science.fitting import FitError, Resolver
from sparse_tui.science.repetition import Schedule, initial
from sparse_tui.science.theory import PAPER_FITS, f_rep

NOMINAL = 0.80  # the interval's coverage: the forecast's displayed range holds 80 % of plateaus
MIN_REFIT = 3  # runs that left their plateau before the source is called a refit (below: "paper")
TAU = 0.30  # prior standard deviation of each exponent around the paper's (docs/THEORY.md)
SIGMA0, SIGMA_LOG_SD = 0.20, 1.5  # log-normal prior on the residual scatter of log plateau (noise_posterior)
PRIOR_NU = 4.0  # the exponents' prior is Student t with this many degrees of freedom (0: normal), docs/THEORY.md
KAPPA = 3.0  # misfit allowance of log plateau per e-fold outside the fitted runs' range, in units of their scatter
FLOW_RATIO = (1.27, 1.39, 1.50)  # integrated plateau / (sqrt(d) T / (B f)): low, mid, high (docs/THEORY.md)
FITS = 0  # fits made (tests bound it per call)


class Unusable(ValueError):
    """A run row the forecast cannot use; the message names the key and the value."""


class Forecasts(dict):
    """run id -> forecast dict or None; ``warnings``: the rows left out of a fit, one line each."""

    def __init__(self):
        super().__init__()
        self.warnings: list[str] = []


# ---------------------------------------------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------------------------------------------


def _row(rec: Any) -> dict:
    """A run as a fitting row; a repetition schedule (stored as its string) counts as its start value."""
    params = rec.params if isinstance(rec.params, dict) else {}
    row = {f"params.{k}": v for k, v in params.items()}
    for k in ("params.task.p", "params.task.B"):
        if isinstance(row.get(k), str):
            try:
                row[k] = Schedule.model_validate(row[k]).initial
            except ValueError:
                row.pop(k)
    return row


def _positive(v: Any, what: str) -> float:
    if isinstance(v, bool):
        raise Unusable(f"{what} = {v!r} is not a number")
    try:
        x = float(v)
    except (TypeError, ValueError, OverflowError):
        raise Unusable(f"{what} = {v!r} is not a number") from None
    if not (math.isfinite(x) and x > 0):
        raise Unusable(f"{what} = {x:g} is not a finite positive number")
    return x


def _x(row: dict, name: str) -> float:
    """A fit variable of a row, a finite positive number, else ``Unusable`` naming it."""
    try:
        if name == "f":
            p, d = Resolver([row]).value(row, "p", 0), _x(row, "d")
            if not (math.isfinite(p) and 0 <= p <= 1):
                raise Unusable(f"task.p = {p:g} is not in [0, 1]")
            v = float(f_rep(p, d))
        else:
            v = Resolver([row]).value(row, name, 0)
    except FitError as e:
        raise Unusable(str(e).replace(" in row 0", "")) from None
    except (ZeroDivisionError, OverflowError, TypeError, ValueError) as e:
        if isinstance(e, Unusable):
            raise
        raise Unusable(f"{name}: {e}") from None
    return _positive(v, name)


def _plateau(rec: Any) -> float:
    return _positive(rec.plateau_step, "plateau_step")


@functools.lru_cache(maxsize=512)
def _law(preset: str) -> tuple[str | None, tuple[str, ...]]:
    """The paper law's key and the fit variables of the atlas entry of the preset."""
    law, _ = atlas.law_of_presets([preset])
    hits = atlas.entries_of_preset(preset)
    fit_vars = next((e.fit_vars for e in hits if e.law == law and e.fit_vars), ())
    return law, tuple(fit_vars)


def _swept(rows: Iterable[dict]) -> tuple[str, ...]:
    """The numeric parameters that take more than one value over ``rows`` (the seed and the plateau rule left out):
    the variables of a logged run's group (``sparse_tui.init``), which no atlas entry names."""
    vals: dict[str, set] = {}
    for r in rows:
        for k, v in r.items():
            if k.startswith("params.") and k != "params.seed" and not k.startswith("params.plateau."):
                vals.setdefault(k, set()).add(v if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
    return tuple(sorted(k[len("params."):] for k, s in vals.items() if len(s) > 1 and None not in s))


def _logged(rec: Any) -> bool:
    versions = getattr(rec, "versions", None)
    return isinstance(versions, dict) and bool(versions.get("logged_by"))


def prior_exponents(law: str | None, fit_vars: Sequence[str]) -> dict[str, float]:
    """The theory's exponent of each fit variable that has one: the paper law's. (No atlas entry fits a ratio such
    as T/B: its variables are the law's own.)"""
    exps = PAPER_FITS[law].exponents if law in PAPER_FITS else {}
    return {v: exps[v] for v in fit_vars if v in exps}


# ---------------------------------------------------------------------------------------------------------------
# The fit: Bayesian least squares with the theory's exponents as the prior
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Law:
    """log y = beta . [1, log x] fitted on ``n`` runs; the predictive is normal of variance s^2 (1 + ...), s of
    posterior ``noise`` (a scale mixture: Student-t-like, heavy-tailed while few runs say what s is)."""

    variables: list[str]
    beta: np.ndarray
    cov: np.ndarray  # posterior covariance of beta
    s2: float  # residual variance of log plateau (its posterior mean)
    noise: np.ndarray  # the posterior of the residual scatter s on the grid ``_LOG_S`` (noise_posterior)
    n: int
    lo: np.ndarray  # the fitted runs' range of log x, per variable
    hi: np.ndarray
    prior_weight: dict[str, float]  # share of each exponent's posterior precision that is the prior's
    fixed: dict[str, float] = field(default_factory=dict)  # variables the runs do not vary and the law has no slope
    hat: np.ndarray | None = None  # leverage of each fitted run
    resid: np.ndarray | None = None
    ly: np.ndarray | None = None  # the fitted runs' log plateaus
    _q: tuple[float, float] | None = None  # the scatter's quantile at NOMINAL (absolute) and the normal one

    @property
    def exponents(self) -> dict[str, float]:
        return dict(zip(self.variables, self.beta[1:].tolist()))

    def predict(self, lx: np.ndarray) -> tuple[float, float, float, dict[str, float]]:
        """Centre, low and high (plateau steps) at log x ``lx``, and how far beyond the runs' range (factor) it is."""
        z = np.concatenate(([1.0], lx))
        mean = float(z @ self.beta)
        out = np.maximum(0.0, np.maximum(lx - self.hi, self.lo - lx))
        scatter = 1.0 + (KAPPA * float(out.sum())) ** 2  # in units of s^2: a new run's scatter and the misfit
        return (*self._band(mean, scatter, float(z @ self.cov @ z)), _beyond(self.variables, out))

    def predict_left_out(self, i: int) -> tuple[float, float, float, dict[str, float]]:
        """The exact leave-one-out prediction of fitted run ``i`` (ridge hat matrix): y_i - e_i / (1 - h_i), with
        the predictive band of a left-out run, s^2 / (1 - h_i), and how far it lies beyond the other runs' range."""
        h = float(self.hat[i])
        if h > 1.0 - 1e-6:
            raise ValueError("the fit without this run is not determined (it alone fixes a free parameter)")
        mean = float(self.ly[i]) - float(self.resid[i]) / (1.0 - h)
        lx = self.lx[i]
        lo = np.array([s[1] if x == s[0] and c == 1 else s[0] for x, s, c in zip(lx, self.lows, self.n_low)])
        hi = np.array([s[1] if x == s[0] and c == 1 else s[0] for x, s, c in zip(lx, self.highs, self.n_high)])
        out = np.maximum(0.0, np.maximum(lx - hi, lo - lx))
        scatter = 1.0 / (1.0 - h) + (KAPPA * float(out.sum())) ** 2  # (the fit's uncertainty is in 1 / (1 - h))
        return (*self._band(mean, scatter, 0.0), _beyond(self.variables, out))

    def _band(self, mean: float, scatter: float, var_fit: float) -> tuple[float, float, float]:
        """Centre, low and high: the scatter part, s^2 ``scatter`` with s of posterior ``noise`` (its quantile
        ``scale_quantile``: heavy-tailed while s is uncertain), and the fit's, normal of variance ``var_fit`` (the
        exponents' posterior at the point, whose prior part does not scale with s), added in quadrature."""
        if self._q is None:
            self._q = (scale_quantile(self.noise, NOMINAL), NormalDist().inv_cdf(0.5 + NOMINAL / 2))
        qs, qn = self._q
        half = math.sqrt(qs ** 2 * max(scatter, 0.0) + qn ** 2 * max(var_fit, 0.0))
        return math.exp(mean), math.exp(mean - half), math.exp(mean + half)

    def index_ranges(self, LX: np.ndarray) -> None:
        """The two smallest and two largest values of each variable (and how often the extreme occurs), so that a
        left-out run's distance from the others' range costs O(1)."""
        self.lx = LX
        self.lows, self.highs, self.n_low, self.n_high = [], [], [], []
        for col in LX.T:
            u = np.unique(col)
            self.lows.append((u[0], u[1] if len(u) > 1 else u[0]))
            self.highs.append((u[-1], u[-2] if len(u) > 1 else u[-1]))
            self.n_low.append(int((col == u[0]).sum()))
            self.n_high.append(int((col == u[-1]).sum()))


def _beyond(variables: Sequence[str], out: np.ndarray) -> dict[str, float]:
    return {v: round(math.exp(o), 3) for v, o in zip(variables, out.tolist()) if o > 1e-9}


_LOG_S = np.linspace(math.log(1e-4), math.log(10.0), 600)  # the grid of log s on which its posterior is summed


def noise_posterior(q: float, nu: float, sigma0: float) -> np.ndarray:
    """The posterior of the residual scatter s of log plateau on the grid ``_LOG_S`` (weights summing to 1), given
    the sum of squared residuals ``q`` on ``nu`` degrees of freedom, under a log-normal prior on s centred on
    ``sigma0``, ``SIGMA_LOG_SD`` e-folds wide: nearly flat in log s (Jeffreys' prior, under which the predictive is
    the exact Student t of nu degrees of freedom) where the residuals say something, so that it never outweighs them
    (a scaled inverse chi^2 prior worth 2 residuals of 0.20 held the integrated toy runs' scatter, 0.02, at 0.07);
    with no residuals it is the prior alone, and the predictive's tails are heavy."""
    ls = _LOG_S
    logp = -nu * ls - q / 2 * np.exp(-2 * ls) - (ls - math.log(sigma0)) ** 2 / (2 * SIGMA_LOG_SD**2)
    w = np.exp(logp - logp.max())
    return w / w.sum()


_ERF = np.vectorize(math.erf, otypes=[float])


def scale_quantile(w: np.ndarray, nominal: float) -> float:
    """t with P(|s e| <= t) = nominal, e standard normal and s of posterior weights ``w`` on ``_LOG_S``: the
    predictive's central interval is mean +- t sqrt(g) where its variance is s^2 g (a scale mixture of normals, the
    exact posterior predictive given the exponents' prior weight)."""
    keep = w > 1e-12 * w.max()
    s, w = np.exp(_LOG_S[keep]), w[keep] / w[keep].sum()
    lo, hi = 0.0, 60.0 * float(s.max())
    for _ in range(60):
        t = (lo + hi) / 2
        lo, hi = (t, hi) if float(w @ _ERF(t / (s * math.sqrt(2)))) < nominal else (lo, t)
    return (lo + hi) / 2


def fit_law(LX: np.ndarray, ly: np.ndarray, variables: Sequence[str], prior: dict[str, float],
            tau: float | None = None, sigma0: float | None = None) -> Law:
    """The posterior of log y = b0 + sum b_j log x_j: b0 flat; b_j ~ N(prior[v], tau^2) for a variable with a theory
    exponent, flat otherwise; residuals N(0, s^2) with log s normal around log sigma0 a priori (noise_posterior). s^2
    and the prior's weight (s^2 / tau^2 against the data's X'X) are solved together (a few fixed-point steps). Raises
    FitError when the flat parameters are not identified by the runs."""
    global FITS
    FITS += 1
    tau = TAU if tau is None else tau
    sigma0 = SIGMA0 if sigma0 is None else sigma0
    n, k = LX.shape
    X = np.column_stack([np.ones(n), LX])
    P = np.zeros((k + 1, k + 1))  # prior precision (times tau^2)
    b0 = np.zeros(k + 1)
    for j, v in enumerate(variables):
        if v in prior:
            P[j + 1, j + 1] = 1.0
            b0[j + 1] = prior[v]
    XtX, Xty = X.T @ X, X.T @ ly
    s2 = sigma0 ** 2
    u = np.ones(k + 1)  # each exponent's prior precision scale: a Student t prior as a scale mixture of normals
    for _ in range(8):
        lam = s2 / tau ** 2
        A = XtX + lam * P * u
        try:
            beta = np.linalg.solve(A, Xty + lam * (P * u) @ b0)
        except np.linalg.LinAlgError:
            raise FitError("the runs do not identify the law's free parameters") from None
        if np.linalg.cond(A) > 1e12:
            raise FitError("the runs do not identify the law's free parameters")
        resid = ly - X @ beta
        # residuals' degrees of freedom: n less the parameters the runs fix (the trace of the hat matrix: log C and
        # exponents without a prior count 1 each, those held by their prior less: ridge regression's effective
        # number of parameters). Counting n less the free parameters instead, 3 runs of the toy flow fitted exactly
        # by 3 parameters claimed 2 residuals of scatter ~0 and an interval that held 2 of 17 later runs.
        nu = max(0.0, n - float(np.trace(np.linalg.solve(A, XtX))))
        noise = noise_posterior(float(resid @ resid), nu, sigma0)
        s2 = float(noise @ np.exp(2 * _LOG_S))
        if PRIOR_NU:  # an exponent far from the paper's (in units of tau) loosens its own prior (EM weight)
            u = (PRIOR_NU + 1) / (PRIOR_NU + (beta - b0) ** 2 / tau ** 2)
    lam = s2 / tau ** 2
    A = XtX + lam * P * u
    Ainv = np.linalg.inv(A)
    beta = Ainv @ (Xty + lam * (P * u) @ b0)
    resid = ly - X @ beta
    hat = np.einsum("ij,jk,ik->i", X, Ainv, X)
    data_prec = ((LX - LX.mean(axis=0)) ** 2).sum(axis=0) if n else np.zeros(k)  # the data's, per exponent
    weight = {v: float(lam * u[j + 1] / (lam * u[j + 1] + data_prec[j])) for j, v in enumerate(variables)
              if v in prior}
    law = Law(list(variables), beta, s2 * Ainv, s2, noise, n, LX.min(axis=0) if n else np.zeros(k),
              LX.max(axis=0) if n else np.zeros(k), weight, hat=hat, resid=resid, ly=ly)
    law.index_ranges(LX)
    return law


# ---------------------------------------------------------------------------------------------------------------
# One preset's group of runs
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class _Group:
    law: Law | None
    index: dict[str, int]  # a fitted run's row in the law
    skipped: dict[str, str]  # run id -> why it is left out


_CACHE: dict[tuple, _Group] = {}
_NO_GROUP = _Group(None, {}, {})


def _is_peer(r: Any) -> bool:
    return r.status == "finished" and r.plateau_step is not None


def _group(preset: str, peers: list[Any], rows: dict[str, dict], swept: tuple[str, ...] | None = None) -> _Group:
    """The fit of one preset's finished runs: on its atlas entry's variables, or (a logged group, ``swept``) on the
    numeric parameters its runs vary, without a prior."""
    key = (preset, swept, tuple(sorted((str(p.run_id), repr(p.plateau_step)) for p in peers)))
    if key in _CACHE:
        return _CACHE[key]
    law_key, fit_vars = (None, swept) if swept is not None else _law(preset)
    prior = prior_exponents(law_key, fit_vars)
    used, xs, ys, skipped = [], [], [], {}
    for p in peers:
        try:
            y = _plateau(p)
            x = [_x(rows[p.run_id], v) for v in fit_vars]
        except Unusable as e:
            skipped[p.run_id] = str(e)
            continue
        used.append(p.run_id)
        xs.append(x)
        ys.append(math.log(y))
    g = _Group(None, {}, skipped)
    if used:  # (else no law: none of its preset's runs has ended with a plateau)
        LX, ly = np.log(np.array(xs, dtype=float)).reshape(len(used), len(fit_vars)), np.array(ys)
        keep = [j for j, v in enumerate(fit_vars) if v in prior or np.ptp(LX[:, j]) > 0]
        fixed = {v: float(LX[0, j]) for j, v in enumerate(fit_vars) if j not in keep}
        try:
            g.law = fit_law(LX[:, keep], ly, [fit_vars[j] for j in keep], prior)
            g.law.fixed = fixed
            g.index = {rid: i for i, rid in enumerate(used)}
        except FitError:
            pass  # the runs do not identify the law: no forecast from them
    if len(_CACHE) > 2_000:
        _CACHE.clear()
    _CACHE[key] = g
    return g


def fitted(preset: str, recs: Iterable[Any]) -> Law | None:
    """The law the forecast fits for ``preset`` on the finished runs of ``recs`` (cached), or None."""
    peers = [r for r in recs if r.preset == preset and _is_peer(r)]
    if not peers or _law(preset)[0] is None:
        return None
    return _group(preset, peers, {r.run_id: _row(r) for r in peers}).law


def _from_group(rec: Any, row: dict, g: _Group) -> dict | None:
    law = g.law
    if law is None:
        return None
    for v, lv in law.fixed.items():
        if abs(math.log(_x(row, v)) - lv) > 1e-12:
            return {"step": None, "reason": f"{v} differs from its preset's finished runs, which do not vary it, "
                                            "and the paper's law has no exponent for it"}
    lx = np.log(np.array([_x(row, v) for v in law.variables], dtype=float))
    if rec.run_id in g.index:  # a fitted run: its exact leave-one-out forecast (its own plateau hidden)
        n = law.n - 1
        if n < 1:
            return None  # its own plateau is all the fit has
        step, lo, hi, beyond = law.predict_left_out(g.index[rec.run_id])
    else:
        step, lo, hi, beyond = law.predict(lx)
        n = law.n
    return {"step": step, "low": lo, "high": hi, "source": "refit" if n >= MIN_REFIT else "paper", "n": n,
            "coverage": NOMINAL, "where": "extrapolated" if beyond else "in-grid", "beyond": beyond,
            "exponents": {v: round(b, 4) for v, b in law.exponents.items()},
            "prior_weight": {v: round(w, 3) for v, w in law.prior_weight.items()}}


def _flow(rec: Any) -> dict | None:
    p = rec.params if isinstance(rec.params, dict) else {}
    kind = (p.get("model.kind"), p.get("train.optimizer"))
    if p.get("task.kind") != "linreg" or kind[0] != "ode" and kind != ("toy", "sgd"):
        return None
    try:
        d, T, lr = (_positive(p.get(k), k) for k in ("task.d", "task.T", "train.lr"))
        B = _positive(initial(p.get("task.B", 1)), "task.B")
        rep = float(initial(p.get("task.p", 0.0)))
        if not 0 <= rep <= 1:
            raise Unusable(f"task.p = {rep:g} is not in [0, 1]")
    except (Unusable, TypeError, ValueError) as e:
        return {"step": None, "reason": str(e)}
    low, mid, high = (math.sqrt(d) * T / (B * float(f_rep(rep, d))) / lr * r for r in FLOW_RATIO)
    return {"step": mid, "low": low, "high": high, "source": "theory", "n": 0, "coverage": None, "where": "theory",
            "beyond": {}}


def _finish(rec: Any, out: dict | None) -> dict | None:
    if out is None or out.get("step") is None:
        return out
    if rec.plateau_step is not None:
        try:
            out["ratio"] = _plateau(rec) / out["step"]
        except Unusable as e:
            return {"step": None, "reason": str(e)}
    elif rec.status == "running" and rec.step and rec.started_at is not None and rec.heartbeat_at is not None:
        # at the speed of the run so far, as of its last heartbeat (when its step was written)
        try:
            speed = float(rec.step) / max(1e-9, float(rec.heartbeat_at) - float(rec.started_at))
            if speed > 0:
                out["eta_s"] = max(0.0, (out["step"] - float(rec.step)) / speed)
        except (TypeError, ValueError):
            pass
    return out


def forecasts(recs: Sequence[Any], pool: Iterable[Any] | None = None) -> Forecasts:
    """The forecast of every run of ``recs``, from the runs of ``pool`` (default: ``recs``) of its preset: one fit
    per preset (cached by its finished runs' plateaus), so a store of n runs costs O(n) per refresh. The one call
    behind ``runs``, ``runs --json`` and the console's poller."""
    pool = list(recs) if pool is None else list(pool)
    by_preset: dict[Any, list[Any]] = {}
    for r in pool:
        by_preset.setdefault(r.preset, []).append(r)
    rows = {r.run_id: _row(r) for r in pool}
    out = Forecasts()
    groups: dict[Any, _Group | None] = {}
    for r in recs:
        if r.run_id not in rows:
            rows[r.run_id] = _row(r)
        try:
            law_key = _law(r.preset)[0] if isinstance(r.preset, str) else None
        except Exception:  # noqa: BLE001 - an odd preset name is no reason to stop the listing
            law_key = None
        got = None
        logged = law_key is None and _logged(r)
        if law_key is not None or logged:
            if r.preset not in groups:
                peers = [p for p in by_preset.get(r.preset, []) if _is_peer(p)]
                swept = _swept(rows[p.run_id] for p in by_preset.get(r.preset, [])) if logged else None
                g = groups[r.preset] = _group(r.preset, peers, rows, swept)
                out.warnings += [f"run {rid}: left out of preset {r.preset}'s forecast: {why}"
                                 for rid, why in g.skipped.items()]
            try:
                got = _from_group(r, rows[r.run_id], groups[r.preset])
            except Unusable as e:
                got = {"step": None, "reason": str(e)}
            except (ArithmeticError, ValueError, np.linalg.LinAlgError) as e:  # one run's numbers, not the listing
                got = {"step": None, "reason": f"{type(e).__name__}: {e}"}
            if r.run_id in groups[r.preset].skipped:
                got = {"step": None, "reason": groups[r.preset].skipped[r.run_id]}
        if got is None:
            got = _flow(r)
        got = out[r.run_id] = _finish(r, got)
        if got is not None and got.get("step") is None and r.run_id not in groups.get(r.preset, _NO_GROUP).skipped:
            out.warnings.append(f"run {r.run_id}: no forecast: {got['reason']}")
    return out


def forecast(rec: Any, others: Iterable[Any]) -> dict | None:
    """The forecast of run ``rec`` from ``others`` (any runs; the finished runs of its preset that left their
    plateau are used, never itself), or None when no source applies. Keys: ``step``, ``low``, ``high`` (the
    ``coverage`` interval), ``source``, ``n`` (runs it used), ``where`` / ``beyond``, and ``eta_s`` (running, before
    its plateau) or ``ratio`` (after it); ``{"step": None, "reason": ...}`` for a row it cannot use."""
    pool = [o for o in others if o.run_id != rec.run_id] + [rec]
    return forecasts([rec], pool)[rec.run_id]


def loo(recs: Sequence[Any]) -> list[tuple[Any, float | None]]:
    """Leave-one-out: each run that left its plateau, forecast from the others, with measured / forecast."""
    fc = forecasts(recs)
    return [(r, (fc.get(r.run_id) or {}).get("ratio")) for r in recs if r.plateau_step is not None]


# ---------------------------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------------------------


def _steps(x: float) -> str:
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def short(f: dict | None) -> str:
    """The forecast step alone, '~1.2k' (the console's plateau cell before the plateau), or '-'."""
    return "-" if f is None or f.get("step") is None else "~" + _steps(f["step"])


def detail(f: dict) -> str:
    """One phrase for the console's detail line: the forecast with its interval (and coverage), in-grid or how far
    extrapolated, source and ETA, or after the plateau measured / forecast; why not, for a row it cannot use."""
    if f.get("step") is None:
        return f"no forecast: {f.get('reason', '')}"
    src = {"refit": f"refit on {f['n']} runs", "paper": f"paper's law × {f['n']} run(s)",
           "theory": "√d·T/(B·f)"}[f["source"]]
    if f.get("where") and f["source"] != "theory":  # 'in-grid' or 'extrapolated d ×2' (the factor beyond the range)
        beyond = ", ".join(f"{v} ×{k:.3g}" for v, k in f["beyond"].items())
        src += f", {f['where']} {beyond}".rstrip()
    if "ratio" in f:
        return f"plateau {f['ratio']:.2f}× its forecast {_steps(f['step'])} ({src})"
    eta = f.get("eta_s")
    when = "" if eta is None else f", in {eta / 60:.0f} min" if eta >= 60 else f", in {eta:.0f} s"
    cov = "" if not f.get("coverage") else f" {f['coverage'] * 100:.0f}%"
    return f"forecast plateau ~{_steps(f['step'])} ({_steps(f['low'])}–{_steps(f['high'])}{cov}, {src}{when})"


def cell(f: dict | None) -> str:
    """The Runs table's cell: '~1.2k' (forecast, running), '0.93x' (measured / forecast), or '-'."""
    if f is None or f.get("step") is None:
        return "-"
    if "ratio" in f:
        return f"{f['ratio']:.2f}x"
    text, eta = short(f), f.get("eta_s")
    if eta is not None:
        text += f" {eta / 60:.0f}m" if eta >= 60 else f" {eta:.0f}s"
    return text
