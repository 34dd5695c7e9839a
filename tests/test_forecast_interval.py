"""The forecast's interval means what it says (issue 41): on synthetic power-law data with noise, the displayed 80 %
interval holds 80 % of plateaus (within 5 points over 1,000 draws, seeded: exact), in the grid and out of it; it
widens with the distance from the fitted runs; the paper's exponents weigh as a prior while few runs have ended and
give way to the data as they accumulate; and `runs --json` and the console's detail line say the coverage and whether
a run is in the grid or extrapolated, on a store whose true law is known."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import sparse_tui.science.forecast as F
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.store import RunStore

FIG15 = Path(__file__).parent.parent / "presets" / "paper_fig15_adam_cpu.toml"
PRIOR = (1.31, 0.57)  # Fig. 15 right's law, the prior of its preset's forecasts (theory.PAPER_FITS)
GRID = [(d, T) for d in (16, 32, 64) for T in (16, 32, 64) for _seed in (0, 1)]  # 18 runs


def _rec(i, d, T, plateau, status="finished"):
    return SimpleNamespace(run_id=f"r{i}", preset="paper_fig15_adam_cpu",
                           params={"task.kind": "linreg", "task.d": d, "task.T": T, "model.kind": "transformer"},
                           plateau_step=plateau, status=status, step=0, started_at=None, heartbeat_at=None)


def _coverage(grid, target, sigma, exponents=None, draws=1000, seed=0):
    """Share of draws whose fresh plateau at ``target`` lies in the forecast's interval, and the median log width.
    ``exponents``: fixed (a, b), or None to draw them from the prior N(PRIOR, TAU^2) per draw."""
    rng = np.random.default_rng(seed)
    hits, widths, f = 0, [], None
    for _ in range(draws):
        a, b = exponents if exponents else (PRIOR[0] + F.TAU * rng.standard_normal(),
                                            PRIOR[1] + F.TAU * rng.standard_normal())
        law = lambda d, T: 1.0 + a * math.log(d) + b * math.log(T)  # noqa: E731
        recs = [_rec(i, d, T, math.exp(law(d, T) + sigma * rng.standard_normal())) for i, (d, T) in enumerate(grid)]
        truth = math.exp(law(*target) + sigma * rng.standard_normal())
        recs.append(_rec("new", *target, None, status="queued"))
        f = F.forecasts(recs)["rnew"]
        hits += f["low"] <= truth <= f["high"]
        widths.append(math.log(f["high"] / f["low"]))
    return hits / draws, float(np.median(widths)), f


def test_in_grid_coverage_is_nominal():
    """18 runs (3 x 3 grid, 2 seeds), exponents off the prior (1.0, 0.5), seed scatter 30 %: a new run inside."""
    cov, _, f = _coverage(GRID, (32, 32), 0.3, exponents=(1.0, 0.5))
    assert f["coverage"] == 0.8 and f["where"] == "in-grid" and f["beyond"] == {}
    assert abs(cov - 0.80) <= 0.05, cov


def test_extrapolated_coverage_is_nominal_and_the_interval_widens(monkeypatch):
    """A run 2x beyond the largest d: the exponents' uncertainty at that distance keeps 80 % (the misfit allowance
    KAPPA, for real curves that bend, set to 0: on an exact power law it only adds width). Further out, wider."""
    monkeypatch.setattr(F, "KAPPA", 0.0)
    F._CACHE.clear()
    cov, w2, f = _coverage(GRID, (128, 32), 0.3, exponents=(1.0, 0.5))
    assert f["where"] == "extrapolated" and f["beyond"] == {"d": 2.0}
    assert abs(cov - 0.80) <= 0.05, cov
    _, w_in, _ = _coverage(GRID, (32, 32), 0.3, exponents=(1.0, 0.5), draws=200)
    _, w8, f8 = _coverage(GRID, (512, 32), 0.3, exponents=(1.0, 0.5), draws=200)
    assert f8["beyond"] == {"d": 8.0} and w_in < w2 < w8


def test_few_runs_coverage_with_the_prior(monkeypatch):
    """4 runs, exponents drawn from the prior (what the prior claims to know), seed scatter SIGMA0: a run 2x beyond
    them in d and T, where most of the width is the exponents' prior uncertainty. From 4 runs the scatter is barely
    known (its posterior is wide: heavy tails); on this exact power law without the misfit allowance. Measured:
    0.830."""
    monkeypatch.setattr(F, "KAPPA", 0.0)
    F._CACHE.clear()
    cov, _, f = _coverage([(16, 16), (32, 16), (16, 32), (32, 32)], (64, 64), F.SIGMA0, draws=1000, seed=3)
    assert f["source"] == "refit" and f["n"] == 4 and f["beyond"] == {"d": 2.0, "T": 2.0}
    assert 0.78 <= cov <= 0.92, cov


def test_small_scatter_coverage_is_nominal_in_and_out_of_the_grid(monkeypatch):
    """Runs with 2 % scatter (the integrated toy flows scatter ~1-4 % about their law): the interval narrows to it and
    still holds 80 % of fresh plateaus, inside the grid and 2x beyond it (on this exact power law without the misfit
    allowance). A prior on the scatter worth 2 residuals of 0.20 held s at ~0.07 here and covered every run."""
    monkeypatch.setattr(F, "KAPPA", 0.0)
    F._CACHE.clear()
    cov, w, f = _coverage(GRID, (32, 32), 0.02, exponents=(1.0, 0.5))
    assert f["where"] == "in-grid" and abs(cov - 0.80) <= 0.05, cov
    assert w < 0.08, w  # +-1.28 s sqrt(1 + h): about 0.055 wide in log
    cov, _, f = _coverage(GRID, (128, 32), 0.02, exponents=(1.0, 0.5))
    assert f["beyond"] == {"d": 2.0} and abs(cov - 0.80) <= 0.05, cov


def test_the_misfit_allowance_scales_with_the_scatter():
    """Out of the fitted runs' range the interval adds KAPPA residual scatters per e-fold (curves bend): a run 4x
    beyond is wider than one 2x beyond, and with 10x less scatter the whole interval is ~10x narrower."""
    F._CACHE.clear()
    widths = {}
    for sigma in (0.3, 0.03):
        for target in ((128, 32), (256, 32)):
            widths[sigma, target] = _coverage(GRID, target, sigma, exponents=(1.0, 0.5), draws=50)[1]
    assert widths[0.3, (128, 32)] < widths[0.3, (256, 32)]
    assert 6 < widths[0.3, (256, 32)] / widths[0.03, (256, 32)] < 14, widths


def test_the_prior_weighs_less_as_runs_accumulate():
    """The same law (exponents 1.0, 0.5; the prior says 1.31, 0.57, seed scatter 30 %) from 4 runs at d, T in
    16-32, then 18 runs (16-64, 2 seeds), then 72 (4x as many seeds): the prior's share of d's precision falls from
    most to little, and d's fitted exponent (mean of 30 draws) moves from near the paper's to the data's."""
    rng = np.random.default_rng(7)
    grids = ([(16, 16), (32, 16), (16, 32), (32, 32)], GRID, GRID * 4)
    weights, exps = [[] for _ in grids], [[] for _ in grids]
    for _ in range(30):
        for k, grid in enumerate(grids):
            recs = [_rec(i, d, T, math.exp(1 + 1.0 * math.log(d) + 0.5 * math.log(T) + 0.3 * rng.standard_normal()))
                    for i, (d, T) in enumerate(grid)]
            recs.append(_rec("new", 32, 32, None, status="queued"))
            f = F.forecasts(recs)["rnew"]
            weights[k].append(f["prior_weight"]["d"])
            exps[k].append(f["exponents"]["d"])
    w = [float(np.mean(x)) for x in weights]
    e = [float(np.mean(x)) for x in exps]
    assert w[0] > 0.5 and w[0] > w[1] > w[2] and w[2] < 0.05, w
    assert e[0] > 1.15 and abs(e[2] - 1.0) < 0.05, e  # 4 runs: mostly the paper's 1.31; 72: the data's 1.0


