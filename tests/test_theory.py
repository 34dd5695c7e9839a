"""Reduced gradient-flow dynamics, closed forms and the 'ode' model (paper App. A, D.1; theory.py, models/ode.py)."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from sparse_tui.models.ode import ode_curve, recorded_curve, simulate_run
from sparse_tui.presets.loading import config_from_json
from sparse_tui.presets.schema import RunConfig
from sparse_tui.presets.tasks import RecallTask
from sparse_tui.science import dynamics as dyn
from sparse_tui.science import theory as th
from sparse_tui.science.fitting import fit_power_law

GRID = {"d": [16, 32, 64, 128, 256], "T": [64, 256, 1024, 4096]}


def reference_plateau(d, T, B=1, p=0.0, test_B=None, level=0.1):
    """scipy DOP853 at rtol 1e-10 / atol 1e-12 with a terminal event on the test loss."""
    P = th._Params(d, T, B, p, B if test_B is None else test_B)

    def fun(t, y):
        return th._rhs(y[None], P)[0]

    def ev(t, y):
        return th._losses(y[None], P)["test"][0] - level

    ev.terminal = True
    ev.direction = -1
    sol = solve_ivp(fun, (0, 1e9), np.zeros(3), method="DOP853", rtol=1e-10, atol=1e-12, events=ev)
    return sol.t_events[0][0]


def reference_plateau_eq12(d, T, B=1, level=0.1):
    """The same from Eqs. 13-14 written literally (2-D state), to check the 3-D reduction end to end."""

    def fun(t, y):
        return np.array(th.rhs_eq12(y[0], y[1], d, T, B))

    def ev(t, y):
        alpha = 1.0 / ((T - B) * math.exp(-y[1]) + B)
        ba = B * alpha
        return 0.5 * ((1 - ba) ** 2 * y[0] ** 2 / (d * (T - B)) + (ba * y[0] - math.sqrt(d)) ** 2 / d) - level

    ev.terminal = True
    sol = solve_ivp(fun, (0, 1e9), np.zeros(2), method="DOP853", rtol=1e-10, atol=1e-12, events=ev)
    return sol.t_events[0][0]


# ------------------------------------------------------------------------------------------------ vector field


def test_eq3_4_agree_with_eq12_13_14():
    rng = np.random.default_rng(0)
    for _ in range(20):
        d, T = rng.integers(2, 300), rng.integers(2, 5000)
        w, da = rng.normal() * 3, rng.normal() * 4
        alpha = 1.0 / (1 + (T - 1) * math.exp(-da))
        eq3 = alpha * (math.sqrt(d) - alpha * w) / d - (1 - alpha) ** 2 * w / (d * (T - 1))
        eq4 = alpha * (1 - alpha) * (w * (math.sqrt(d) - alpha * w) / d + (1 - alpha) * w**2 / (d * (T - 1)))
        dw, dda = th.rhs_eq12(w, da, d, T, 1)
        assert dw == pytest.approx(eq3, rel=1e-10, abs=1e-14)
        assert dda == pytest.approx(eq4, rel=1e-10, abs=1e-14)


def test_3d_flow_reduces_to_eq12_when_p_is_zero():
    rng = np.random.default_rng(1)
    for _ in range(20):
        d, T = int(rng.integers(2, 300)), int(rng.integers(8, 5000))
        B = int(rng.integers(1, 5))
        wp, da = rng.normal() * 3, rng.normal() * 4
        y = np.array([wp / math.sqrt(d), wp * math.sqrt(d - 1) / math.sqrt(d), da])
        f = th.rhs(y, d, T, B, 0.0)
        dw, dda = th.rhs_eq12(wp, da, d, T, B)
        proj = (f[0] + math.sqrt(d - 1) * f[1]) / math.sqrt(d)
        assert proj == pytest.approx(float(dw), rel=1e-9, abs=1e-14)
        assert f[2] == pytest.approx(float(dda), rel=1e-9, abs=1e-14)
        # the symmetric subspace is invariant: w~ / w stays 1 / sqrt(d-1)
        assert f[0] * math.sqrt(d - 1) == pytest.approx(f[1], rel=1e-9, abs=1e-14)
        # and the training loss equals Eq. 12
        alpha = 1.0 / ((T - B) * math.exp(-da) + B)
        eq12 = 0.5 * ((1 - B * alpha) ** 2 * wp**2 / (d * (T - B)) + (B * alpha * wp - math.sqrt(d)) ** 2 / d)
        assert th.losses(y, d, T, B, 0.0)["train"] == pytest.approx(eq12, rel=1e-10)


@pytest.mark.parametrize("d,T,B,p", [(16, 64, 1, 0.3), (64, 512, 4, 0.1), (5, 9, 2, 0.9)])
def test_flow_is_minus_gradient_of_eq17(d, T, B, p):
    rng = np.random.default_rng(2)
    for _ in range(5):
        y = rng.normal(size=3) * np.array([1.0, 2.0, 3.0])
        g = np.zeros(3)
        for i in range(3):
            e = np.zeros(3)
            e[i] = 1e-6
            g[i] = (th.losses(y + e, d, T, B, p)["train"] - th.losses(y - e, d, T, B, p)["train"]) / 2e-6
        np.testing.assert_allclose(th.rhs(y, d, T, B, p), -g, rtol=1e-6, atol=1e-9)


def test_initial_values_and_test_loss():
    for d, T, B, p in [(16, 64, 1, 0.0), (64, 256, 4, 0.3), (1, 2, 1, 0.5)]:
        L = th.losses(np.zeros(3), d, T, B, p)
        assert L["train"] == pytest.approx(0.5) and L["test"] == pytest.approx(0.5)
        assert L["alpha"] == pytest.approx(1.0 / T)
    # p = 0, keep B: test == train
    y = np.array([0.3, 2.0, 1.5])
    L = th.losses(y, 64, 256, 2, 0.0)
    assert L["test"] == pytest.approx(L["train"])
    # p > 0: the test loss is the p = 0 loss of the same W
    assert th.losses(y, 64, 256, 2, 0.4)["test"] == pytest.approx(L["train"])
    # B_test = 1 with perfect attention and w = sqrt(d): 1/2 (1 - 1/B) (only one copy of B carries the signal)
    d, B = 64, 4
    y = np.array([1.0, math.sqrt(d - 1), 60.0])
    assert th.losses(y, d, 256, B, 0.0, test_B=1)["test"] == pytest.approx(0.5 * (1 - 1 / B), rel=1e-6)
    assert th.losses(y, d, 256, B, 0.0, test_B=1)["test"] == pytest.approx(
        0.5 * ((B - 1) / B**2 + (1 / B - 1) ** 2), rel=1e-6)


def test_no_overflow_and_degenerate_cases():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = th.rhs(np.array([1.0, 5.0, 800.0]), 64, 4096, 1, 0.0)  # exp(-da) would underflow, exp(da) overflow
        assert np.all(np.isfinite(f))
        f = th.rhs(np.array([1.0, 5.0, -800.0]), 64, 4096, 1, 0.0)
        assert np.all(np.isfinite(f))
        # T = B: every token is relevant, attention never moves, W learns plain regression
        assert th.rhs(np.array([0.1, 0.2, 0.0]), 16, 8, 8, 0.0)[2] == 0.0
        assert np.isfinite(dyn.plateau_times(16, 8, 8))
        assert np.isfinite(dyn.plateau_times(1, 4, 1, 0.5))  # d = 1
    with pytest.raises(ValueError):
        dyn.plateau_times(16, 4, 8)


# ------------------------------------------------------------------------------------------------ integrator


def test_plateau_matches_solve_ivp_without_repetition():
    g = dyn.expand_grid(GRID)
    pl = dyn.plateau_times(g["d"], g["T"])
    for i in [0, 6, 13, 19]:
        ref = reference_plateau(g["d"][i], g["T"][i])
        assert pl[i] == pytest.approx(ref, rel=1e-3)
    # and against the literal 2-D Eqs. 13-14
    assert pl[5] == pytest.approx(reference_plateau_eq12(g["d"][5], g["T"][5]), rel=1e-3)


def test_plateau_matches_solve_ivp_with_repetition():
    pts = [(64, 1024, 4, 0.0), (32, 4096, 16, 0.0), (64, 512, 1, 0.1), (128, 1024, 1, 0.5), (16, 64, 1, 0.9),
           (64, 512, 2, 0.3)]
    d, T, B, p = (np.array(v, float) for v in zip(*pts))
    pl = dyn.plateau_times(d, T, B, p)
    for i, pt in enumerate(pts):
        assert pl[i] == pytest.approx(reference_plateau(*pt), rel=1e-3), pt
    # B = 2 trained, B_test = 2 vs the literal 2-D equations
    assert pl[1] == pytest.approx(reference_plateau_eq12(32, 4096, 16), rel=1e-3)


def test_plateau_never_reached_is_nan():
    # trained with B = 2 but tested with B = 1: the toy model cannot generalise (App. D.1); loss -> 0.25 > 0.1
    assert np.isnan(dyn.plateau_times(16, 64, 2, test_B=1))
    assert np.isnan(dyn.plateau_times(64, 1024, t_max=100.0))


def test_grid_is_fast_and_fits_the_paper_exponents():
    g = dyn.expand_grid(GRID)
    t0 = time.perf_counter()
    pl = dyn.plateau_times(g["d"], g["T"])
    elapsed = time.perf_counter() - t0
    assert elapsed < 5.0, elapsed
    rows = [{"task.d": d, "task.T": T, "plateau_step": x} for d, T, x in zip(g["d"], g["T"], pl)]
    fit = fit_power_law(rows, ["d", "T"])
    # paper Fig. 2 left: 1.51 T^0.99 B^-0.99 d^0.49
    assert fit.exponents["d"] == pytest.approx(0.49, abs=0.05)
    assert fit.exponents["T"] == pytest.approx(0.99, abs=0.05)
    assert fit.r2 > 0.999


def test_B_exponent_is_minus_one():
    rows = dyn.plateau_grid({"d": [16, 64, 256], "T": [4096], "B": [1, 2, 4, 8, 16]})
    fit = fit_power_law(rows, ["d", "B"], target="plateau")
    assert fit.exponents["B"] == pytest.approx(-1.0, abs=0.05)
    assert fit.exponents["d"] == pytest.approx(0.5, abs=0.05)


def test_cross_sample_repetition_shortens_plateau_as_f_predicts():
    for d in (64, 256):
        p = np.array([0.0, 0.1, 0.3, 0.5])
        pl = dyn.plateau_times(d, 4096, 1, p)
        assert np.all(np.diff(pl) < 0)  # more repetition, shorter plateau
        ratio = pl * th.f_rep(p, d) / pl[0]  # 1 if T_plateau ~ 1 / f
        np.testing.assert_allclose(ratio, 1.0, atol=0.1)
    rows = dyn.plateau_grid({"d": [16, 32, 64, 128, 256], "T": [4096], "p": [0, 0.03, 0.1, 0.3]})
    fit = fit_power_law(rows, ["d", "T", "f"], target="plateau", tie=[("d", 0.5), ("T", 1.0), ("f", -1.0)])
    # paper Fig. 2 right: 2.15 (sqrt(d) T / f)^1.02
    assert fit.tie_scale == pytest.approx(1.0, abs=0.05)


# ------------------------------------------------------------------------------------------------ closed forms


def test_closed_forms_hand_computed():
    # d = 64, T = 512, B = 1: lambda = 1 / (8 * 512) = 1/4096; eps = 0.8
    assert th.escape_time_linear(64, 512) == pytest.approx(2048 * math.asinh(3276.8))
    assert th.escape_time_linear(64, 512) == pytest.approx(17997.3526, rel=1e-8)
    assert th.escape_time_linear_log(64, 512) == pytest.approx(2048 * math.log(6553.6))
    # B = 4: lambda = 1/1024, 1 / (2 lambda) = 512
    assert th.escape_time_linear(64, 512, 4) == pytest.approx(512 * math.asinh(819.2))
    assert th.escape_time_linear(64, 512, 4) == pytest.approx(3789.5556, rel=1e-7)
    # p = 0.5, d = 64: f = sqrt(16.25); train loss k = lambda, test loss k = lambda / f^2
    f = math.sqrt(16.25)
    lam = f / 4096
    assert th.escape_time_linear(64, 512, 1, 0.5, loss="train") == pytest.approx(math.asinh(0.8 / lam) / (2 * lam))
    assert th.escape_time_linear(64, 512, 1, 0.5) == pytest.approx(math.asinh(0.8 * f * f / lam) / (2 * lam))
    assert th.f_rep(0.0, 100) == 1.0 and th.f_rep(1.0, 100) == pytest.approx(10.0)
    assert th.forecast_exponents() == {"d": 0.5, "T": 1.0, "B": -1.0, "f": -1.0}
    assert th.PAPER_FITS["fig2_left"].exponents == {"T": 0.99, "B": -0.99, "d": 0.49}
    assert th.PAPER_FITS["fig2_right"].C == 2.15 and th.PAPER_FITS["fig4"].exponents["n_pairs"] == 2.25


def test_linearisation_matches_early_dynamics():
    for d, T in [(256, 1024), (1024, 4096)]:
        lam = 1 / (math.sqrt(d) * T)
        ts = np.array([0.05, 0.1, 0.25]) / lam
        tr = dyn.trajectory(ts, d, T)
        w, da = th.linear_solution(ts, d, T)
        np.testing.assert_allclose(tr.w, w, rtol=0.02)
        np.testing.assert_allclose(tr.delta_a, da, rtol=0.02)
        # the w error comes from the neglected curvature ~ 1 / (d T): shrinks with d
    e1 = abs(dyn.trajectory([0.25 * 16 * 1024], 256, 1024).w[0] / math.sinh(0.25) - 1)
    e2 = abs(dyn.trajectory([0.25 * 64 * 1024], 4096, 1024).w[0] / math.sinh(0.25) - 1)
    assert e2 < e1


def test_compare_closed_form_reports_ratio_range():
    out = dyn.compare_closed_form({"d": [16, 256], "T": [64, 4096]})
    lo, hi = out["ratio_arcsinh"]
    assert 1.5 < lo <= hi < 6  # the linearisation over-estimates the plateau 2-4.5 fold (see theory docstring)
    slo, shi = out["ratio_scale"]
    assert 1.0 < slo <= shi < 2.0
    assert len(out["rows"]) == 4


def test_grid_helpers():
    assert dyn.parse_grid("d=16,32 T=64") == {"d": [16, 32], "T": [64]}
    assert dyn.parse_grid(["p=0,0.5"]) == {"p": [0.0, 0.5]}
    with pytest.raises(ValueError):
        dyn.parse_grid(["x=1"])
    g = dyn.expand_grid({"d": [16, 32], "T": [64, 128]})
    assert list(g["d"]) == [16, 16, 32, 32] and list(g["T"]) == [64, 128, 64, 128]
    assert list(g["B"]) == [1] * 4 and list(g["p"]) == [0] * 4


def test_trajectory_values():
    tr = dyn.trajectory([0.0, 100.0, 50.0], 64, 256, 1, 0.2)
    assert tr.test_loss[0] == 0.5 and tr.w[0] == 0.0 and tr.alpha[0] == pytest.approx(1 / 256)
    assert tr.entropy[0] == pytest.approx(math.log(256))
    assert tr.w_tilde[2] < tr.w_tilde[1]  # unsorted times are returned in the order asked
    assert tr.plateau is None  # not reached by t = 100


# ------------------------------------------------------------------------------------------------ ode model


def _cfg(**kw):
    data = {"task": {"kind": "linreg", "d": 64, "T": 512}, "model": {"kind": "ode"},
            "train": {"lr": 1.0, "steps": 20000}, "eval": {"every": 500}}
    for k, v in kw.items():
        sec, key = k.split("__")
        data.setdefault(sec, {})[key] = v
    return RunConfig.model_validate(data)


def test_simulate_run_metrics_and_plateau():
    cfg = _cfg(train__steps=20010)
    run = simulate_run(cfg)
    assert list(run.steps[:3]) == [0, 500, 1000] and run.steps[-1] == 20010
    names = {"train/loss", "test/loss", "toy/w", "toy/alpha", "attn/L1/H0/relevant", "attn/L1/relevant",
             "attn/entropy/L1"}
    assert names <= set(run.metrics)
    assert all(len(v) == len(run.steps) for v in run.metrics.values())
    assert run.metrics["test/loss"][0] == 0.5
    ref = float(dyn.plateau_times(64, 512))
    assert run.plateau_step == pytest.approx(ref, rel=1e-6)
    # the eval-grid crossing brackets the exact one
    i = int(np.argmax(run.metrics["test/loss"] <= 0.1))
    assert run.steps[i - 1] < run.plateau_step <= run.steps[i]
    # lr halves -> twice the steps
    assert simulate_run(_cfg(train__lr=0.5)).plateau_step == pytest.approx(2 * ref, rel=1e-6)
    # not reached within the run
    assert simulate_run(_cfg(train__steps=1000)).plateau_step is None
    # ode_curve agrees with the recorded run
    np.testing.assert_allclose(ode_curve(cfg, run.steps), run.metrics["test/loss"], rtol=1e-9, atol=1e-12)


def test_recorded_curve_is_the_ode_of_the_stored_config():
    """The console's theory overlay (issue 23: computed by the core, not the console's poller): the test loss of
    the reduced dynamics at evenly spaced steps up to the run's total steps, from the config JSON the store keeps."""
    cfg = _cfg(train__steps=20000)
    stored = config_from_json(cfg.model_dump(mode="json"))  # as a record gives it (RunRecord.run_config)
    steps, loss = recorded_curve(stored, None, points=4)
    assert steps == [0.0, 5000.0, 10000.0, 15000.0, 20000.0]
    np.testing.assert_allclose(loss, ode_curve(cfg, steps), rtol=1e-12)
    assert loss[0] == 0.5 and loss[-1] < 0.1  # past the plateau (d=64, T=512: ~1e4 steps at lr 1)
    steps, _ = recorded_curve(stored, 1000, points=4)  # the run's recorded total (a resumed or extended run)
    assert steps[-1] == 1000.0
    other = cfg.model_copy(update={"task": RecallTask(n_tokens=8, n_pairs=2)})
    assert recorded_curve(other, None) is None  # no reduced dynamics for recall
    assert recorded_curve(None, None) is None  # a config that no longer validates


