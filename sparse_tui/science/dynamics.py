"""The reduced gradient flow integrated (science/theory.py: the vector field; science/dopri5.py: the integrator):
plateau lengths over grids, trajectories, the switch of repetition (arXiv 2505.17863 §4) and the closed form
against the integrated dynamics."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from sparse_tui.base.parse import number, values
from sparse_tui.science.dopri5 import IntegrationError, _integrate
from sparse_tui.science.theory import (
    OBSERVABLES,
    _entropy,
    _losses,
    _Params,
    _rate,
    _rhs,
    escape_time_linear,
    escape_time_linear_log,
)


def plateau_times(
    d: Any,
    T: Any,
    B: Any = 1,
    p: Any = 0.0,
    *,
    threshold: float = 0.2,
    loss: str = "test",
    test_B: Any = None,
    rtol: float = 1e-8,
    atol: float = 1e-10,
    t_max: Any = None,
) -> np.ndarray:
    """Plateau length of the reduced gradient flow for every (d, T, B, p) (broadcast), all integrated at once.

    The plateau is the first time the loss reaches ``threshold`` x its initial value 0.5 (App. D.1: 0.2, i.e. 0.1).
    ``loss='test'`` (default) uses the test loss without cross-sample repetition and with ``test_B`` relevant
    copies (default B, as App. D.1); ``loss='train'`` the training loss Eq. 17. Points that have not crossed by
    ``t_max`` (default 100 sqrt(d) T / (B f)) give nan. Returns an array of the broadcast shape.
    """
    if loss not in ("test", "train"):
        raise ValueError("loss must be 'test' or 'train'")
    d, T, B, p = np.broadcast_arrays(*(np.asarray(v, float) for v in (d, T, B, p)))
    shape = d.shape
    tb = B if test_B is None else np.broadcast_to(np.asarray(test_B, float), shape)
    P = _Params(d, T, B, p, tb)
    if t_max is None:
        t_end = 100.0 / _rate(P.d, P.T, P.B, P.p)
    else:
        t_end = np.broadcast_to(np.asarray(t_max, float), shape).ravel().copy()
    level = np.full(len(P), 0.5 * threshold)
    cross, _, _ = _integrate(P, t_end, rtol=rtol, atol=atol, event=f"{loss}_loss", level=level, direction=-1)
    return cross.reshape(shape)


_GRID_DEFAULTS = {"d": 32, "T": 64, "B": 1, "p": 0.0}  # a grid point's values where the grid names none


def expand_grid(grid: Mapping[str, Iterable[Any]] | Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """A grid as a dict of lists (cartesian product, last key fastest) or a list of dicts -> dict of flat arrays
    with keys d, T, B, p (B defaults to 1, p to 0)."""
    if isinstance(grid, Mapping):
        keys = list(grid)
        unknown = [k for k in keys if k not in _GRID_DEFAULTS]
        if unknown:
            raise ValueError(f"unknown grid key(s) {unknown}: use d, T, B, p")
        combos = [dict(zip(keys, vals)) for vals in itertools.product(*(list(grid[k]) for k in keys))]
    else:
        combos = [dict(c) for c in grid]
    return {k: np.array([float(c.get(k, v)) for c in combos]) for k, v in _GRID_DEFAULTS.items()}


def parse_grid(items: Sequence[str] | str) -> dict[str, list[float]]:
    """Parse ``["d=16,32,64", "T=64,256"]`` (or one space-separated string) into ``{"d": [16, 32, 64], ...}``."""
    if isinstance(items, str):
        items = items.split()
    out: dict[str, list[float]] = {}
    for it in items:
        if "=" not in it:
            raise ValueError(f"grid item {it!r}: expected key=v1,v2,...")
        k, v = it.split("=", 1)
        k = k.strip()
        if k not in ("d", "T", "B", "p"):
            raise ValueError(f"grid item {it!r}: key must be one of d, T, B, p")
        try:  # base/parse.py: the one parser of typed numbers (NaN refused, a long text refused on its length)
            vals = [float(number(x, infinite=True)) for x in values(v)]
        except ValueError:
            raise ValueError(f"grid item {it[:60]!r}: values must be numbers") from None
        if not vals:
            raise ValueError(f"grid item {it!r}: no values")
        out[k] = [int(x) if x.is_integer() and k != "p" else x for x in vals]
    return out


def plateau_grid(grid: Mapping[str, Iterable[Any]] | Sequence[Mapping[str, Any]], **kw: Any) -> list[dict[str, float]]:
    """Plateau lengths over a grid (see ``expand_grid``): a list of rows {d, T, B, p, plateau}."""
    g = expand_grid(grid)
    pl = plateau_times(g["d"], g["T"], g["B"], g["p"], **kw)
    return [{**{k: float(g[k][i]) for k in _GRID_DEFAULTS}, "plateau": float(pl[i])} for i in range(pl.size)]


@dataclass
class Trajectory:
    """Reduced dynamics sampled at times ``t`` (one point of the grid)."""

    t: np.ndarray
    w_tilde: np.ndarray  # coefficient of the repeated column (App. A.4.1); = w / sqrt(d) share when p = 0
    w_rest: np.ndarray  # coefficient of the other columns (App. A.4.1)
    w: np.ndarray  # projection <W*, W> / ||W*|| = (w~ + sqrt(d-1) w_rest) / sqrt(d): the w of Eqs. 3, 12
    delta_a: np.ndarray
    alpha: np.ndarray  # attention on one relevant token
    relevant: np.ndarray  # B alpha
    entropy: np.ndarray  # nats
    train_loss: np.ndarray
    test_loss: np.ndarray
    plateau: float | None  # first time the watched observable crossed its level (nan -> None)
    steps: int = 0
    params: dict[str, float] = field(default_factory=dict)


def _times(times: Any) -> np.ndarray:
    times = np.asarray(times, dtype=float).ravel()
    if times.size and np.any(times < 0):
        raise ValueError("times must be >= 0")
    return times


def _crossing(obs: str, level: float, direction: int, P: _Params, terminal: bool = False) -> Callable:
    """An event for scipy's ``solve_ivp``: the observable ``obs`` crossing ``level`` (direction -1: falling, +1:
    rising) under the parameters ``P`` of one point; ``terminal``: the integration stops there."""
    g = OBSERVABLES[obs]

    def ev(t, y):
        return float(g(y[None], P)[0] - level)

    ev.direction, ev.terminal = float(direction), terminal
    return ev


def _observed(times: np.ndarray, Y: np.ndarray, Pn: _Params, plateau: float, steps: int, params: dict) -> Trajectory:
    """The trajectory of states ``Y`` at ``times`` under the per-time parameters ``Pn``: its observables."""
    L = _losses(Y, Pn)
    return Trajectory(
        t=times, w_tilde=Y[:, 0], w_rest=Y[:, 1], w=OBSERVABLES["w"](Y, Pn), delta_a=Y[:, 2], alpha=L["alpha"],
        relevant=L["s"], entropy=_entropy(L["s"], L["r"], Pn), train_loss=L["train"], test_loss=L["test"],
        plateau=None if np.isnan(plateau) else float(plateau), steps=steps, params=params,
    )


def trajectory(
    times: Any,
    d: float,
    T: float,
    B: float = 1,
    p: float = 0.0,
    *,
    test_B: float | None = None,
    rtol: float = 1e-8,
    atol: float = 1e-10,
    event: str = "test_loss",
    level: float | None = None,
    direction: int = -1,
    stiff_switch: bool = True,
) -> Trajectory:
    """loss(t), w(t), alpha(t), w~(t), ... of one (d, T, B, p) at the requested times (any order, >= 0).

    Also returns the first time the observable ``event`` (a key of ``OBSERVABLES``) crosses ``level`` (default
    0.1 = App. D.1's threshold on the test loss) in ``direction`` (-1: falls to <= level, +1: rises to >= level),
    if that happens before max(times).

    Integration: the vectorised DOPRI5 up to 3x the escape time of the training loss, then (``stiff_switch``)
    scipy's LSODA, because after the transition the explicit step is stability-limited (h < ~3 / max(p, 1/d))
    while the state hardly moves; ``steps`` counts DOPRI5 steps plus LSODA right-hand-side evaluations.
    """
    times = _times(times)
    order = np.argsort(times, kind="stable")
    ts = times[order]
    tb = B if test_B is None else test_B
    P = _Params(d, T, B, p, tb)
    lv = np.array([0.1 if level is None else float(level)])
    t_last = float(ts[-1]) if ts.size else 0.0
    # Phase 1 (explicit DOPRI5) through the plateau and the transition; phase 2 (LSODA, stiff-capable) afterwards,
    # where the explicit step is limited by stability (h < ~3 / max(p, 1/d)) while the state barely moves.
    t_switch = t_last
    if stiff_switch and t_last > 0:
        t_esc = float(plateau_times(d, T, B, p, threshold=0.2, loss="train", rtol=rtol, atol=atol)[()])
        if np.isfinite(t_esc) and 3.0 * t_esc < t_last:
            t_switch = 3.0 * t_esc
    k1 = int(np.searchsorted(ts, t_switch, side="right"))
    ts1 = np.append(ts[:k1], t_switch)
    cross, out, nst = _integrate(P, np.array([t_switch]), rtol=rtol, atol=atol, event=event, level=lv,
                                 direction=direction, stop_at_event=False, t_eval=ts1)
    Ys = np.empty((ts.size, 3))
    Ys[:k1] = out[0, :k1]
    c = float(cross[0])
    if k1 < ts.size:
        from scipy.integrate import solve_ivp

        events = _crossing(event, lv[0], direction, P) if np.isnan(c) and np.isfinite(lv[0]) else None
        sol = solve_ivp(lambda t, y: _rhs(y[None], P)[0], (t_switch, t_last), out[0, -1], method="LSODA",
                        t_eval=ts[k1:], rtol=rtol, atol=atol, events=events)
        if not sol.success:
            raise IntegrationError(f"LSODA failed: {sol.message}")
        Ys[k1:] = sol.y.T
        nst += int(sol.t.size if sol.nfev is None else sol.nfev)
        if events is not None and sol.t_events[0].size:
            c = float(sol.t_events[0][0])
    Y = np.empty((times.size, 3))
    if times.size:
        Y[order] = Ys
    return _observed(times, Y, P.take(np.zeros(times.size, dtype=int)), c, nst,
                     {"d": float(d), "T": float(T), "B": float(B), "p": float(p), "test_B": float(tb)})


# ---------------------------------------------------------------------------------------------------------------
# Time-varying repetition: the switch (arXiv 2505.17863 §4; docs/THEORY.md, "The switch")
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    """One stretch of a piecewise-constant repetition schedule: (B, p) until ``until``: a flow time, an event
    ``(observable, level, direction)`` (a key of ``OBSERVABLES``; -1: falls to <= level, +1: rises to >= level), or
    None (to the end)."""

    B: float
    p: float
    until: float | tuple[str, float, int] | None = None


def switched_trajectory(
    times: Any,
    d: float,
    T: float,
    phases: Sequence[Phase],
    *,
    test_B: float = 1.0,
    rtol: float = 1e-8,
    atol: float = 1e-10,
    event: str = "test_loss",
    level: float = 0.1,
    direction: int = -1,
) -> tuple[Trajectory, list[float]]:
    """The reduced flow (Eqs. 12-14 / 17-21) whose (B, p) change when each phase ends, from (0, 0, 0); the state
    (w~, w, da) carries over a switch (the same model keeps training on other data). Returns the trajectory at
    ``times`` (observables with the phase in force at each time; ``plateau``: the first crossing of ``event``)
    and the flow time of each switch that happened. LSODA (scipy) per phase, events located by its root finder."""
    from scipy.integrate import solve_ivp

    times = _times(times)
    t_end = float(times.max()) if times.size else 0.0
    y, t0, cross, switches, nfev = np.zeros(3), 0.0, np.nan, [], 0
    Y = np.full((times.size, 3), np.nan)
    phase_of = np.zeros(times.size, dtype=int)
    for i, ph in enumerate(phases):
        P = _Params(d, T, ph.B, ph.p, test_B)
        stop = t_end
        evs = []
        watch = _crossing(event, level, direction, P)
        if np.isnan(cross):
            if direction * watch(t0, y) >= 0:
                cross = t0
            else:
                evs.append(watch)
        if isinstance(ph.until, tuple) and i < len(phases) - 1:
            sw = _crossing(*ph.until, P, terminal=True)
            if sw.direction * sw(t0, y) >= 0:  # already met: switch at once
                stop = t0
            else:
                evs.append(sw)
        elif ph.until is not None and i < len(phases) - 1:
            stop = min(t_end, max(t0, float(ph.until)))
        mask = (times >= t0) & (times <= stop) if i == 0 else (times > t0) & (times <= stop)
        if stop > t0:
            sol = solve_ivp(lambda t, yy, P=P: _rhs(yy[None], P)[0], (t0, stop), y, method="LSODA", rtol=rtol,
                            atol=atol, dense_output=True, events=evs or None)
            if not sol.success:
                raise IntegrationError(f"LSODA failed: {sol.message}")
            nfev += int(sol.nfev)
            if np.isnan(cross) and evs and evs[0] is watch and sol.t_events[0].size:
                cross = float(sol.t_events[0][0])
            t1 = float(sol.t[-1])
            mask &= times <= t1
            Y[mask] = sol.sol(times[mask]).T if mask.any() else Y[mask]
            y, stop = sol.y[:, -1].copy(), t1
        else:
            Y[mask & (times == t0)] = y
        phase_of[mask] = i
        if i < len(phases) - 1 and stop < t_end:
            switches.append(stop)
        t0 = stop
        if t0 >= t_end:
            break
    Bs = np.array([phases[k].B for k in phase_of], dtype=float)
    ps = np.array([phases[k].p for k in phase_of], dtype=float)
    Pn = _Params(np.full(times.size, d), np.full(times.size, T), Bs, ps, np.full(times.size, test_B))
    return _observed(times, Y, Pn, cross, nfev, {"d": float(d), "T": float(T), "test_B": float(test_B)}), switches


# ---------------------------------------------------------------------------------------------------------------
# Closed form vs integrated dynamics
# ---------------------------------------------------------------------------------------------------------------


def compare_closed_form(
    grid: Mapping[str, Iterable[Any]] | Sequence[Mapping[str, Any]],
    *,
    threshold: float = 0.2,
    rtol: float = 1e-8,
    atol: float = 1e-10,
) -> dict[str, Any]:
    """Integrated plateau vs the linearised closed forms over a grid.

    Returns {"rows": [{d, T, B, p, plateau, arcsinh, log, ratio_arcsinh, ratio_log, ratio_scale}],
    "ratio_arcsinh": (min, max), "ratio_log": (min, max), "ratio_scale": (min, max)} where ratio = closed / integrated
    and ``ratio_scale`` = integrated / (sqrt(d) T / (B f)) is the prefactor of the pure power law.
    """
    g = expand_grid(grid)
    pl = plateau_times(g["d"], g["T"], g["B"], g["p"], threshold=threshold, rtol=rtol, atol=atol)
    eps = 1.0 - threshold
    a = escape_time_linear(g["d"], g["T"], g["B"], g["p"], eps=eps)
    lg = escape_time_linear_log(g["d"], g["T"], g["B"], g["p"], eps=eps)
    sc = 1.0 / _rate(g["d"], g["T"], g["B"], g["p"])
    rows = [{**{k: float(g[k][i]) for k in _GRID_DEFAULTS}, "plateau": float(pl[i]), "arcsinh": float(a[i]),
             "log": float(lg[i]), "ratio_arcsinh": float(a[i] / pl[i]), "ratio_log": float(lg[i] / pl[i]),
             "ratio_scale": float(pl[i] / sc[i])} for i in range(pl.size)]

    def rng(key):
        v = np.array([r[key] for r in rows])
        v = v[np.isfinite(v)]
        return (float(v.min()), float(v.max())) if v.size else (float("nan"), float("nan"))

    return {"rows": rows, "ratio_arcsinh": rng("ratio_arcsinh"), "ratio_log": rng("ratio_log"),
            "ratio_scale": rng("ratio_scale")}
