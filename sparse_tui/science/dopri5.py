"""The reduced dynamics' integrator (science/theory.py: the vector field): a vectorised Dormand-Prince 5(4) with
dense output and event location, every grid point integrated at once."""

from __future__ import annotations

import numpy as np

from sparse_tui.science.theory import OBSERVABLES, _Params, _rate, _rhs

# Butcher tableau (its nodes c are not needed: the system is autonomous), error weights and dense-output matrix of
# Dormand & Prince (1980) as in Hairer's DOPRI5
# (identical to scipy.integrate.RK45).
_A = [
    [],
    [1 / 5],
    [3 / 40, 9 / 40],
    [44 / 45, -56 / 15, 32 / 9],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
]
_B5 = np.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])
_E = np.array([-71 / 57600, 0.0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40])
_P = np.array([
    [1, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432],
    [0, 0, 0, 0],
    [0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799],
    [0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072],
    [0, 127303824393 / 49829197408, -318862633887 / 49829197408, 701980252875 / 199316789632],
    [0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
    [0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423],
])


class IntegrationError(RuntimeError):
    """The integrator could not proceed (step size underflow or step budget exhausted)."""


def _dense(y0: np.ndarray, h: np.ndarray, Q: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """y(t0 + theta h) from the DOPRI5 continuous extension; y0 [n,3], h [n], Q [n,3,4], theta [n]."""
    th = theta[:, None]
    poly = np.stack([th, th**2, th**3, th**4], axis=-1)  # [n,1,4]
    return y0 + h[:, None] * np.sum(Q * poly, axis=-1)


def _integrate(
    P: _Params,
    t_end: np.ndarray,
    *,
    rtol: float,
    atol: float,
    event: str | None = None,
    level: np.ndarray | None = None,
    direction: int = -1,
    stop_at_event: bool = True,
    t_eval: np.ndarray | None = None,
    max_steps: int = 2_000_000,
) -> tuple[np.ndarray, np.ndarray | None, int]:
    """Integrate every point of P from (0, 0, 0) to its own t_end (or to its event, if stop_at_event).

    Returns (crossing times [N] (nan = none), states at t_eval [N, len(t_eval), 3] or None, accepted steps).
    ``direction = -1``: the event fires when observable <= level; ``+1``: when observable >= level.
    """
    N = len(P)
    y = np.zeros((N, 3))
    t = np.zeros(N)
    t_end = np.asarray(t_end, dtype=float).copy()
    cross = np.full(N, np.nan)
    g_fn = OBSERVABLES[event] if event is not None else None
    sign = float(direction)

    out = None
    ptr = np.zeros(N, dtype=int)
    if t_eval is not None:
        t_eval = np.asarray(t_eval, dtype=float)
        out = np.full((N, t_eval.size, 3), np.nan)
        k0 = int(np.searchsorted(t_eval, 0.0, side="right"))
        out[:, :k0] = 0.0
        ptr[:] = k0

    active = t_end > 0
    if g_fn is not None:
        g0 = g_fn(y, P)
        hit0 = sign * (g0 - level) >= 0
        cross[hit0] = 0.0
        if stop_at_event:
            active &= ~hit0
    if not active.any():
        return cross, out, 0

    f = _rhs(y, P)
    # initial step: a small fraction of the linear time scale sqrt(d) T / (B f)
    tau = 1.0 / _rate(P.d, P.T, P.B, P.p)
    h = np.minimum(1e-3 * tau, t_end)
    n_steps = 0
    n_iter = 0
    idx_all = np.arange(N)
    while True:
        idx = idx_all[active]
        if idx.size == 0:
            break
        n_iter += 1
        if n_iter > max_steps:
            raise IntegrationError(f"step budget of {max_steps} exhausted at t = {t[idx].min():.6g}")
        Pi = P.take(idx)
        yi, fi, ti, hi = y[idx], f[idx], t[idx], h[idx]
        hi = np.minimum(hi, t_end[idx] - ti)
        K = np.empty((idx.size, 7, 3))
        K[:, 0] = fi
        for s_ in range(1, 6):
            dy = np.zeros_like(yi)
            for j, a in enumerate(_A[s_]):
                if a != 0.0:
                    dy += a * K[:, j]
            K[:, s_] = _rhs(yi + hi[:, None] * dy, Pi)
        y_new = yi + hi[:, None] * np.tensordot(_B5, K[:, :6], axes=([0], [1]))
        K[:, 6] = _rhs(y_new, Pi)
        err = hi[:, None] * np.tensordot(_E, K, axes=([0], [1]))
        scale = atol + rtol * np.maximum(np.abs(yi), np.abs(y_new))
        en = np.sqrt(np.mean((err / scale) ** 2, axis=1))
        ok = en <= 1.0
        with np.errstate(divide="ignore"):
            fac = np.where(en == 0, 10.0, 0.9 * en ** (-0.2))
        fac = np.where(ok, np.clip(fac, 0.2, 10.0), np.clip(fac, 0.1, 0.9))
        h[idx] = hi * fac
        if np.any(hi * fac <= 1e-14 * np.maximum(ti, 1.0)):
            raise IntegrationError("step size underflow")
        if not ok.any():
            continue
        n_steps += 1
        acc = np.nonzero(ok)[0]
        ia = idx[acc]
        t_new = ti[acc] + hi[acc]
        # snap to t_end when the step was clamped to it
        t_new = np.where(np.abs(t_new - t_end[ia]) <= 1e-12 * np.maximum(t_end[ia], 1.0), t_end[ia], t_new)
        Q = None
        if g_fn is not None or out is not None:
            Q = np.einsum("nsm,sk->nmk", K[acc], _P)
        # dense output at requested times
        if out is not None:
            te_max = t_new
            for jj in np.nonzero(t_eval[np.minimum(ptr[ia], t_eval.size - 1)] <= te_max)[0]:
                i = ia[jj]
                if ptr[i] >= t_eval.size:
                    continue
                k1 = int(np.searchsorted(t_eval, t_new[jj], side="right"))
                ks = np.arange(ptr[i], k1)
                if ks.size == 0:
                    continue
                theta = (t_eval[ks] - ti[acc][jj]) / hi[acc][jj]
                out[i, ks] = _dense(
                    np.repeat(yi[acc][jj][None], ks.size, 0), np.full(ks.size, hi[acc][jj]),
                    np.repeat(Q[jj][None], ks.size, 0), np.clip(theta, 0.0, 1.0))
                ptr[i] = k1
        # event detection on the accepted step, located on the dense output by bisection
        if g_fn is not None:
            Pa = Pi.take(acc)
            g_new = g_fn(y_new[acc], Pa)
            hit = (sign * (g_new - level[ia]) >= 0) & np.isnan(cross[ia])
            if hit.any():
                jh = np.nonzero(hit)[0]
                Ph = Pa.take(jh)
                y0h, hh, Qh, lv = yi[acc][jh], hi[acc][jh], Q[jh], level[ia][jh]
                lo = np.zeros(jh.size)
                hi_ = np.ones(jh.size)
                for _ in range(60):
                    mid = 0.5 * (lo + hi_)
                    gm = g_fn(_dense(y0h, hh, Qh, mid), Ph)
                    inside = sign * (gm - lv) >= 0
                    hi_ = np.where(inside, mid, hi_)
                    lo = np.where(inside, lo, mid)
                cross[ia[jh]] = ti[acc][jh] + hi_ * hh
        t[ia] = t_new
        y[ia] = y_new[acc]
        f[ia] = K[acc, 6]
        done = t[ia] >= t_end[ia]
        if g_fn is not None and stop_at_event:
            done |= ~np.isnan(cross[ia])
        active[ia[done]] = False
    return cross, out, n_steps