def test_simulate_run_repetition_and_plateau_config():
    # cross-sample repetition: combined projection and w~ are recorded
    run = simulate_run(_cfg(task__p=0.3))
    assert "toy/w_tilde" in run.metrics
    assert run.plateau_step == pytest.approx(float(dyn.plateau_times(64, 512, 1, 0.3)), rel=1e-6)
    # in-context repetition: the test set keeps B only with test_repetition (the linreg task's test set)
    assert simulate_run(_cfg(task__B=4)).plateau_step is None
    r = simulate_run(_cfg(task__B=4, task__test_repetition=True))
    assert r.plateau_step == pytest.approx(float(dyn.plateau_times(64, 512, 4)), rel=1e-6)
    # other plateau metrics / modes
    r = simulate_run(_cfg(plateau__metric="toy/alpha", plateau__mode="above", plateau__value=0.5))
    i = int(np.argmax(r.metrics["toy/alpha"] >= 0.5))
    assert r.steps[i - 1] < r.plateau_step <= r.steps[i]
    with pytest.raises(ValueError, match="plateau.metric: 'test/acc' is not logged"):  # presets refuse it...
        _cfg(plateau__metric="test/acc")
    cfg = _cfg()
    cfg.plateau.metric = "test/acc"  # ...and the flow still reports no exact plateau for a metric it cannot watch
    r = simulate_run(cfg)
    assert r.plateau_step is None and not r.plateau_exact


