"""Power-law fits of plateau lengths (paper App. D.2; sparse_tui/science/fitting.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sparse_tui.science.fitting import FitError, compare_to_theory, fit_power_law, format_comparison


def synthetic(seed, C=1.5, bd=0.5, bT=1.0, bB=-1.0, noise=0.05, seeds=2, style="flat"):
    """Runs on a d x T x B grid with log-normal noise, `seeds` repeated measurements per point."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in (16, 32, 64, 128):
        for T in (64, 256, 1024):
            for B in (1, 2, 4):
                for s in range(seeds):
                    y = C * d**bd * T**bT * B**bB * math.exp(noise * rng.normal())
                    if style == "flat":
                        rows.append({"params.task.d": d, "params.task.T": T, "params.task.B": B,
                                     "params.model.kind": "toy", "seed": s, "plateau_step": y})
                    else:
                        rows.append({"params": {"task": {"d": d, "T": T, "B": B, "p": 0.0}, "model": {"kind": "toy"}},
                                     "seed": s, "plateau_step": y})
    return rows


def test_recovers_known_exponents():
    fit = fit_power_law(synthetic(0), ["d", "T", "B"])
    assert fit.n == 72 and fit.n_censored == 0 and fit.dof == 68
    for v, true in (("d", 0.5), ("T", 1.0), ("B", -1.0)):
        lo, hi = fit.ci[v]
        assert lo < true < hi
        assert fit.exponents[v] == pytest.approx(true, abs=0.03)
    assert fit.C_ci[0] < 1.5 < fit.C_ci[1]
    assert fit.r2 > 0.99
    assert fit.predict(d=64, T=256, B=2) == pytest.approx(1.5 * 8 * 128, rel=0.1)
    assert fit.formula().startswith("plateau_step = 1.") and "· d^0.5" in fit.formula() and "R²" in fit.summary()


def test_interval_coverage_over_seeds():
    hits = {"d": 0, "T": 0, "B": 0, "C": 0}
    n = 60
    for seed in range(n):
        fit = fit_power_law(synthetic(seed, noise=0.2, seeds=1), ["d", "T", "B"])
        for v, true in (("d", 0.5), ("T", 1.0), ("B", -1.0)):
            hits[v] += fit.ci[v][0] <= true <= fit.ci[v][1]
        hits["C"] += fit.C_ci[0] <= 1.5 <= fit.C_ci[1]
    for v, h in hits.items():
        assert h / n >= 0.9, (v, h)


def test_column_names_and_derived_variables():
    flat = synthetic(1)
    nested = synthetic(1, style="nested")
    a = fit_power_law(flat, ["d", "T/B"])
    b = fit_power_law(nested, ["task.d", "T/B"])
    c = fit_power_law(flat, ["params.task.d", "params.task.T/params.task.B"])
    assert a.exponents["d"] == pytest.approx(b.exponents["task.d"])
    assert a.exponents["d"] == pytest.approx(c.exponents["params.task.d"])
    assert a.exponents["T/B"] == pytest.approx(1.0, abs=0.03)
    assert a.columns["d"] == "params.task.d"
    assert "(T/B)^" in a.formula()


def test_f_variable_and_tied_fit():
    # T = 3 (sqrt(d) T / f)^1.02 + noise, as in the paper's Fig. 2 right fit (2 alpha = beta = -gamma)
    rng = np.random.default_rng(3)
    rows = []
    for d in (16, 32, 64, 128, 256):
        for p in (0.0, 0.03, 0.1, 0.3):
            for T in (1024, 4096):
                f = math.sqrt(p * p * d + (1 - p) ** 2)
                rows.append({"task.d": d, "task.p": p, "task.T": T,
                             "plateau_step": 3 * (math.sqrt(d) * T / f) ** 1.02 * math.exp(0.03 * rng.normal())})
    tie = [("d", 0.5), ("T", 1.0), ("f", -1.0)]
    fit = fit_power_law(rows, ["d", "T", "f"], tie=tie)
    assert fit.tie_scale == pytest.approx(1.02, abs=0.02)
    assert fit.tie_scale_ci[0] < 1.02 < fit.tie_scale_ci[1]
    assert fit.exponents["d"] == pytest.approx(0.5 * fit.tie_scale)
    assert fit.exponents["f"] == pytest.approx(-fit.tie_scale)
    assert fit.ci["f"][0] < fit.ci["f"][1]
    assert fit.dof == len(rows) - 2
    # tied variables need not be listed; free + tied mix
    fit2 = fit_power_law(rows, [], tie=tie)
    assert fit2.tie_scale == pytest.approx(fit.tie_scale)
    fit3 = fit_power_law(rows, ["d", "T", "f"], tie=[("T", 1.0), ("f", -1.0)])
    assert fit3.exponents["d"] == pytest.approx(0.51, abs=0.03) and fit3.dof == len(rows) - 3
    cmp = compare_to_theory(fit, paper="fig2_right")
    assert [r["paper_fig"] for r in cmp] == ["Fig. 2 right"] * 3
    assert cmp[0]["forecast"] == 0.5 and cmp[2]["forecast"] == -1.0
    assert cmp[1]["paper_diff"] == pytest.approx(fit.exponents["T"] - 1.02)
    assert "Fig. 2 right" in format_comparison(cmp)


