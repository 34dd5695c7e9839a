"""Projections per card (issue 44): ``run --dry-run`` and ``reproduce --list`` give a range on a named card (the lent
H200 by default) from the H100 cost model until the card has a calibration; on a GPU each stack's first seconds
(its first evaluation, then ``calibration.STEPS`` training steps) are recorded per card, and the projection of a
calibrated card comes from its own points. The GPU path runs here on a fake card (``calibration.card_of``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparse_tui.lifecycle import estimate
from sparse_tui.lifecycle.estimate import H100_EVAL_S, H100_START_S, project, project_h100
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.presets.schema import n_eval_steps
from sparse_tui.training import calibration, loop
from sparse_tui.training.flops import stack_flops

ROOT = Path(__file__).resolve().parent.parent
FIG4 = ROOT / "presets" / "paper_fig4_recall_small.toml"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARSE_TUI_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "gpu_calibration.json"


def test_a_range_on_the_lent_card_from_the_h100_model(cache):
    h100, h200 = project(FIG4, "H100"), project(FIG4)
    ref = project_h100(FIG4)
    assert h200.card == "H200" and h100.card == "H100" and not h200.calibrated
    assert h100.seconds == pytest.approx(ref.seconds) and h100.low == pytest.approx(ref.seconds)
    assert h100.high == pytest.approx(1.5 * ref.seconds)
    # the H200's steps at its memory bandwidth at best, the H100's time plus the stated margin at worst
    assert h200.low < h200.seconds < h200.high == pytest.approx(1.5 * h200.seconds)
    assert h200.low == pytest.approx(h200.seconds - (h200.seconds - H100_START_S - h200.evaluations * H100_EVAL_S)
                                     * (1 - 1 / 1.43))
    assert re.fullmatch(r"H200: \d+–\d+ min", h200.short()), h200.short()
    assert "not measured" in h200.line() and "no calibration on this card yet" in h200.line()


def _cfgs(n: int = 2, steps: int = 30):
    return [s.config for s in expand(load_preset(ROOT / "presets" / "blog_n80.toml",
                                                 [f"train.steps={steps}", "eval.every=10", "eval.snapshot_every=0",
                                                  f"seeds={list(range(n))}", 'sweep={}', "model.d_model=16",
                                                  "task.n_pairs=8", "train.batch_size=16", "eval.test_size=32"]))]


def test_a_stack_calibrates_its_card(cache, monkeypatch):
    monkeypatch.setattr(calibration, "card_of", lambda device: "FAKE CARD 9000")
    cfgs = _cfgs()
    res = loop.train_stack(cfgs)
    assert all(r.status == "finished" for r in res)
    points = json.loads(cache.read_text())["FAKE CARD 9000"]
    assert len(points) == 1
    p = points[0]
    assert p["gflop"] == pytest.approx(stack_flops(cfgs) / 1e9) and p["runs"] == 2
    assert p["ms_per_step"] > 0 and p["eval_s"] > 0 and p["precision"] == "fp32" and p["graphed"] is False
    # a preset projected on that card: the H100 line's shape through its one point, its evaluations and start-up
    pr = project(ROOT / "presets" / "blog_n80.toml", "FAKE CARD 9000")
    assert pr.card == "FAKE CARD 9000" and pr.calibrated and "calibrated on this card" in pr.line()
    specs = expand(load_preset(ROOT / "presets" / "blog_n80.toml"))
    full = [s.config for s in specs]
    k = p["ms_per_step"] / (estimate.H100_STACK_MS + estimate.H100_MS_PER_GFLOP * p["gflop"])
    step_ms = k * (estimate.H100_STACK_MS + estimate.H100_MS_PER_GFLOP * stack_flops(full) / 1e9)
    n_ev = sum(n_eval_steps(c.train.steps, c.eval.every) for c in full)
    start = p["start_s"] if p["start_s"] is not None else H100_START_S
    want = start + full[0].train.steps * step_ms / 1e3 + n_ev * p["eval_s"]
    assert pr.stacks == 1 and pr.seconds == pytest.approx(want, rel=1e-6)
    assert pr.low == pytest.approx(want / 1.2) and pr.high == pytest.approx(want * 1.2)
    # a run too short to time STEPS steps records nothing
    loop.train_stack(_cfgs(steps=calibration.STEPS - 5))
    assert len(json.loads(cache.read_text())["FAKE CARD 9000"]) == 1


def test_two_sizes_fit_the_card_its_own_step_line(cache):
    for g, ms in ((10.0, 3.0), (110.0, 8.0)):  # 2.5 ms + 0.05 ms per GFLOP
        calibration.record("NVIDIA H200", {"gflop": g, "ms_per_step": ms, "eval_s": 0.01, "start_s": 4.0,
                                           "runs": 4, "precision": "fp32", "graphed": True})
    assert calibration.step_line(calibration.load()["NVIDIA H200"]) == pytest.approx((2.5, 0.05))
    pr = project(FIG4)  # the lent card, found by its key in the recorded name
    assert pr.card == "H200" and pr.calibrated
    cfgs = [s.config for s in expand(load_preset(FIG4))]
    n_ev = sum(n_eval_steps(c.train.steps, c.eval.every) for c in cfgs)
    assert pr.seconds > 4.0 + n_ev * 0.01
    assert [p.card for p in estimate.projections(FIG4)] == ["H200"]  # one line per card
    calibration.record("Some Other GPU", {"gflop": 50.0, "ms_per_step": 4.0, "eval_s": 0.02, "start_s": 5.0})
    assert [p.card for p in estimate.projections(FIG4)] == ["H200", "Some Other GPU"]


def test_an_unreadable_cache_falls_back_to_the_model(cache):
    cache.parent.mkdir(parents=True)
    cache.write_text("{not json")
    assert calibration.load() == {} and not project(FIG4).calibrated


def test_dry_run_names_every_calibrated_card(cache, tiny_preset):
    calibration.record("FAKE CARD 9000", {"gflop": 1.0, "ms_per_step": 2.0, "eval_s": 0.01, "start_s": 3.0})
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "run", str(tiny_preset), "--dry-run"], capture_output=True,
                       text=True, timeout=240, env={**os.environ, "COLUMNS": "400"})
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("GPU projection:")]
    assert [ln.split(":")[1].strip() for ln in lines] == ["H200", "FAKE CARD 9000"]
    assert "calibrated on this card" in lines[1]


def test_evaluations_inside_the_timed_steps_are_not_step_time(cache, monkeypatch):
    clock = iter([0.0, 1.0, 11.0, 21.0])  # begin, pause (an evaluation), resume 10 s later, the last step
    monkeypatch.setattr(calibration.time, "perf_counter", lambda: next(clock))
    cal = calibration.Calibrator("FAKE CARD 9000", type("D", (), {"type": "cpu"})(), _cfgs(), False, 3.0)
    cal.begin(0)
    assert not cal.step(calibration.STEPS - 1)
    cal.pause()
    cal.resume()
    assert cal.step(calibration.STEPS)
    p = calibration.load()["FAKE CARD 9000"][-1]
    assert p["ms_per_step"] == pytest.approx(1e3 * (21.0 - 10.0) / calibration.STEPS)