def test_stiff_phase_hands_over_to_lsoda():
    # after the transition the explicit step is stability-limited; the LSODA tail must agree with pure DOPRI5
    ts = np.linspace(0, 5000, 101)
    a = dyn.trajectory(ts, 16, 64, 1, 0.5, event="alpha", level=0.9, direction=1)
    b = dyn.trajectory(ts, 16, 64, 1, 0.5, event="alpha", level=0.9, direction=1, stiff_switch=False)
    np.testing.assert_allclose(a.test_loss, b.test_loss, rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(a.w, b.w, rtol=1e-6)
    np.testing.assert_allclose(a.alpha, b.alpha, rtol=1e-6)
    assert a.plateau == pytest.approx(b.plateau, rel=1e-6)  # located in the LSODA phase (t_esc ~ 222)
    assert a.plateau > 3 * dyn.plateau_times(16, 64, 1, 0.5, loss="train")
    # a long run stays cheap
    t0 = time.perf_counter()
    dyn.trajectory(np.linspace(0, 1e6, 1001), 16, 64, 1, 0.5)
    assert time.perf_counter() - t0 < 5.0


def test_warmup_shifts_plateau_by_half_the_warmup():
    # flow time = cumulative lr: a linear warmup of W steps loses ~W/2 steps of time
    base = simulate_run(_cfg()).plateau_step
    warm = simulate_run(_cfg(train__warmup_steps=1000)).plateau_step
    assert warm == pytest.approx(base + 500, abs=1.0)


# ------------------------------------------------------------------------------------------------ Figs. 6, 8, 10


def _fd_hessian(d, T, B, w, da, h=1e-4):
    """Second differences of Eq. 12 written out here (independent of theory.py)."""
    def L(w, da):
        a = 1.0 / ((T - B) * math.exp(-da) + B)
        return 0.5 * ((1 - B * a) ** 2 * w**2 / (d * (T - B)) + (B * a * w - math.sqrt(d)) ** 2 / d)

    hw, ha = h * max(1.0, abs(w)), h * max(1.0, abs(da))
    hww = (L(w + hw, da) - 2 * L(w, da) + L(w - hw, da)) / hw**2
    haa = (L(w, da + ha) - 2 * L(w, da) + L(w, da - ha)) / ha**2
    hwa = (L(w + hw, da + ha) - L(w + hw, da - ha) - L(w - hw, da + ha) + L(w - hw, da - ha)) / (4 * hw * ha)
    return np.array([[hww, hwa], [hwa, haa]]), L(w, da)


@pytest.mark.parametrize("d,T,B", [(64, 512, 1), (16, 64, 2), (256, 256, 1)])
def test_fig8_hessian_and_fig6_landscape_against_finite_differences(d, T, B):
    rng = np.random.default_rng(5)
    for _ in range(6):
        w, da = rng.uniform(-1, 1.3) * math.sqrt(d), rng.uniform(-2, 12)
        fd, loss = _fd_hessian(d, T, B, w, da)
        assert th.loss_eq12(w, da, d, T, B) == pytest.approx(loss, rel=1e-12)
        np.testing.assert_allclose(th.hessian_eq12(w, da, d, T, B), fd, rtol=1e-3, atol=1e-8)
    # at initialisation: App. A.3.2's Hessian, eigenvalues close to +-B/(sqrt(d) T) (sqrt(dT) read as sqrt(d) T)
    H = th.hessian_eq12(0.0, 0.0, d, T, B)
    assert H[0, 0] == pytest.approx((T - B) / (d * T**2) + B**2 / (d * T**2))
    assert H[0, 1] == pytest.approx(-(T - B) / T**2 * B / math.sqrt(d)) and H[1, 1] == 0.0
    ev = np.linalg.eigvalsh(H)
    lam = B / (math.sqrt(d) * T)
    assert ev[0] == pytest.approx(-lam, rel=0.1 + 2 * B / T) and ev[1] == pytest.approx(lam, rel=0.1 + 2 * B / T)


def test_fig8_w_equilibrium_zeroes_the_w_gradient_and_tends_to_sqrt_d():
    d, T = 64, 512
    for alpha in (1 / T, 0.01, 0.2, 0.9, 0.999):
        da = float(th.delta_a_of_alpha(alpha, T))
        assert 1.0 / ((T - 1) * math.exp(-da) + 1) == pytest.approx(alpha, rel=1e-10)
        w = float(th.w_equilibrium(alpha, d, T))
        dw, _ = th.rhs_eq12(w, da, d, T)  # -dL/dw (Eq. 13) vanishes at w_inf
        assert abs(float(dw)) < 1e-12
    # B alpha -> 1: w_inf -> sqrt(d) / (1 - eps) (App. A.3.3); increasing then decreasing in alpha (Fig. 8 left)
    assert float(th.w_equilibrium(1 - 1e-6, d, T)) == pytest.approx(math.sqrt(d) / (1 - 1e-6), rel=1e-6)
    ws = th.w_equilibrium(np.linspace(1 / T, 1, 400), d, T)
    assert ws.argmax() not in (0, len(ws) - 1) and ws.max() > math.sqrt(d)


def _solve_eq3_4(d, T, times):
    """Eqs. 3-4 of the paper, integrated by scipy (independent of theory.py's DOPRI5 and its 3-variable form)."""
    from scipy.integrate import solve_ivp

    def f(t, y):
        w, da = y
        a = 1.0 / (1 + (T - 1) * math.exp(-da))
        return [a * (math.sqrt(d) - a * w) / d - (1 - a) ** 2 * w / (d * (T - 1)),
                a * (1 - a) * (w * (math.sqrt(d) - a * w) / d + (1 - a) * w**2 / (d * (T - 1)))]

    sol = solve_ivp(f, (0, max(times)), [0.0, 0.0], t_eval=sorted(times), method="LSODA", rtol=1e-10, atol=1e-12)
    return sol.y


@pytest.mark.parametrize("d,T", [(64, 512), (64, 256)])
def test_fig1ab_and_fig6_flow_against_an_independent_integration(d, T):
    """Figs. 1a/1b (T = 512, d = 64) and Fig. 6's path (T = 256, d = 64): w, alpha and the loss of theory.trajectory
    (what the 'ode' runs record) against scipy's LSODA on Eqs. 3-4, through the plateau, the drop and after."""
    t_end = 3.0 * float(dyn.plateau_times(d, T))
    times = np.linspace(0, t_end, 61)
    tr = dyn.trajectory(times, d, T)
    w, da = _solve_eq3_4(d, T, times)
    alpha = 1.0 / (1 + (T - 1) * np.exp(-da))
    np.testing.assert_allclose(tr.w, w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tr.alpha, alpha, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(tr.test_loss, th.loss_eq12(w, da, d, T), rtol=1e-4, atol=1e-9)
    assert w.max() > w[-1] > math.sqrt(d)  # A.3.3: the projection overshoots sqrt(d), then decreases towards it


def test_fig10_flow_with_repetition_against_an_independent_integration():
    """Fig. 10 (T = 512, d = 64): Eqs. 18-21 integrated by scipy (written out here) against theory.trajectory."""
    from scipy.integrate import solve_ivp

    d, T, p = 64, 512, 0.1
    st, sg = p + (1 - p) / d, (1 - p) / d

    def f(t, y):
        wt, w, da = y
        a = 1.0 / (1 + (T - 1) * math.exp(-da))
        q = (1 - a) ** 2 / (d * (T - 1))
        gwt = q * wt + a * st * (a * wt - 1)
        gw = q * w + a * sg * (a * w - math.sqrt(d - 1))
        gda = a * (1 - a) * (-(1 - a) * (w * w + wt * wt) / (d * (T - 1)) + wt * st * (a * wt - 1)
                             + w * sg * (a * w - math.sqrt(d - 1)))
        return [-gwt, -gw, -gda]

    times = np.linspace(0, 2.5 * float(dyn.plateau_times(d, T, 1, p)), 41)
    sol = solve_ivp(f, (0, times[-1]), [0.0, 0.0, 0.0], t_eval=times, method="LSODA", rtol=1e-10, atol=1e-12)
    tr = dyn.trajectory(times, d, T, 1, p)
    np.testing.assert_allclose(tr.w_tilde, sol.y[0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(tr.w_rest, sol.y[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tr.delta_a, sol.y[2], rtol=1e-5, atol=1e-6)
    # the repeated component leads: w~ reaches half its optimum (1) before w / sqrt(d-1) does
    k1 = int(np.argmax(sol.y[0] >= 0.5))
    k2 = int(np.argmax(sol.y[1] / math.sqrt(d - 1) >= 0.5))
    assert 0 < k1 < k2
