"""Spend a compute budget where it buys the most precision on a law's exponents (issue 41): ``run PRESET --budget
30m`` and ``reproduce KEY --budget 30m``.

Given a preset's runs (grid points x seeds), the runs already ended, the cost of a training step (the cost model of
``run --dry-run``: the CPU calibration, ``estimate.step_seconds``) and a budget in seconds, ``plan`` chooses which
runs to train and in what order, and caps each run's steps:

* **Which runs, in what order.** Greedy, by information per second: the exponents' posterior precision (the
  forecast's Bayesian fit, ``forecast.fit_law``: the paper's exponents as a prior of width ``forecast.TAU``, the runs'
  scatter ``forecast.SIGMA0``) gains log(1 + z' M^-1 z / s^2) from a run at z = [1, log x]; the run with the largest
  gain per projected second that still fits the budget is taken, M updated, and so on. Extreme grid points buy the
  most (they pin the slopes); seeds repeat a point when no new point fits. With at most ``EXACT_MAX`` runs left the
  set is not greedy: of every set that fits, the one whose widest exponent interval (t quantile on its degrees of
  freedom x posterior sd, against the whole grid's) is narrowest, the cheapest among equals; the greedy rule then
  orders it. (Greedy per second kept the cheap middle of Fig. 15 right's grid and left its d = 64 end: d 1.57x the
  grid's width at half its time in the replay; the best set: 1.02x, docs/THEORY.md.)
* **How many steps.** A run's steps are capped at its forecast's upper bound (80 %) times ``MARGIN``, plus the
  preset's ``plateau.stop_after``; a capped run that has not left its plateau ends censored, which the fit already
  handles. A run with no forecast yet (nothing ended) keeps the preset's steps. Its projected time is its forecast
  step (plus stop_after) when it has one, else its cap.
* **Re-planning.** ``plan`` is called again after each run ends, with the runs ended so far and the budget left: the
  refreshed forecasts move the caps and the order.

``Plan.widths``: the projected width of each exponent's 95 % interval after the planned runs, beside ``full``: the
same for the preset's whole grid (uncapped). Torch-free.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Sequence

import numpy as np

from sparse_tui.science import forecast as fc

MARGIN = 1.5  # steps cap = forecast's upper bound x MARGIN (+ stop_after)
EXACT_MAX = 18  # up to this many runs left, the plan is the best subset of them (every one tried), not greedy


class BudgetError(ValueError):
    """A budget that cannot be read; the message is one line."""


def parse_budget(text: str) -> float:
    """'30m', '1h', '90s', '1h30m', '45' (minutes) -> seconds."""
    t = str(text).strip().lower()
    if re.fullmatch(r"\d{1,6}(\.\d{1,3})?", t):
        s = float(t) * 60
    else:
        parts = re.fullmatch(r"(?:(\d{1,5})h)?(?:(\d{1,6})m(?:in)?)?(?:(\d{1,7})s)?", t)
        if not parts or not any(parts.groups()):
            raise BudgetError(f"--budget: {text!r} is not a duration (e.g. 30m, 1h, 90s, 1h30m)")
        h, m, sec = (int(g or 0) for g in parts.groups())
        s = 3600.0 * h + 60.0 * m + sec
    if not (math.isfinite(s) and s > 0):
        raise BudgetError(f"--budget: {text!r} must be a positive duration")
    return s


@dataclass
class Planned:
    """One run of the plan: the spec's index in the preset, the steps it may train (capped), its projected seconds,
    and its forecast (plateau step and upper bound) when there is one."""

    index: int
    label: str
    steps: int
    seconds: float
    forecast: float | None = None
    high: float | None = None
    capped: bool = False


@dataclass
class Plan:
    runs: list[Planned]
    seconds: float  # projected, all planned runs
    budget_s: float
    widths: dict[str, float]  # projected 95 % interval width of each exponent after the planned (and ended) runs
    full: dict[str, float]  # the same for the preset's whole grid
    full_seconds: float  # the whole grid, uncapped
    variables: list[str] = field(default_factory=list)
    ended: int = 0  # runs already ended that the plan builds on


def _point(params: dict, fit_vars: Sequence[str]) -> np.ndarray | None:
    row = {f"params.{k}": v for k, v in params.items()}
    try:
        return np.log(np.array([fc._x(row, v) for v in fit_vars], dtype=float))
    except fc.Unusable:
        return None


def _blind(i: int, spec: Any, preset: str) -> SimpleNamespace:
    return SimpleNamespace(run_id=f"planned-{i}", preset=preset, params=spec.params, plateau_step=None,
                           status="queued", step=0, started_at=None, heartbeat_at=None)


PAPER_SPREAD = 1.0  # before any run ends: the paper's law as the forecast, 80 % within x/÷ exp(1.28 * this)


def _paper_guess(law: str | None, spec: Any) -> dict | None:
    """Before any run of the preset has ended: the paper's law itself (its prefactor unmeasured here), with a wide
    80 % band (x/÷ 3.6), so that a run's cap still bounds a plateau the law misjudges 3-fold."""
    if law not in fc.PAPER_FITS:
        return None
    row = {f"params.{k}": v for k, v in spec.params.items()}
    try:  # every variable of the paper's law, fitted or not (Fig. 2 left's T, fixed in its d x B grid)
        step = fc.PAPER_FITS[law].predict(**{k: fc._x(row, k) for k in fc.PAPER_FITS[law].exponents})
    except (KeyError, ValueError, OverflowError):  # (fc.Unusable is a ValueError)
        return None
    return {"step": step, "high": step * math.exp(1.2816 * PAPER_SPREAD)}


