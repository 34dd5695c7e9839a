"""examples/copy_first_token.py (issue 40): a plain PyTorch script that uses nothing of sparse-tui but the logging
API, run at a small size. Its runs are in the store with their metrics, attention maps and plateaus; ``fit`` over
them prints a law; the console shows them in Runs and Curves; a SIGKILLed run of it ends failed with its points.
About 10 s of CPU (three runs of a 1-layer GPT that stop once they have learned, T = 16, 32, 64)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.xdist_group("example_logging")  # one worker: the example trains once (the module's fixture)

from tui.conftest import opened, run_async, wait_for  # noqa: E402

from sparse_tui.store import RunStore  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "copy_first_token.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
LENGTHS = (16, 32, 64)


@pytest.fixture(scope="module")
def example_store(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("example") / "runs"
    r = subprocess.run([sys.executable, str(EXAMPLE), "--runs-dir", str(d), "--lengths", ",".join(map(str, LENGTHS)),
                        "--steps", "600"], capture_output=True, text=True, env=ENV, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return d


def test_the_example_leaves_runs_with_metrics_attention_and_plateaus(example_store: Path):
    store = RunStore(example_store)
    recs = sorted(store.runs(), key=lambda r: r.params["task.T"])
    assert [r.params["task.T"] for r in recs] == list(LENGTHS)
    for r in recs:
        assert (r.status, r.preset, r.seed, r.device) == ("finished", "copy-first", 0, "cpu")
        assert r.versions["logged_by"] == "sparse_tui.init" and r.versions["script"] == str(EXAMPLE)
        assert r.params["model.d_model"] == 32 and r.params["plateau.metric"] == "test/acc"
        m = store.metrics(r.run_id)
        assert {"train/loss", "test/loss", "test/acc", "attn/L1/relevant"} <= set(m)
        steps, acc = m["test/acc"]
        # the plateau is the first evaluation at or above 0.5 (the built-in detector), and the run learned
        assert r.plateau_step == next(s for s, a in zip(steps, acc) if a >= 0.5) and acc[-1] >= 0.95
        assert acc[0] < 0.2  # it started at chance (1/16)
        assert store.attention_steps(r.run_id)[0] == 0
        maps, meta = store.attention(r.run_id, 0)
        assert maps["L1"].shape == (1, 4, r.params["task.T"], r.params["task.T"]) and len(meta["tokens"]) == 4
    plateaus = [r.plateau_step for r in recs]
    assert plateaus == sorted(plateaus) and plateaus[-1] > plateaus[0]  # longer sequences, longer plateaus


def test_fit_prints_the_plateau_law_of_the_example(example_store: Path):
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "fit", "--runs-dir", str(example_store), "--preset",
                        "copy-first", "--vars", "T"], capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "fitted: 3 run(s) with a plateau" in r.stdout and "columns: T <- params.task.T" in r.stdout
    law = next(line for line in r.stdout.splitlines() if line.startswith("plateau_step = "))
    beta = float(law.split("T^")[1].split()[0])
    assert 0.2 < beta < 1.5, law


@run_async
async def test_the_console_shows_the_example_runs_in_runs_and_curves(example_store: Path, tmp_path: Path):
    from sparse_tui.tui.messages import FitDone
    from sparse_tui.tui.widgets.curves import CurvesPanel
    from sparse_tui.tui.widgets.fit_panel import FitPanel
    from sparse_tui.tui.widgets.run_table import RunsPanel

    presets = tmp_path / "presets"
    presets.mkdir()
    names = {f"copy-first T={t} seed=0" for t in LENGTHS}
    async with opened(example_store, presets, size=(140, 45)) as (app, pilot, seen):
        await pilot.press("2")
        await pilot.pause(0.2)
        panel = app.query_one(RunsPanel)
        recs = {r.run_id: r for r in app.main.records}
        assert {recs[rid].name for rid in panel.shown} == names
        for rid in list(panel.shown):
            panel.table.move_cursor(row=panel.shown.index(rid), animate=False)
            await pilot.pause(0.1)
            await pilot.press("space")
        await pilot.press("3")
        curves = app.query_one(CurvesPanel)
        await wait_for(pilot, lambda: getattr(curves, "data", None) is not None
                       and set(curves.data.labels.values()) == names, 30)
        assert {"test/acc", "train/loss"} <= {n for s in curves.data.series.values() for n in s}
        # the Fit panel guesses the swept key (T) and fits the law over the marked runs, as `fit` does
        await pilot.press("5")
        fit = app.query_one(FitPanel)
        await wait_for(pilot, lambda: fit.query_one("#fit-vars").value == "T", 20)
        done = seen.count(FitDone)
        fit.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: seen.count(FitDone) > done, 60)
        rep = fit.result.report
        assert rep is not None and rep.result.n == 3 and 0.2 < rep.result.exponents["T"] < 1.5


def test_a_sigkilled_example_run_ends_failed_with_its_points_kept(tmp_path: Path):
    d = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, str(EXAMPLE), "--runs-dir", str(d), "--lengths", "64", "--steps", "100000",
                             "--stop-acc", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    try:
        seen: list[int] = []
        deadline = time.time() + 180
        while len(seen) < 20 and time.time() < deadline:  # 20 train/loss points in the store
            time.sleep(0.2)
            if (d / "runs.db").exists():
                recs = RunStore(d).runs(reap=False)
                if recs:
                    seen = RunStore(d).metrics(recs[0].run_id, ["train/loss"]).get("train/loss", ([], []))[0]
        assert len(seen) >= 20
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    t0 = time.time()
    (rec,) = RunStore(d).runs()  # a reader reaps it: on this host by its pid, elsewhere by its heartbeat (60 s)
    assert rec.status == "failed" and rec.reason.startswith("process died at step ")
    assert time.time() - t0 < 60
    kept = RunStore(d).metrics(rec.run_id, ["train/loss"])["train/loss"][0]
    assert kept[: len(seen)] == seen and rec.step >= seen[-1]