def test_censored_runs_are_counted_not_dropped():
    rows = synthetic(4, seeds=1)
    rows[0]["plateau_step"] = None
    rows[1]["plateau_step"] = float("nan")
    rows[2].pop("plateau_step")
    rows[3]["plateau_step"] = None
    rows[3]["steps_done"] = 10.0  # budget far below the predicted plateau: consistent
    rows[4]["plateau_step"] = None
    rows[4]["steps_done"] = 1e9  # ran far beyond the predicted plateau without crossing: inconsistent
    fit = fit_power_law(rows, ["d", "T", "B"])
    assert fit.n_censored == 5 and fit.n == len(rows) - 5
    assert [c["row"] for c in fit.censored] == [0, 1, 2, 3, 4]
    assert fit.censored[3]["lower_bound"] == 10.0 and not fit.censored[3]["inconsistent"]
    assert fit.censored[4]["inconsistent"] and fit.n_censored_inconsistent == 1
    assert all(c["predicted"] > 0 for c in fit.censored)
    assert "5 run(s) never reached" in fit.summary()
    assert any("censored" in n for n in fit.notes)


def test_bootstrap():
    fit = fit_power_law(synthetic(5, noise=0.1), ["d", "T", "B"], bootstrap=200, seed=1)
    again = fit_power_law(synthetic(5, noise=0.1), ["d", "T", "B"], bootstrap=200, seed=1)
    assert fit.boot_ci == again.boot_ci
    for v in ("d", "T", "B"):
        lo, hi = fit.boot_ci[v]
        assert lo < fit.exponents[v] < hi
        # percentile intervals are comparable in width to the t-intervals
        w_t = fit.ci[v][1] - fit.ci[v][0]
        assert 0.3 * w_t < hi - lo < 3 * w_t
    assert fit.boot_ci["C"][0] < fit.C < fit.boot_ci["C"][1]


def test_compare_to_theory_with_the_law_it_is_given():
    """Which law applies is the atlas's decision (atlas.law_of_presets); compare_to_theory never guesses one."""
    fit = fit_power_law(synthetic(6), ["d", "T", "B"])
    assert all(r["paper"] is None for r in compare_to_theory(fit))
    cmp = compare_to_theory(fit, paper="fig2_left")
    assert {r["variable"]: r["paper"] for r in cmp} == {"d": 0.49, "T": 0.99, "B": -0.99}
    assert all(r["forecast_in_ci"] for r in cmp)
    cmp = compare_to_theory(fit, paper="fig3")
    assert cmp[0]["paper_fig"] == "Fig. 3" and cmp[0]["paper"] == 1.29
    recall = [{"task.n_tokens": v, "task.n_pairs": n, "plateau_step": 0.55 * v**0.79 * n**2.25 * (1 + 0.01 * i)}
              for i, (v, n) in enumerate([(64, 8), (64, 16), (128, 8), (128, 32), (256, 16), (256, 32)])]
    cmp = compare_to_theory(fit_power_law(recall, ["n_tokens", "n_pairs"]), paper="fig4")
    assert cmp[1]["paper"] == 2.25 and cmp[1]["forecast"] == 1.0 and cmp[1]["forecast_note"]
    with pytest.raises(FitError):
        compare_to_theory(fit, paper="fig99")


def test_other_columns():
    rows = [{"params.model.d_model": dm, "params.train.lr": lr, "params.model.n_heads": h,
             "plateau_step": 100 * dm**0.3 * lr**-1 * h**0.2 * (1 + 0.01 * ((dm + h) % 3))}
            for dm in (32, 64, 128) for lr in (1e-4, 3e-4, 1e-3) for h in (1, 2, 4)]
    fit = fit_power_law(rows, ["model.d_model", "train.lr", "n_heads"])
    assert fit.exponents["train.lr"] == pytest.approx(-1.0, abs=0.05)
    assert fit.exponents["n_heads"] == pytest.approx(0.2, abs=0.05)


@pytest.mark.parametrize(
    "variables,mutate,kw,match",
    [
        (["d", "nope"], None, {}, "unknown variable 'nope'"),
        (["d", "T"], None, {"target": "missing_col"}, "unknown target"),
        (["d", "p"], None, {}, "non-positive|positive values"),
        (["d", "T"], "neg_target", {}, "positive values"),
        (["d", "T"], "few", {}, "too few runs"),
        (["d", "T", "B"], "constB", {}, "'B' is constant"),
        (["T", "T/B"], "constB", {}, "collinear|constant"),
        (["d", "T"], "text", {}, "not a number"),
        (["d", "kind"], None, {}, "ambiguous"),
        (["d", "T"], None, {"tie": [("d", 0.5)]}, "at least two"),
        (["d", "T"], None, {"tie": [("d", 0.5), ("T", 0.0)]}, "non-zero"),
        (["d", "d"], None, {}, "twice"),
    ],
)
def test_errors(variables, mutate, kw, match):
    rows = synthetic(7, style="nested", seeds=1)
    for r in rows:
        r["params"]["task"]["kind"] = "linreg"
    if mutate == "neg_target":
        rows[0]["plateau_step"] = 0
    elif mutate == "few":
        rows = rows[:3]
    elif mutate == "constB":
        rows = [r for r in rows if r["params"]["task"]["B"] == 2]
    elif mutate == "text":
        rows[0]["params"]["task"]["d"] = "big"
    with pytest.raises(FitError, match=match) as e:
        fit_power_law(rows, variables, **kw)
    assert "\n" not in str(e.value)
