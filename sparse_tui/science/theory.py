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

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from scipy.special import expit

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
    P = _Params(*(np.broadcast_to(v, y.shape[:-1]) for v in (d, T, B, p, B)))
    return _rhs(y.reshape(-1, 3), P).reshape(y.shape)


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
