"""The live emergence forecast (sparse_tui/science/forecast.py, issue 33) and the plateau of a run still training: the
three
sources, `runs --json`'s forecast on a synthetic store, and the plateau written the moment the detector fires."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from sparse_tui.lifecycle import runner
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.science.forecast import forecast, loo
from sparse_tui.store import RunStore

FIG15 = Path(__file__).parent.parent / "presets" / "paper_fig15_adam_cpu.toml"


def _rec(run_id, d, T, plateau, preset="paper_fig15_adam_cpu", status="finished", step=6000, **kw):
    return SimpleNamespace(run_id=run_id, preset=preset, params={"task.kind": "linreg", "task.d": d, "task.T": T,
                                                                 "model.kind": "transformer", **kw},
                           plateau_step=plateau, status=status, step=step, started_at=0.0, heartbeat_at=100.0)


def test_sources_in_order():
    law = lambda d, T: 1.45 * d**1.31 * T**0.57  # noqa: E731  (Fig. 15 right's law, theory.PAPER_FITS)
    run = _rec("x", 32, 32, None, status="running", step=300)
    # one finished run at 2x the law: the paper's law scaled by that prefactor; 2x beyond it in d and T, the
    # exponents' prior uncertainty (TAU) widens the 80% interval past x/÷ 2
    f = forecast(run, [_rec("a", 16, 16, 2 * law(16, 16))])
    assert f["source"] == "paper" and f["n"] == 1 and f["coverage"] == 0.8
    assert f["step"] == pytest.approx(2 * law(32, 32)) and f["low"] < law(32, 32) and f["high"] > 4 * law(32, 32)
    assert f["where"] == "extrapolated" and f["beyond"] == {"d": 2.0, "T": 2.0}
    assert f["low"] * f["high"] == pytest.approx(f["step"] ** 2)  # symmetric in log space
    assert f["eta_s"] == pytest.approx((f["step"] - 300) / 3.0)  # 300 steps in 100 s
    # >= 3 runs: the law refitted on them (an exact power law d^1 T^0.5 comes back exactly)
    peers = [_rec(f"p{i}", d, T, 10 * d * T**0.5) for i, (d, T) in enumerate([(16, 16), (16, 64), (64, 16), (64, 64)])]
    f = forecast(run, peers)
    assert f["source"] == "refit" and f["n"] == 4 and f["step"] == pytest.approx(10 * 32 * 32**0.5, rel=1e-9)
    # after its plateau: measured / forecast
    done = _rec("y", 32, 32, 2 * 10 * 32 * 32**0.5)
    assert forecast(done, peers)["ratio"] == pytest.approx(2.0)
    # a toy run trained by SGD, no peers: the flow's time scale sqrt(d) T / (B f) x 1.39 / lr
    toy = SimpleNamespace(run_id="t", preset="mine", params={"task.kind": "linreg", "task.d": 16, "task.T": 64,
                          "task.B": 2, "task.p": 0.0, "model.kind": "toy", "train.optimizer": "sgd", "train.lr": 0.5},
                          plateau_step=None, status="queued", step=0, started_at=None, heartbeat_at=None)
    f = forecast(toy, [])
    assert f["source"] == "theory" and f["step"] == pytest.approx(4 * 64 / 2 / 0.5 * 1.39)
    # a preset outside the atlas, not a toy model: no forecast
    assert forecast(_rec("z", 16, 16, None, preset="elsewhere"), peers) is None


def test_leave_one_out_on_fig15_record_means():
    """docs/REPRODUCTION.md, "Fig. 15 right": the 9 grid points (geometric mean of 2 seeds), each forecast from the
    other 8: all within +-30% (0.91-1.19; issue 41's fit with the paper's exponents as a prior)."""
    means = {16: (310, 435, 694), 32: (740, 945, 1392), 64: (1770, 2393, 3285)}
    recs = [_rec(f"{d}x{T}", d, T, float(v)) for d, vs in means.items() for T, v in zip((16, 32, 64), vs)]
    ratios = [r for _, r in loo(recs)]
    assert len(ratios) == 9 and all(abs(r - 1) <= 0.30 for r in ratios)
    assert min(ratios) == pytest.approx(0.911, abs=1e-3) and max(ratios) == pytest.approx(1.193, abs=1e-3)


def _synthetic(tmp_path):
    """Fig. 15's CPU preset: 4 finished runs on an exact law, one running before its plateau, one running after."""
    store = RunStore(tmp_path / "runs")
    specs = expand(load_preset(FIG15, ["seeds=[0]", 'sweep={"task.d" = [16, 32, 64], "task.T" = [16, 64]}']))
    _, ids = store.create_runs(specs)
    for rid in ids[:4]:
        r = store.get(rid)
        store.finish(rid, "finished", plateau_step=2.0 * r.params["task.d"] * r.params["task.T"] ** 0.5, step=6000)
    con = store.con
    for rid, step in ((ids[4], 500), (ids[5], 900)):
        # running in a live process (this one) on this host, so that no reader reaps it
        con.execute("UPDATE runs SET status='running', step=?, started_at=1000, heartbeat_at=1100, pid=?, host=?"
                    " WHERE run_id=?", (step, os.getpid(), store._host, rid))
    con.commit()
    store.log_plateau(ids[5], 1200.0)  # a live plateau
    return store, ids


