"""Reduced gradient-flow dynamics of the toy model and closed-form forecasts of the plateau length.

Everything cites ``/work/shared/reference/002_cc8574166552f4e6.txt`` (Zucchet et al., "The emergence of sparse
attention", NeurIPS 2025). Pure numpy / scipy: no torch, no textual.

Notation
========
d: token and target dimension; T: sequence length; B: in-context repetition (the relevant token fills the last B
positions); p: cross-sample repetition (probability that the relevant token is the fixed token x~ = e_1).
The toy model is y = W sum_t softmax(a)_t x_t (Eq. 2). Under Assumptions 1-5 (App. A.1) its gradient flow reduces to

* ``w``   -- the projection <W*, W>_F / ||W*||_F (App. A.3.1), when p = 0;
* ``w~``  -- the coefficient of column 1 (the repeated direction): W_:1 = w~ W*_:1 (App. A.4.1);
* ``w``   -- for p > 0 the coefficient of the other columns: W_:i = w / sqrt(d-1) W*_:i (App. A.4.1);
* ``da``  -- Delta a = a_T - a_t, the attention-score gap between a relevant and an irrelevant token;
* ``alpha`` = 1 / ((T-B) exp(-da) + B) -- the attention on *one* relevant token (Eq. 9); ``s = B alpha`` is the
  attention mass on all relevant tokens and ``r = 1 - s`` the mass on the T-B irrelevant ones.

One system for all cases (the state is always (w~, w, da))
=========================================================
With sigma~ = p + (1-p)/d, sigma = (1-p)/d and n = T - B, the training loss is Eq. 17 with in-context
repetition B added exactly as Eq. 12 adds it to Eq. 11 (the paper: "all our results can be extended to this case"):

    L = 1/2 [ r^2 (w~^2 + w^2) / (d n)  +  sigma~ (s w~ - 1)^2  +  sigma (s w - sqrt(d-1))^2 ].

Gradients (Eqs. 18-21 with alpha -> s = B alpha, 1 - alpha -> r, T - 1 -> n; d s / d da = s r):

    dL/dw~  = r^2 w~ / (d n) + sigma~ s (s w~ - 1)                                  (18)
    dL/dw   = r^2 w  / (d n) + sigma  s (s w  - sqrt(d-1))                          (19)
    dL/dda  = s r [ -r (w~^2 + w^2) / (d n) + sigma~ w~ (s w~ - 1) + sigma w (s w - sqrt(d-1)) ]   (20-21)

and the flow is d/dt (w~, w, da) = -grad L. For p = 0 the flow started at 0 keeps w~ = w_proj / sqrt(d) and
w = w_proj sqrt(d-1) / sqrt(d), where ``w_proj = (w~ + sqrt(d-1) w) / sqrt(d)``; substituting gives exactly Eq. 12,
L = 1/2 [ (1 - B alpha)^2 w^2 / (d (T-B)) + (B alpha w - sqrt(d))^2 / d ], and Eqs. 13-14 for (w_proj, da).
``rhs_eq12`` implements Eqs. 13-14 literally; the tests check that both agree.

Consistency of Eqs. 3-4 with Eq. 12: with B = 1, -dL/dw (Eq. 13) = alpha (sqrt(d) - alpha w) / d
- (1-alpha)^2 w / (d (T-1)) which is Eq. 3, and -dL/dda (Eq. 14) = alpha (1-alpha) [ w (sqrt(d) - alpha w) / d
+ (1-alpha) w^2 / (d (T-1)) ] which is Eq. 4. The signs in the text conversion are consistent; nothing to repair.

Test loss (App. D.1)
====================
The plateau is measured on the test loss "without any form of repetition" for p (Fig. 2 right) and "with the same
B value as during training" for in-context repetition. The test loss applies the p = 0 input covariance (Id / d) to
the current W (column 1 = w~ W*_:1, columns i > 1 = w / sqrt(d-1) W*_:i, unit-norm columns of W*). If the test
sequences carry the relevant token at ``B_test`` of the B trained positions (B_test = B: App. D.1; B_test = 1: a test
set without in-context repetition, the other B - 1 trained positions then holding fresh noise tokens), then with
alpha = s / B,

    L_test = 1/2 [ ((B - B_test) alpha^2 + r^2 / n) (w~^2 + w^2) / d
                   + ((B_test alpha w~ - 1)^2 + (B_test alpha w - sqrt(d-1))^2) / d ].

For p = 0 and B_test = B this equals the training loss. Every loss starts at 0.5 (W = 0).

Plateau (App. D.1)
==================
The plateau length is the first time the test loss reaches ``threshold`` x its initial value (0.2 x 0.5 = 0.1).
``plateau_times`` integrates a whole grid of (d, T, B, p) at once with a vectorised Dormand-Prince 5(4) integrator
(per-point step size and error control, FSAL, 4th-order dense output) and locates the crossing on the dense output
by bisection. Plateau and escape differ by a factor ~T in time scale, so a fixed step would fail.
alpha is evaluated stably as s = B alpha = expit(da - log((T-B)/B)), r = expit(-(da - log((T-B)/B))).

Closed forms (Eqs. 5-6, 15, App. A.3.2, A.4.2)
================================================
Per the reference README, read sqrt(dT) in the text as sqrt(d)*T: the rate is lambda = B f(p,d) / (sqrt(d) T),
f(p, d) = sqrt(p^2 d + (1-p)^2) (f = 1 for p = 0; B f for the extension to both). The linearised flow
w' = lambda (1 + da), da' = lambda w gives w = sinh(lambda t), da = cosh(lambda t) - 1, and the loss
L ~ 1/2 (1 - lambda sinh(2 lambda t)). It reaches 1/2 (1 - eps) when sinh(2 lambda t) = eps / lambda:

    T_eps = arcsinh(eps / lambda) / (2 lambda) = (sqrt(d) T / (2B)) arcsinh(eps sqrt(d) T / B)    (App. A.3.2)
          ~ (sqrt(d) T / (2B)) log(2 eps sqrt(d) T / B)                                            (large x)

(Eq. 6 in the main text drops the factor 2 inside the log and writes ln(eps sqrt(dT)); App. A.3.2 has the 2.)
With p > 0 the same algebra along the unstable direction u = (a w~ + b w) / lambda (a = p/T, b = (1-p)/(sqrt(d) T))
gives the *training* loss 1/2 (1 - lambda sinh(2 lambda t)) and, for the *test* loss (p = 0 covariance),
1/2 (1 - (lambda / f^2) sinh(2 lambda t)): the time scale 1/lambda = sqrt(d) T / f is the paper's (App. A.4.2), the
log factor is ours. App. D.1's threshold 0.2 corresponds to eps = 0.8.

How well the closed form matches the integrated dynamics
========================================================
Measured with ``compare_closed_form`` on d in {16, 32, 64, 128, 256} x T in {64, 256, 1024, 4096} (B = 1, p = 0,
threshold 0.2, i.e. eps = 0.8):

* arcsinh form / integrated plateau: 2.14 .. 4.55 (the log form is the same to 4 digits on this grid);
* integrated plateau / (sqrt(d) T / B): 1.27 .. 1.50, i.e. the plateau is ~1.3-1.5 linear time scales;
* a least-squares fit of the integrated plateaus gives T_plateau ~ d^0.50 T^0.98 (paper Fig. 2: d^0.49 T^0.99).

So the closed form over-estimates the plateau 2-4.5 fold, increasingly with sqrt(d) T, while its *time scale*
sqrt(d) T / B is right. Reason: the linearisation replaces alpha ~ exp(da) / T by (1 + da) / T. The real flow has a
super-exponential positive feedback once da = O(1) and escapes at lambda t ~ 1.3-1.5, whereas the linear loss
1/2 (1 - lambda sinh(2 lambda t)) needs lambda t ~ 1/2 log(1.6 / lambda) to fall to 0.1 -- hence the spurious
log factor. Early on the linearisation is accurate: for d >= 256, T >= 1024 and lambda t <= 0.25, w and da agree
with sinh / cosh - 1 within 1.5% (the neglected curvature d^2L/dw^2 ~ 1/(dT) costs O(1/sqrt(d))). For a smaller
threshold the closed form is closer (threshold 0.99: ratios 0.97 .. 2.8). The exponents of the closed form with the
log factor dropped, ``forecast_exponents()``, are the forecast the console reports (d +0.5, T +1, B -1, f -1).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
from scipy.special import expit

from sparse_tui.base.parse import number, values

__all__ = [
    "f_rep",
    "forecast_exponents",
    "PaperFit",
    "PAPER_FITS",
    "escape_time_linear",
    "escape_time_linear_log",
    "linear_solution",
    "loss_eq12",
    "delta_a_of_alpha",
    "w_equilibrium",
    "hessian_eq12",
    "rhs",
    "rhs_eq12",
    "losses",
    "plateau_times",
    "plateau_grid",
    "trajectory",
    "Trajectory",
    "compare_closed_form",
    "parse_grid",
    "expand_grid",
    "CLOSED_FORM_NOTE",
    "OBSERVABLES",
    "Phase",
    "switched_trajectory",
]

# ---------------------------------------------------------------------------------------------------------------
# Forecasts and the paper's own fits
# ---------------------------------------------------------------------------------------------------------------


SPEED_UP_JUDGED = 1.05  # repetition's speed-up is judged where f(p, d) exceeds this (issue 42: Figs. 3 right, 12)


def f_rep(p: Any, d: Any) -> np.ndarray:
    """f(p, d) = sqrt(p^2 d + (1-p)^2) (App. A.4.2, Eq. 22): the speed-up factor of cross-sample repetition."""
    p, d = np.asarray(p, dtype=float), np.asarray(d, dtype=float)
    return np.sqrt(p * p * d + (1.0 - p) ** 2)


def forecast_exponents() -> dict[str, float]:
    """Exponents of the plateau length forecast by the linearised theory, T_plateau ~ sqrt(d) T / (B f(p,d)).

    (App. A.3.2 / A.4.2 with sqrt(dT) read as sqrt(d)*T, see the reference README; log factor ignored.)
    """
    return {"d": 0.5, "T": 1.0, "B": -1.0, "f": -1.0}


@dataclass(frozen=True)
class PaperFit:
    """A power law reported in the paper: T_plateau = C * prod(x_i ** exponents[i])."""

    key: str
    figure: str
    setting: str
    C: float
    exponents: dict[str, float]
    r2: float
    tie: tuple[tuple[str, float], ...] | None = None  # ratios of a tied fit (shared scale = tie_scale)
    tie_scale: float | None = None

    def predict(self, **x: float) -> float:
        out = self.C
        for k, e in self.exponents.items():
            out *= float(x[k]) ** e
        return out


PAPER_FITS: dict[str, PaperFit] = {
    f.key: f
    for f in [
        PaperFit("fig2_left", "Fig. 2 left", "toy model, gradient flow, in-context repetition B (T = 4096)", 1.51,
                 {"T": 0.99, "B": -0.99, "d": 0.49}, 0.999),
        PaperFit("fig2_right", "Fig. 2 right", "toy model, gradient flow, cross-sample repetition p, test loss "
                 "without repetition (T = 4096); fit ties 2 alpha = beta = -gamma (App. D.2)", 2.15,
                 {"d": 0.51, "T": 1.02, "f": -1.02}, 0.992, tie=(("d", 0.5), ("T", 1.0), ("f", -1.0)),
                 tie_scale=1.02),
        PaperFit("fig3", "Fig. 3", "Transformer (2 layers, 4 heads, Adam 1e-4), linear regression", 0.76,
                 {"d": 1.29, "T": 0.80, "B": -0.80}, 0.995),
        PaperFit("fig4", "Fig. 4 right", "Transformer, in-context associative recall (5% accuracy)", 0.55,
                 {"n_tokens": 0.79, "n_pairs": 2.25}, 0.982),
        PaperFit("fig13", "Fig. 13", "Transformer, layers x heads ablation, linear regression", 1.03,
                 {"d": 1.27, "T": 0.70, "n_layers": 0.06, "n_heads": 0.16}, 0.995),
        PaperFit("fig14_left", "Fig. 14 left", "Transformer, relevant feature, random position", 1.43,
                 {"d": 1.31, "T": 0.58}, 0.998),
        PaperFit("fig14_middle", "Fig. 14 middle", "Transformer, relevant feature, fixed position", 4.20,
                 {"d": 1.22, "T": 0.29}, 0.996),
        PaperFit("fig14_right", "Fig. 14 right", "Transformer, no relevant feature, fixed position", 4.61,
                 {"d": 1.21, "T": 0.30}, 0.999),
        PaperFit("fig15_sgd", "Fig. 15 left", "1-layer 1-head Transformer, SGD 5e-3", 6.42,
                 {"d": 1.44, "T": 1.07}, 0.997),
        PaperFit("fig15_adam", "Fig. 15 right", "1-layer 1-head Transformer, Adam 1e-4", 1.45,
                 {"d": 1.31, "T": 0.57}, 0.998),
    ]
}


def _rate(d: Any, T: Any, B: Any = 1, p: Any = 0.0) -> np.ndarray:
    """lambda = B f(p, d) / (sqrt(d) T): the unstable eigenvalue of the linearised flow (Eq. 15, App. A.4.2)."""
    d, T, B = (np.asarray(v, dtype=float) for v in (d, T, B))
    return B * f_rep(p, d) / (np.sqrt(d) * T)


def _rate_and_k(d: Any, T: Any, B: Any, p: Any, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """lambda and the prefactor k of the linearised loss L ~ 1/2 (1 - k sinh(2 lambda t)) (``escape_time_linear``)."""
    if loss not in ("test", "train"):
        raise ValueError("loss must be 'test' or 'train'")
    lam = _rate(d, T, B, p)
    return lam, (lam if loss == "train" else lam / f_rep(p, d) ** 2)


def escape_time_linear(d: Any, T: Any, B: Any = 1, p: Any = 0.0, eps: float = 0.8, loss: str = "test") -> np.ndarray:
    """Escape time of the linearised dynamics (App. A.3.2): first t with L(t) = (1 - eps) L(0).

    L ~ 1/2 (1 - k sinh(2 lambda t)) with lambda = B f / (sqrt(d) T) and k = lambda for the training loss,
    k = lambda / f^2 for the test loss without cross-sample repetition (identical when p = 0), so
    t = arcsinh(eps / k) / (2 lambda). For p = 0: (sqrt(d) T / (2B)) arcsinh(eps sqrt(d) T / B).
    ``eps = 0.8`` is App. D.1's threshold (loss at 0.2 of its initial value).
    """
    lam, k = _rate_and_k(d, T, B, p, loss)
    return np.arcsinh(eps / k) / (2.0 * lam)


def escape_time_linear_log(d: Any, T: Any, B: Any = 1, p: Any = 0.0, eps: float = 0.8, loss: str = "test"
                           ) -> np.ndarray:
    """Large-argument form of ``escape_time_linear``: log(2 eps / k) / (2 lambda) (App. A.3.2, last equation);
    for p = 0: (sqrt(d) T / (2B)) log(2 eps sqrt(d) T / B)."""
    lam, k = _rate_and_k(d, T, B, p, loss)
    return np.log(2.0 * eps / k) / (2.0 * lam)


def linear_solution(t: Any, d: Any, T: Any, B: Any = 1) -> tuple[np.ndarray, np.ndarray]:
    """Solution of the linearised flow Eq. 15 from (0, 0): w = sinh(lambda t), da = cosh(lambda t) - 1."""
    lam = _rate(d, T, B, 0.0)
    x = lam * np.asarray(t, dtype=float)
    return np.sinh(x), np.cosh(x) - 1.0


# ---------------------------------------------------------------------------------------------------------------
# The vector field
# ---------------------------------------------------------------------------------------------------------------


class _Params:
    """Per-point constants of the reduced dynamics, as float arrays of shape [N]."""

    __slots__ = ("d", "T", "B", "p", "Btest", "c", "inv_dn", "n", "sq", "sig_t", "sig", "inv_d", "sqrt_d")

    def __init__(self, d, T, B, p, Btest):
        d, T, B, p, Btest = (np.asarray(v, dtype=float) for v in np.broadcast_arrays(d, T, B, p, Btest))
        if np.any(d < 1) or np.any(T < 1) or np.any(B < 1):
            raise ValueError("d, T and B must be >= 1")
        if np.any(B > T):
            raise ValueError("B must be <= T")
        if np.any((p < 0) | (p > 1)):
            raise ValueError("p must be in [0, 1]")
        self.d, self.T, self.B, self.p, self.Btest = (v.ravel().copy() for v in (d, T, B, p, Btest))
        self.n = self.T - self.B
        with np.errstate(divide="ignore"):
            # s = B alpha = expit(da - c); T = B means every token is relevant: s = 1 always (c = -inf surrogate)
            self.c = np.where(self.n > 0, np.log(np.maximum(self.n, 1.0) / self.B), -1e6)
            self.inv_dn = np.where(self.n > 0, 1.0 / (self.d * np.maximum(self.n, 1.0)), 0.0)
        self.sq = np.sqrt(self.d - 1.0)
        self.sqrt_d = np.sqrt(self.d)
        self.inv_d = 1.0 / self.d
        self.sig_t = self.p + (1.0 - self.p) / self.d
        self.sig = (1.0 - self.p) / self.d

    def take(self, idx: np.ndarray) -> "_Params":
        out = object.__new__(_Params)
        for k in self.__slots__:
            setattr(out, k, getattr(self, k)[idx])
        return out

    def __len__(self) -> int:
        return self.d.shape[0]


def _sr(y: np.ndarray, P: _Params) -> tuple[np.ndarray, np.ndarray]:
    z = y[..., 2] - P.c
    return expit(z), expit(-z)


def _rhs(y: np.ndarray, P: _Params) -> np.ndarray:
    """-grad L for states y [N, 3] = (w~, w, da)."""
    wt, w = y[:, 0], y[:, 1]
    s, r = _sr(y, P)
    q = r * r * P.inv_dn
    e1 = s * wt - 1.0
    e2 = s * w - P.sq
    out = np.empty_like(y)
    out[:, 0] = -(q * wt + P.sig_t * s * e1)
    out[:, 1] = -(q * w + P.sig * s * e2)
    gs = -r * (wt * wt + w * w) * P.inv_dn + P.sig_t * wt * e1 + P.sig * w * e2
    out[:, 2] = -(s * r * gs)
    return out


def rhs(y: Any, d: Any, T: Any, B: Any = 1, p: Any = 0.0) -> np.ndarray:
    """d/dt (w~, w, da) = -grad L (Eqs. 18-21, extended to in-context repetition B). ``y``: [..., 3]."""
    y = np.asarray(y, dtype=float)
    shape = y.shape
    y2 = y.reshape(-1, 3)
    P = _Params(*(np.broadcast_to(v, shape[:-1]) for v in (d, T, B, p, B)))
    return _rhs(y2, P).reshape(shape)


def rhs_eq12(w: Any, da: Any, d: Any, T: Any, B: Any = 1) -> tuple[np.ndarray, np.ndarray]:
    """Eqs. 13-14 literally (p = 0): returns (dw/dt, dda/dt) = (-dL/dw, -dL/dda) of the loss Eq. 12.

    Written with alpha = 1 / ((T-B) exp(-da) + B) as in the paper (fine for moderate da; ``rhs`` is the stable form).
    """
    w, da, d, T, B = (np.asarray(v, dtype=float) for v in (w, da, d, T, B))
    alpha = 1.0 / ((T - B) * np.exp(-da) + B)
    ba = B * alpha
    gw = (1 - ba) ** 2 * w / (d * (T - B)) + ba * (ba * w - np.sqrt(d)) / d
    ga = alpha * (1 - ba) * (-B * (1 - ba) * w**2 / (d * (T - B)) + B * w * (ba * w - np.sqrt(d)) / d)
    return -gw, -ga


def _alpha_eq9(da: np.ndarray, T: np.ndarray, B: np.ndarray) -> np.ndarray:
    """alpha = 1 / ((T-B) exp(-da) + B) (Eq. 9), evaluated stably: B alpha = expit(da - log((T-B)/B))."""
    return expit(da - np.log((T - B) / B)) / B


def loss_eq12(w: Any, da: Any, d: Any, T: Any, B: Any = 1) -> np.ndarray:
    """The reduced loss Eq. 12, L(w, da) = 1/2 [(1 - B alpha)^2 w^2 / (d (T-B)) + (B alpha w - sqrt(d))^2 / d]: the
    landscape of Fig. 6 (p = 0, B < T)."""
    w, da, d, T, B = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (w, da, d, T, B)))
    ba = B * _alpha_eq9(da, T, B)
    return 0.5 * ((1 - ba) ** 2 * w**2 / (d * (T - B)) + (ba * w - np.sqrt(d)) ** 2 / d)


def delta_a_of_alpha(alpha: Any, T: Any, B: Any = 1) -> np.ndarray:
    """Eq. 9 inverted: da = log(alpha (T-B) / (1 - B alpha)) (what an 'ode' run's toy/alpha says about da)."""
    alpha, T, B = (np.asarray(v, dtype=float) for v in (alpha, T, B))
    with np.errstate(divide="ignore"):
        return np.log(alpha * (T - B)) - np.log1p(-B * alpha)


def w_equilibrium(alpha: Any, d: Any, T: Any, B: Any = 1) -> np.ndarray:
    """w_inf(alpha) = ((1 - B alpha)^2 / (d (T-B)) + (B alpha)^2 / d)^-1 B alpha / sqrt(d): the w at which dL/dw = 0
    for a given attention (App. A.3.3; Fig. 8 left and middle)."""
    alpha, d, T, B = (np.asarray(v, dtype=float) for v in (alpha, d, T, B))
    ba = B * alpha
    return ba / np.sqrt(d) / ((1 - ba) ** 2 / (d * (T - B)) + ba**2 / d)


def hessian_eq12(w: Any, da: Any, d: Any, T: Any, B: Any = 1) -> np.ndarray:
    """The Hessian of Eq. 12 in (w, da), [..., 2, 2] (Fig. 8 right plots its eigenvalues along the flow).

    d2L/dw2 and d2L/dw dda are App. A.3.1's. For d2L/dda2 App. A.3.1 writes (1 - 2 B alpha) / (alpha (1 - B alpha))
    dL/dda + alpha (1 - B alpha) (B^2 w^2 / (d (T-B)) + B^2 w^2 / d), which is the derivative of dL/dda with respect
    to alpha, not da: with g = d alpha / d da = alpha (1 - B alpha) the second derivative in da is g times it,
    (1 - 2 B alpha) dL/dda + g^2 (B^2 w^2 / (d (T-B)) + B^2 w^2 / d). That is what is implemented (the tests check it
    against finite differences of Eq. 12); both vanish at initialisation, where the Hessian is App. A.3.2's."""
    w, da, d, T, B = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (w, da, d, T, B)))
    a = _alpha_eq9(da, T, B)
    ba = B * a
    g = a * (1 - ba)  # d alpha / d da
    sd = np.sqrt(d)
    n = T - B
    grad_da = g * (-B * (1 - ba) * w**2 / (d * n) + B * w * (ba * w - sd) / d)  # Eq. 14
    out = np.empty(w.shape + (2, 2))
    out[..., 0, 0] = (1 - ba) ** 2 / (d * n) + ba**2 / d
    out[..., 0, 1] = out[..., 1, 0] = g * (-2 * B * (1 - ba) * w / (d * n) + B * (2 * ba * w - sd) / d)
    out[..., 1, 1] = (1 - 2 * ba) * grad_da + g * g * (B * B * w**2 / (d * n) + B * B * w**2 / d)
    return out