def _widths(M: np.ndarray, s2: float, variables: Sequence[str]) -> dict[str, float]:
    cov = np.linalg.inv(M) * s2
    return {v: 2 * 1.96 * math.sqrt(max(cov[j + 1, j + 1], 0.0)) for j, v in enumerate(variables)}


def plan(specs: Sequence[Any], budget_s: float, step_s: float, preset: str, ended: Sequence[Any] = (),
         taken: Sequence[int] = (), margin: float = MARGIN) -> Plan:
    """The plan for ``specs`` (a preset's runs) within ``budget_s`` seconds at ``step_s`` seconds a step, after the
    runs ``ended`` (store records of this preset); ``taken``: spec indices already trained or training."""
    law, fit_vars = fc._law(preset)
    prior = fc.prior_exponents(law, fit_vars)
    points = [_point(s.params, fit_vars) for s in specs]
    varying = [j for j, v in enumerate(fit_vars)
               if v in prior or len({round(float(p[j]), 9) for p in points if p is not None}) > 1]
    variables = [fit_vars[j] for j in varying]
    z = {i: np.concatenate(([1.0], p[varying])) for i, p in enumerate(points) if p is not None}
    k = len(variables) + 1
    # the prior's precision in units of the runs' scatter s^2 (as fit_law weighs it), and a vague one on log C
    s2 = fc.SIGMA0 ** 2
    peers = [r for r in ended if r.status == "finished" and r.plateau_step is not None]
    blinds = [_blind(i, s, preset) for i, s in enumerate(specs)]
    got = fc.forecasts(blinds, list(ended) + blinds) if peers else {}
    law_fit = fc.fitted(preset, ended) if peers else None
    if law_fit is not None and law_fit.n > k:
        s2 = law_fit.s2  # the scatter measured so far
    P = np.diag([1e-6] + [s2 / fc.TAU ** 2 if v in prior else 1e-6 for v in variables])
    M0 = P.copy()
    for p in (_point(r.params, fit_vars) for r in peers):
        if p is not None:
            zz = np.concatenate(([1.0], p[varying]))
            M0 += np.outer(zz, zz)
    stop_after = [max(0, int(getattr(s.config.plateau, "stop_after", -1))) for s in specs]

    def cost(i: int) -> tuple[int, float, float | None, float | None, bool]:
        spec = specs[i]
        steps = int(spec.config.train.steps)
        f = got.get(f"planned-{i}") if got else None
        if not f or f.get("step") is None or f.get("source") == "theory":
            f = _paper_guess(law, spec)
        if f is None:
            return steps, steps * step_s, None, None, False
        cap = min(steps, int(math.ceil(f["high"] * margin)) + stop_after[i])
        expect = min(cap, int(math.ceil(f["step"])) + stop_after[i]) if stop_after[i] else cap
        return cap, expect * step_s, f["step"], f["high"], cap < steps

    costs = {i: cost(i) for i in range(len(specs))}
    full_seconds = sum(c[1] for c in costs.values())  # (a run with no forecast is costed at its steps already)
    full_M = M0 + sum(np.outer(v, v) for i, v in z.items() if i not in taken)
    M = M0.copy()
    chosen: list[Planned] = []
    left = budget_s
    pool = [i for i in range(len(specs)) if i not in set(taken) and i in z]
    if 0 < len(pool) <= EXACT_MAX:
        pool = _best_subset(pool, np.array([z[i] for i in pool]), np.array([costs[i][1] for i in pool]), M, full_M,
                            left)
    while pool:
        Minv = np.linalg.inv(M)
        fits = [i for i in pool if max(costs[i][1], 1e-6) <= left]
        if not fits:
            break
        best = max(fits, key=lambda i: math.log1p(float(z[i] @ Minv @ z[i])) / max(costs[i][1], 1e-6))
        steps, sec, f_step, high, capped = costs[best]
        chosen.append(Planned(best, specs[best].label(), steps, sec, f_step, high, capped))
        M += np.outer(z[best], z[best])
        left -= sec
        pool.remove(best)
    return Plan(chosen, sum(p.seconds for p in chosen), budget_s, _widths(M, s2, variables),
                _widths(full_M, s2, variables), full_seconds, variables, len(peers))