def test_a_known_law_store_says_coverage_and_extrapolation(tmp_path):
    """A store on a known law (plateau = 3 d T^0.5, seed scatter 10 %): runs at d 16-32 ended, one run at d = 64
    (2x beyond them) still training, whose true plateau 3 * 64 * 32^0.5 is known. `runs --json` gives it an 80 %
    interval that holds the truth and says it is extrapolated, d x2; the console's detail line says the same."""
    store = RunStore(tmp_path / "runs")
    specs = expand(load_preset(FIG15, ['seeds=[0, 1]', 'sweep={"task.d" = [16, 32, 64], "task.T" = [16, 32, 64]}']))
    _, ids = store.create_runs(specs)
    rng = np.random.default_rng(0)
    target = None
    for rid in ids:
        p = store.get(rid).params
        true = 3.0 * p["task.d"] * p["task.T"] ** 0.5
        if p["task.d"] < 64:
            store.finish(rid, "finished", plateau_step=true * math.exp(0.1 * rng.standard_normal()), step=6000)
        elif p["task.T"] == 32 and p["seed"] == 0:
            target, truth = rid, true
            store.con.execute("UPDATE runs SET status='running', step=100, started_at=1000, heartbeat_at=1100, "
                              "pid=?, host=? WHERE run_id=?", (os.getpid(), store._host, rid))
    store.con.commit()
    store.close()
    out = subprocess.run([sys.executable, "-m", "sparse_tui", "runs", "--json", "--runs-dir", str(tmp_path / "runs")],
                         capture_output=True, text=True, check=True)
    f = {r["run_id"]: r for r in json.loads(out.stdout)}[target]["forecast"]
    assert f["coverage"] == 0.8 and f["where"] == "extrapolated" and f["beyond"] == {"d": 2.0}
    assert f["n"] == 12 and f["low"] <= truth <= f["high"]
    assert 0.7 < f["step"] / truth < 1.3
    line = F.detail(f)
    assert "80%" in line and "extrapolated d ×2" in line and "refit on 12 runs" in line
    inside = F.detail({**f, "where": "in-grid", "beyond": {}})
    assert "in-grid" in inside


@pytest.mark.parametrize("n", [1, 2])
def test_one_or_two_runs_use_the_paper_s_exponents(n):
    """With 1 or 2 runs ended the exponents are the paper's (their prior weight ~1 where the runs do not vary)."""
    recs = [_rec(i, 16, 16 * 2**i, 1.45 * 16**1.31 * (16 * 2**i) ** 0.57) for i in range(n)]
    recs.append(_rec("new", 32, 32, None, status="queued"))
    f = F.forecasts(recs)["rnew"]
    assert f["source"] == "paper" and f["n"] == n and f["exponents"]["d"] == pytest.approx(1.31)
    assert f["step"] == pytest.approx(1.45 * 32**1.31 * 32**0.57, rel=1e-6)