def _losses(y: np.ndarray, P: _Params) -> dict[str, np.ndarray]:
    wt, w = y[..., 0], y[..., 1]
    s, r = _sr(y, P)
    n2 = wt * wt + w * w
    q = r * r * P.inv_dn
    train = 0.5 * (q * n2 + P.sig_t * (s * wt - 1.0) ** 2 + P.sig * (s * w - P.sq) ** 2)
    alpha = s / P.B
    ba = P.Btest * alpha
    test = 0.5 * (((P.B - P.Btest) * alpha * alpha * P.inv_d + q) * n2
                  + ((ba * wt - 1.0) ** 2 + (ba * w - P.sq) ** 2) * P.inv_d)
    return {"train": train, "test": test, "s": s, "r": r, "alpha": alpha}


def _entropy(s: np.ndarray, r: np.ndarray, P: _Params) -> np.ndarray:
    """Entropy (nats) of the attention: B tokens at s / B, T - B tokens at r / (T - B)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        h1 = np.where(s > 0, -s * (np.log(np.where(s > 0, s, 1.0)) - np.log(P.B)), 0.0)
        h2 = np.where((r > 0) & (P.n > 0), -r * (np.log(np.where(r > 0, r, 1.0)) - np.log(np.maximum(P.n, 1.0))), 0.0)
    return h1 + h2


# Scalar observables of the state, used for plateau detection and trajectories.
OBSERVABLES: dict[str, Callable[[np.ndarray, _Params], np.ndarray]] = {
    "test_loss": lambda y, P: _losses(y, P)["test"],
    "train_loss": lambda y, P: _losses(y, P)["train"],
    "alpha": lambda y, P: _sr(y, P)[0] / P.B,
    "relevant": lambda y, P: _sr(y, P)[0],
    "w": lambda y, P: (y[..., 0] + P.sq * y[..., 1]) / P.sqrt_d,
    "entropy": lambda y, P: _entropy(*_sr(y, P), P),
}


def losses(y: Any, d: Any, T: Any, B: Any = 1, p: Any = 0.0, test_B: Any = None) -> dict[str, np.ndarray]:
    """Train loss (Eq. 17 with B), test loss (see module doc; ``test_B`` defaults to B as in App. D.1), s = B alpha,
    r = 1 - s and alpha for states y [..., 3] = (w~, w, da)."""
    y = np.asarray(y, dtype=float)
    shape = y.shape[:-1]
    tb = B if test_B is None else test_B
    P = _Params(*(np.broadcast_to(v, shape) for v in (d, T, B, p, tb)))
    out = _losses(y.reshape(-1, 3), P)
    return {k: v.reshape(shape) for k, v in out.items()}


# ---------------------------------------------------------------------------------------------------------------
# Vectorised Dormand-Prince 5(4) with dense output
# ---------------------------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------------------------
# Public integration API
# ---------------------------------------------------------------------------------------------------------------


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
    return [
        {"d": float(g["d"][i]), "T": float(g["T"][i]), "B": float(g["B"][i]), "p": float(g["p"][i]),
         "plateau": float(pl[i])}
        for i in range(pl.size)
    ]


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
    times = np.asarray(times, dtype=float).ravel()
    if times.size and np.any(times < 0):
        raise ValueError("times must be >= 0")
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

        y_sw = out[0, -1]
        g_fn = OBSERVABLES[event]

        def fun(t, y):
            return _rhs(y[None], P)[0]

        events = None
        if np.isnan(c) and np.isfinite(lv[0]):
            def ev(t, y):
                return float(g_fn(y[None], P)[0] - lv[0])

            ev.direction = float(direction)
            events = ev
        sol = solve_ivp(fun, (t_switch, t_last), y_sw, method="LSODA", t_eval=ts[k1:], rtol=rtol, atol=atol,
                        events=events)
        if not sol.success:
            raise IntegrationError(f"LSODA failed: {sol.message}")
        Ys[k1:] = sol.y.T
        nst += int(sol.t.size if sol.nfev is None else sol.nfev)
        if events is not None and sol.t_events[0].size:
            c = float(sol.t_events[0][0])
    Y = np.empty((times.size, 3))
    if times.size:
        Y[order] = Ys
    Pn = P.take(np.zeros(times.size, dtype=int))
    L = _losses(Y, Pn)
    return Trajectory(
        t=times, w_tilde=Y[:, 0], w_rest=Y[:, 1], w=OBSERVABLES["w"](Y, Pn), delta_a=Y[:, 2], alpha=L["alpha"],
        relevant=L["s"], entropy=_entropy(L["s"], L["r"], Pn), train_loss=L["train"], test_loss=L["test"],
        plateau=None if np.isnan(c) else c, steps=nst,
        params={"d": float(d), "T": float(T), "B": float(B), "p": float(p), "test_B": float(tb)},
    )


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

    times = np.asarray(times, dtype=float).ravel()
    if times.size and np.any(times < 0):
        raise ValueError("times must be >= 0")
    t_end = float(times.max()) if times.size else 0.0
    y, t0, cross, switches, nfev = np.zeros(3), 0.0, np.nan, [], 0
    Y = np.full((times.size, 3), np.nan)
    phase_of = np.zeros(times.size, dtype=int)
    g_watch = OBSERVABLES[event]
    for i, ph in enumerate(phases):
        P = _Params(d, T, ph.B, ph.p, test_B)
        stop = t_end
        evs = []

        def watch(t, yy, P=P):
            return float(g_watch(yy[None], P)[0] - level)

        watch.direction = float(direction)
        if np.isnan(cross):
            if direction * watch(t0, y) >= 0:
                cross = t0
            else:
                evs.append(watch)
        if isinstance(ph.until, tuple) and i < len(phases) - 1:
            obs, lv, dr = ph.until
            g = OBSERVABLES[obs]

            def sw(t, yy, g=g, lv=lv, P=P):
                return float(g(yy[None], P)[0] - lv)

            sw.direction, sw.terminal = float(dr), True
            if dr * sw(t0, y) >= 0:  # already met: switch at once
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
    L = _losses(Y, Pn)
    traj = Trajectory(
        t=times, w_tilde=Y[:, 0], w_rest=Y[:, 1], w=OBSERVABLES["w"](Y, Pn), delta_a=Y[:, 2], alpha=L["alpha"],
        relevant=L["s"], entropy=_entropy(L["s"], L["r"], Pn), train_loss=L["train"], test_loss=L["test"],
        plateau=None if np.isnan(cross) else float(cross), steps=nfev,
        params={"d": float(d), "T": float(T), "test_B": float(test_B)},
    )
    return traj, switches


# ---------------------------------------------------------------------------------------------------------------
# Closed form vs integrated dynamics
# ---------------------------------------------------------------------------------------------------------------

CLOSED_FORM_NOTE = (
    "Closed form (App. A.3.2, arcsinh) / integrated plateau = 2.14 .. 4.55 on d = 16..256, T = 64..4096 (B = 1, "
    "threshold 0.2); integrated plateau = 1.27 .. 1.50 x sqrt(d) T / B; fitted exponents d 0.50, T 0.98. The "
    "linearisation gets the time scale sqrt(d) T / B right but adds a spurious log factor (it replaces "
    "exp(da) by 1 + da)."
)


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
    rows = []
    for i in range(pl.size):
        rows.append({
            "d": float(g["d"][i]), "T": float(g["T"][i]), "B": float(g["B"][i]), "p": float(g["p"][i]),
            "plateau": float(pl[i]), "arcsinh": float(a[i]), "log": float(lg[i]),
            "ratio_arcsinh": float(a[i] / pl[i]), "ratio_log": float(lg[i] / pl[i]),
            "ratio_scale": float(pl[i] / sc[i]),
        })

    def rng(key):
        v = np.array([r[key] for r in rows])
        v = v[np.isfinite(v)]
        return (float(v.min()), float(v.max())) if v.size else (float("nan"), float("nan"))

    return {"rows": rows, "ratio_arcsinh": rng("ratio_arcsinh"), "ratio_log": rng("ratio_log"),
            "ratio_scale": rng("ratio_scale")}