def _best_subset(pool: list[int], Z: np.ndarray, sec: np.ndarray, M: np.ndarray, full_M: np.ndarray, left: float
                 ) -> list[int]:
    """The runs of ``pool`` (design rows ``Z``, projected seconds ``sec``) that fit in ``left`` seconds and make the
    widest exponent's projected 95 % interval (t quantile on the runs' degrees of freedom x its posterior sd),
    relative to the whole grid's, narrowest; the cheapest such set. Every subset is tried (2^len(pool), at most
    2^EXACT_MAX)."""
    from scipy.special import stdtrit

    m, k = Z.shape
    masks = ((np.arange(2 ** m)[:, None] >> np.arange(m)) & 1).astype(float)
    masks = masks[masks @ sec <= left]
    n = round(M[0, 0]) + masks.sum(1)  # runs ended and chosen (M[0, 0]: one per run, the prior ~0)
    masks, n = masks[n > k], n[n > k]
    if not len(masks):
        return pool
    Ms = M.ravel() + masks @ np.einsum("ij,ik->ijk", Z, Z).reshape(m, -1)
    var = np.diagonal(np.linalg.inv(Ms.reshape(-1, k, k)), axis1=1, axis2=2)[:, 1:]
    score = (stdtrit(n - k, 0.975)[:, None] ** 2 * var / np.diag(np.linalg.inv(full_M))[1:]).max(1)
    best = masks[np.lexsort((masks @ sec, score))[0]]
    return [i for i, b in zip(pool, best) if b]


