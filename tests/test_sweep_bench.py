"""benchmarks/sweep_bench.py cannot report a speed for runs that did not train: a phase with a failed run prints
FAILED and no speed, and the benchmark exits non-zero (checked with an injected failure on CPU)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("sweep_bench", ROOT / "benchmarks" / "sweep_bench.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sweep_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


TINY = ["seeds=[0]", 'sweep={"model.d_model" = [8, 16]}', "task.n_pairs=3", "task.n_tokens=8", "task.train_size=0",
        "train.batch_size=8", "train.steps=4", "eval.every=2", "eval.test_size=16", "eval.snapshot_every=0"]


def test_a_phase_with_an_injected_failure_prints_failed_and_no_speed(bench, monkeypatch, capsys):
    from sparse_tui.training import loop

    monkeypatch.setitem(bench.SUITES, "blog", {**bench.SUITES["blog"], "quick": TINY})
    args = SimpleNamespace(suite="blog", quick=True, device="cpu", threads=1, schedule="stacked", plain_steps=None)
    good = bench.phase_plain(args)
    assert good["statuses"] == ["finished", "finished"]

    def broken(*a, **kw):
        raise loop.StackFailed("RuntimeError: LSE is not correctly aligned (injected)")

    monkeypatch.setattr(loop, "trial_step", broken)
    bad_plain = bench.phase_plain(args)  # every run fails (its trial step and the fallback's)
    bad_sched = bench.phase_scheduler(args)
    capsys.readouterr()
    assert bad_plain["statuses"] == ["failed", "failed"] and bad_sched["statuses"] == ["failed", "failed"]

    line, ok, row = bench.report_row("scheduler (stacked)", bad_sched, good, 8, 1e6, 10.0)
    assert not ok and row["failed"] and "FAILED" in line and "model-steps/s" not in line and " s " not in line
    line, ok, _ = bench.report_row("plain loop", good, good, 8, 1e6, 10.0)
    assert ok and "model-steps/s" in line and "x1.00 the plain loop's rate" in line
    # the plain loop trained fewer runs (CUDA: one seed per sweep point): phases compare by model-steps/s
    line, ok, row = bench.report_row("scheduler (auto)", good, good, 24, 1e6, 10.0, plain_steps=8)
    assert ok and row["ratio_to_plain"] == pytest.approx(3.0) and "x3.00 the plain loop's rate" in line
    # a good phase against a failed plain loop has a speed but no ratio
    line, ok, row = bench.report_row("scheduler (auto)", good, bad_plain, 8, 1e6, 10.0)
    assert ok and row["ratio_to_plain"] is None and "plain loop FAILED" in line
    # a phase whose process crashed
    line, ok, _ = bench.report_row("plain loop", {"error": "exited 1: boom", "statuses": []}, good, 8, 1e6, 10.0)
    assert not ok and "FAILED (exited 1: boom)" in line


def test_the_benchmark_exits_non_zero_when_a_phase_failed(bench, monkeypatch, capsys):
    calls = []

    def fake_child(phase, **kw):
        calls.append(phase)
        if phase == "single":
            return {"s_per_step": 0.01, "threads": 1, "flops": 1e6, "matmul_gflops": 10.0}
        if phase == "plain":
            return {"wall": 1.0, "statuses": ["finished", "failed"], "threads": 1, "rss_mb": 1, "child_rss_mb": 0}
        return {"wall": 0.5, "statuses": ["finished", "finished"], "rss_mb": 1, "child_rss_mb": 0, "plan": "p"}

    monkeypatch.setattr(bench, "child", fake_child)
    monkeypatch.setattr(bench, "matmul_gflops", lambda *a, **k: 10.0)
    monkeypatch.setattr(bench, "step_flops", lambda *a, **k: 1e6)
    monkeypatch.setitem(bench.SUITES, "blog", {**bench.SUITES["blog"], "quick": TINY})
    monkeypatch.setattr(sys, "argv", ["sweep_bench.py", "--quick", "--suites", "blog", "--device", "cpu"])
    assert bench.main() == 1
    out = capsys.readouterr()
    assert "plain loop" in out.out and "FAILED (1 of 2 runs did not train: ['failed'])" in out.out
    assert "ratio n/a (plain loop FAILED)" in out.out and "FAILED: at least one phase" in out.err