def test_runs_json_carries_the_forecast_and_the_live_plateau(tmp_path):
    store, ids = _synthetic(tmp_path)
    store.close()
    out = subprocess.run([sys.executable, "-m", "sparse_tui", "runs", "--json", "--runs-dir", str(tmp_path / "runs")],
                         capture_output=True, text=True, check=True)
    rows = {r["run_id"]: r for r in json.loads(out.stdout)}
    before, after = rows[ids[4]], rows[ids[5]]  # d 64: T 16 running at step 500, T 64 with its plateau at 1200
    assert before["plateau_step"] is None and before["status"] == "running"
    f = before["forecast"]
    # the runs' law is 2 d T^0.5; d = 64 lies 2x beyond their d 16-32, where the paper's d^1.31 (the prior) and
    # their d^1 (two values of d, no scatter) share the slope: between 512 and 512 x 2^0.31
    assert f["source"] == "refit" and f["n"] == 4 and 512 < f["step"] < 512 * 2**0.31
    assert f["where"] == "extrapolated" and f["beyond"] == {"d": 2.0} and f["coverage"] == 0.8
    assert f["low"] < 512 < f["high"]
    assert f["eta_s"] == pytest.approx((f["step"] - 500) / 5.0, rel=1e-6)  # 500 steps in 100 s
    g = after["forecast"]
    assert after["plateau_step"] == 1200 and g["ratio"] == pytest.approx(1200 / g["step"])
    assert g["where"] == "extrapolated"
    table = subprocess.run([sys.executable, "-m", "sparse_tui", "runs", "--runs-dir", str(tmp_path / "runs")],
                           capture_output=True, text=True, check=True, env={**os.environ, "COLUMNS": "200"}).stdout
    assert f"~{f['step']:.0f} {f['eta_s']:.0f}s" in table and f"{g['ratio']:.2f}x" in table


def test_live_plateau_is_written_while_the_run_trains(tiny_preset, tmp_path):
    """The plateau shows the moment the run leaves it: while the run still trains, the store has it."""
    store = RunStore(tmp_path / "live")
    batch, (rid,) = store.create_runs(expand(load_preset(tiny_preset, ["train.steps=200", "plateau.value=0.2",
                                                                       "seeds=[0]"])))
    seen = []

    def watch():
        r = store.get(rid)
        if r.status == "running" and r.plateau_step is not None:
            seen.append((r.step, r.plateau_step))
        return None

    runner.work(store, batch, should_stop=watch)
    final = store.get(rid)
    assert final.plateau_step is not None and final.plateau_step < 200
    assert seen and seen[0][1] == final.plateau_step and seen[0][0] < 200  # seen before the run ended
    # a terminal status is never rewritten: a late write does nothing
    store.log_plateau(rid, 5.0)
    assert store.get(rid).plateau_step == final.plateau_step


def test_a_ray_worker_s_live_plateau_reaches_the_store(tmp_path):
    """A Ray worker sends the plateau through its channel (executors/channel.py); the coordinator applies it."""
    from sparse_tui.executors.channel import apply

    store, ids = _synthetic(tmp_path)
    assert store.get(ids[4]).plateau_step is None
    apply(store, ("log_plateau", ids[4], 480.0))
    assert store.get(ids[4]).plateau_step == 480.0


def test_refit_does_not_extrapolate_in_a_variable_the_peers_do_not_vary():
    """Three finished runs at d = 16 (T varies) say nothing about d: a run at d = 32 takes d's exponent from the
    paper's law (the prior alone), not from a law in T alone (which would miss d's factor 2^1.31), and says so."""
    law = lambda d, T: 1.45 * d**1.31 * T**0.57  # noqa: E731
    peers = [_rec(f"p{T}", 16, T, 2 * law(16, T)) for T in (16, 32, 64)]
    f = forecast(_rec("x", 32, 16, None, status="running", step=10), peers)
    assert f["source"] == "refit" and f["step"] == pytest.approx(2 * law(32, 16), rel=1e-9)
    assert f["where"] == "extrapolated" and f["beyond"] == {"d": 2.0} and f["prior_weight"]["d"] == 1.0