def lines(p: Plan, preset: str) -> list[str]:
    """The plan in words: one line per run, then the projected time and each exponent's interval width."""
    from sparse_tui.base.numbers import fmt_duration

    out = [f"budget {fmt_duration(p.budget_s)} for {preset}: {len(p.runs)} run(s), projected "
           f"{fmt_duration(p.seconds)} (the whole grid, projected alike: {fmt_duration(p.full_seconds)})"
           + (f"; after {p.ended} ended run(s)" if p.ended else "")]
    for n, r in enumerate(p.runs, 1):
        fcast = "" if r.forecast is None else f"  forecast ~{r.forecast:.0f} (80% up to {r.high:.0f})"
        cap = " cap" if r.capped else "    "
        out.append(f"  {n:>2}. #{r.index:<3} {r.label:<24} {r.steps:>6} steps{cap}  "
                   f"~{fmt_duration(r.seconds):<9}{fcast}")
    out.append(f"  cap: steps stop at the forecast's 80% upper bound x {MARGIN:g} (+ the preset's stop_after); a "
               "capped run that has not left its plateau by then ends censored")
    for v in p.variables:
        out.append(f"  exponent {v}: projected 95% interval width {p.widths[v]:.3f} (whole grid: {p.full[v]:.3f}, "
                   f"{p.widths[v] / p.full[v]:.2f}x)")
    return out


def with_steps(spec: Any, steps: int) -> Any:
    """The spec with ``train.steps`` capped (named in its label, as an edit away from the preset)."""
    import dataclasses

    if steps >= spec.config.train.steps:
        return spec
    train = spec.config.train.model_copy(update={"steps": int(steps)})
    return dataclasses.replace(spec, config=spec.config.model_copy(update={"train": train}),
                               edited={**spec.edited, "train.steps": int(steps)})


def spend(store: Any, specs: Sequence[Any], budget_s: float, step_s: float, preset: str, train: Any,
          say: Any = print, clock: Any = None, taken: Sequence[int] = ()) -> list[str]:
    """Train within ``budget_s``: plan, train the plan's first run (``train(spec) -> run ids``), re-plan with the
    runs ended so far and the budget left, until nothing more fits. Returns the run ids trained, in order.

    The cost model is corrected by what the runs took: each re-plan projects at ``step_s`` times the ratio of the
    seconds the trained runs took to the seconds projected for them (a busy machine, or evaluations the model
    leaves out), so the last run chosen fits what is left as this machine now trains. A run is never cut short: the
    spend can still pass the budget by the last run's own misprojection, and the closing line says by how much."""
    import time

    from sparse_tui.base.numbers import fmt_duration

    clock = clock or time.monotonic
    t0 = clock()
    taken = list(taken)  # the specs the store already holds (reproduce's reused runs)
    ids: list[str] = []
    projected = took = 0.0  # over the runs trained here: seconds at ``step_s``, and seconds taken
    while True:
        left = budget_s - (clock() - t0)
        scale = took / projected if projected > 0 else 1.0
        ended = [r for r in store.runs(preset=preset) if r.status == "finished"]
        p = plan(specs, left, step_s * scale, preset, ended, taken)
        if not p.runs:
            break
        nxt = p.runs[0]
        say(f"budget: {len(taken) + 1}. {nxt.label}, {nxt.steps} steps"
            + (f" (forecast ~{nxt.forecast:.0f}, 80% up to {nxt.high:.0f})" if nxt.forecast else "")
            + f"; {len(p.runs) - 1} more planned, {left:.0f} s left"
            + (f" (steps cost {scale:.2f}x the cost model, as measured)" if scale != 1.0 else ""))
        start = clock()
        ids += list(train(with_steps(specs[nxt.index], nxt.steps)))
        took += clock() - start
        projected += nxt.seconds / scale
        taken.append(nxt.index)
    used = clock() - t0
    say(f"budget: {fmt_duration(used)} of {fmt_duration(budget_s)} spent on {len(ids)} run(s)"
        + (f", {fmt_duration(used - budget_s)} over (the last run took longer than projected)"
           if used > budget_s else ""))
    return ids
