"""The logging API (sparse_tui.init / run.log / run.finish, sparse_tui/track.py; issue 40): a logged run is a row of
the store like a built-in run (params, seed, plateau, summary, exports, fit), bad input is one error naming the key
with nothing lost, a NaN is kept and flagged, and a script that dies leaves its run failed with its points kept."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import sparse_tui
from sparse_tui.store import RunStore
from sparse_tui.track import LogError

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "COLUMNS": "200"}


def _curve(run, n: int = 40, at: int = 20) -> None:
    """A test/acc that jumps from 0.1 to 0.9 at step ``at``, and a falling train/loss."""
    for s in range(n):
        run.log({"train/loss": 2.0 / (1 + s), "test/acc": 0.1 if s < at else 0.9}, step=s)


def test_a_logged_run_is_a_row_of_the_store_with_params_seed_tags_and_its_plateau(tmp_path: Path):
    cfg = {"model": {"d_model": 64, "act": "gelu"}, "T": 32, "seed": 3, "lrs": [1e-3, 2e-3]}
    with sparse_tui.init(name="w64", group="width", config=cfg, runs_dir=tmp_path, tags=["mine"], total_steps=40,
                         plateau={"metric": "test/acc", "mode": "above", "value": 0.5}) as run:
        assert RunStore(tmp_path).get(run.id).status == "running"
        _curve(run)
    rec = RunStore(tmp_path).get(run.id)
    assert (rec.status, rec.preset, rec.label, rec.name, rec.seed, rec.step, rec.total_steps) == \
        ("finished", "width", "w64", "width w64", 3, 39, 40)
    assert rec.params["model.d_model"] == 64 and rec.params["T"] == 32 and rec.params["lrs"] == [1e-3, 2e-3]
    assert rec.params["plateau.metric"] == "test/acc" and rec.config["plateau"]["mode"] == "above"
    assert rec.tags == ["mine"] and rec.versions["logged_by"] == "sparse_tui.init"
    assert rec.plateau_step == 20  # the built-in detector, on the metric the run named
    assert rec.summary["best"]["train/loss"] == pytest.approx(2.0 / 40) and rec.final["test/acc"] == 0.9
    steps, vals = RunStore(tmp_path).metrics(run.id)["test/acc"]
    assert steps == list(range(40)) and vals[19:21] == [0.1, 0.9]
    assert run.finish() == "finished"  # a second finish does nothing


def test_the_plateau_shows_live_while_the_run_trains(tmp_path: Path):
    run = sparse_tui.init(config={"seed": 0}, runs_dir=tmp_path, plateau="test/loss", flush_seconds=0.05)
    for s, v in enumerate([1.0, 0.9, 0.5, 0.1]):
        run.log({"test/loss": v}, step=s * 10)
    deadline = time.time() + 20
    while RunStore(tmp_path).get(run.id).plateau_step is None and time.time() < deadline:
        time.sleep(0.05)
    rec = RunStore(tmp_path).get(run.id)
    assert rec.status == "running" and rec.plateau_step == 30  # fraction 0.2 of 1.0: first at 0.1
    run.finish()


def test_bad_input_is_one_error_naming_the_key_and_nothing_logged_is_lost(tmp_path: Path):
    with pytest.raises(LogError, match=r"config key 'opt\.fn': a function cannot be stored"):
        sparse_tui.init(config={"opt": {"fn": lambda x: x}}, runs_dir=tmp_path)
    with pytest.raises(LogError, match="config key 'seed': must be an integer"):
        sparse_tui.init(config={"seed": "0"}, runs_dir=tmp_path)
    with pytest.raises(LogError, match="plateau: mode"):
        sparse_tui.init(runs_dir=tmp_path, plateau={"metric": "x", "mode": "sideways"})
    with pytest.raises(LogError, match="tags: tag 'a b'"):
        sparse_tui.init(runs_dir=tmp_path, tags=["a b"])
    assert RunStore(tmp_path).runs() == []  # nothing was recorded by a refused init
    run = sparse_tui.init(config={"seed": 0}, runs_dir=tmp_path)
    run.log({"loss": 1.0}, step=5)
    with pytest.raises(LogError, match=r"'acc': str 'high' is not a number"):
        run.log({"loss": 0.5, "acc": "high"}, step=6)
    with pytest.raises(LogError, match=r"'acc': list \[1, 2\] is not a number"):
        run.log({"acc": [1, 2]}, step=6)
    with pytest.raises(LogError, match="step: 4 is before step 5, already logged"):
        run.log({"loss": 0.4}, step=4)
    with pytest.raises(LogError, match="step: must be an integer"):
        run.log({"loss": 0.4}, step=6.5)
    run.log({"loss": 0.25}, step=7)
    run.finish()
    with pytest.raises(LogError, match="has ended"):
        run.log({"loss": 0.1})
    assert RunStore(tmp_path).metrics(run.id) == {"loss": ([5, 7], [1.0, 0.25])}  # the refused calls left nothing


def test_numbers_of_every_kind_and_steps_by_default(tmp_path: Path):
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    run = sparse_tui.init(runs_dir=tmp_path, config={"lr": np.float32(0.5), "n": np.int64(3)})
    run.log({"a": np.float32(1.5), "b": torch.tensor(2.0), "c": 3, "d": True})
    run.log({"a": 0.5})
    run.finish()
    store = RunStore(tmp_path)
    assert store.get(run.id).params == {"lr": 0.5, "n": 3, "plateau.metric": "test/loss", "plateau.mode": "fraction",
                                        "plateau.value": 0.2, "plateau.stop_after": -1}
    m = store.metrics(run.id)
    assert m["a"] == ([0, 1], [1.5, 0.5]) and m["b"] == ([0], [2.0]) and m["c"] == ([0], [3.0])


def test_a_nan_is_kept_as_a_gap_and_the_run_ends_diverged(tmp_path: Path, capfd):
    run = sparse_tui.init(runs_dir=tmp_path, config={"seed": 1})
    for s, v in enumerate([2.0, 1.0, math.nan, math.inf]):
        run.log({"train/loss": v, "test/acc": 0.5}, step=s)
    assert run.finish() == "diverged"
    rec = RunStore(tmp_path).get(run.id)
    assert rec.status == "diverged" and rec.reason == "non-finite train/loss at step 2"
    assert rec.summary["nonfinite"] == {"train/loss": 2}
    steps, vals = RunStore(tmp_path).metrics(run.id)["train/loss"]
    assert steps == [0, 1, 2, 3] and vals[:2] == [2.0, 1.0] and all(math.isnan(v) for v in vals[2:])
    assert "train/loss is nan at step 2" in capfd.readouterr().err


def test_the_context_manager_records_how_the_block_ended(tmp_path: Path):
    with pytest.raises(RuntimeError):
        with sparse_tui.init(runs_dir=tmp_path, name="boom") as run:
            run.log({"loss": 1.0}, step=3)
            raise RuntimeError("CUDA out of memory\nmore")
    with pytest.raises(KeyboardInterrupt):
        with sparse_tui.init(runs_dir=tmp_path, name="ctrl-c") as run2:
            run2.log({"loss": 1.0}, step=1)
            raise KeyboardInterrupt
    store = RunStore(tmp_path)
    a, b = store.get(run.id), store.get(run2.id)
    assert (a.status, a.reason) == ("failed", "RuntimeError: CUDA out of memory at step 3")
    assert (b.status, b.reason) == ("interrupted", "interrupted at step 1")
    assert store.metrics(run.id)["loss"] == ([3], [1.0])


def test_a_cancel_from_the_console_is_seen_and_recorded(tmp_path: Path):
    run = sparse_tui.init(runs_dir=tmp_path, flush_seconds=0.05)
    run.log({"loss": 1.0}, step=0)
    RunStore(tmp_path).request_cancel([run.id])
    deadline = time.time() + 20
    while not run.should_stop and time.time() < deadline:
        time.sleep(0.05)
    assert run.should_stop and run.finish() == "cancelled"


def test_a_logged_run_cannot_be_resumed_by_sparse_tui(tmp_path: Path):
    run = sparse_tui.init(runs_dir=tmp_path)
    run.finish("failed", "a test")
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "resume", run.id, "--runs-dir", str(tmp_path)],
                       capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "was logged by its own script" in r.stderr


SCRIPT = """
import os, sys, time
import sparse_tui
run = sparse_tui.init(name="child", config={{"seed": 0}}, runs_dir=sys.argv[1], flush_seconds=0.05)
for s in range(50):
    run.log({{"train/loss": 1.0 / (s + 1)}}, step=s)
{end}
"""


def _script(tmp_path: Path, end: str) -> Path:
    p = tmp_path / "train.py"
    p.write_text(textwrap.dedent(SCRIPT.format(end=end)))
    return p


@pytest.mark.parametrize("end, status, reason", [
    ("", "finished", None),  # no finish(): the exit ends it
    ("raise ValueError('bad batch')", "failed", "ValueError: bad batch at step 49"),
])
def test_a_script_that_exits_or_raises_ends_its_run(tmp_path: Path, end: str, status: str, reason):
    r = subprocess.run([sys.executable, str(_script(tmp_path, end)), str(tmp_path / "runs")], capture_output=True,
                       text=True, env=ENV, timeout=120)
    assert r.returncode == (0 if status == "finished" else 1), r.stderr
    (rec,) = RunStore(tmp_path / "runs").runs()
    assert (rec.status, rec.reason, rec.step) == (status, reason, 49)
    assert len(RunStore(tmp_path / "runs").metrics(rec.run_id)["train/loss"][0]) == 50
    assert rec.preset == "train" and rec.versions["script"] == str(tmp_path / "train.py")


def test_a_sigkilled_script_leaves_its_run_failed_with_its_points(tmp_path: Path):
    p = _script(tmp_path, "run.flush()\nprint('logged', flush=True)\ntime.sleep(600)")
    proc = subprocess.Popen([sys.executable, str(p), str(tmp_path / "runs")], stdout=subprocess.PIPE, text=True,
                            env=ENV)
    assert proc.stdout.readline().strip() == "logged"
    (rec,) = RunStore(tmp_path / "runs").runs()
    assert rec.status == "running"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    (rec,) = RunStore(tmp_path / "runs").runs()  # the first reader reaps it: its pid is gone
    assert (rec.status, rec.reason) == ("failed", "process died at step 49")
    assert RunStore(tmp_path / "runs").metrics(rec.run_id)["train/loss"][0] == list(range(50))


def test_many_processes_log_into_one_store_at_once(tmp_path: Path):
    procs = [subprocess.Popen([sys.executable, str(_script(tmp_path, "")), str(tmp_path / "runs")], env=ENV)
             for _ in range(4)]
    assert [p.wait(120) for p in procs] == [0] * 4
    store = RunStore(tmp_path / "runs")
    recs = store.runs()
    assert len(recs) == 4 and {r.status for r in recs} == {"finished"}
    assert all(len(store.metrics(r.run_id)["train/loss"][0]) == 50 for r in recs)


def _sweep(runs_dir: Path) -> None:
    """Runs whose plateau is C T^1 (test/acc crosses 0.5 at 3 T), two seeds each."""
    for T in (8, 16, 32):
        for seed in (0, 1):
            with sparse_tui.init(name=f"T={T}", group="mine", config={"task": {"T": T}, "seed": seed},
                                 runs_dir=runs_dir, plateau={"metric": "test/acc", "mode": "above", "value": 0.5}) as r:
                for s in range(0, 4 * T + 1, 2):
                    r.log({"test/acc": 0.9 if s >= 3 * T + 2 * seed else 0.1, "train/loss": 1.0}, step=s)


def test_fit_and_every_export_serve_logged_runs(tmp_path: Path):
    d = tmp_path / "runs"
    _sweep(d)
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "fit", "--runs-dir", str(d), "--preset", "mine",
                        "--vars", "task.T", "--json"], capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 0, r.stderr
    fit = json.loads(r.stdout)
    assert fit["fit"]["n"] == 6 and fit["fit"]["exponents"]["task.T"] == pytest.approx(1.0, abs=0.05)
    out = tmp_path / "runs.csv"
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "export", "--runs-dir", str(d), "--output", str(out)],
                       capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 0, r.stderr
    head = out.read_text().splitlines()[0].split(",")
    assert "params.task.T" in head and "params.seed" in head and "final.test/acc" in head
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    r = subprocess.run([sys.executable, "-m", "sparse_tui", "export", "--runs-dir", str(d), "--to", "tensorboard",
                        str(tmp_path / "tb")], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    rec = RunStore(d).runs()[0]
    (run_dir,) = [p for p in (tmp_path / "tb").iterdir() if p.is_dir() and p.name.endswith(rec.run_id)]
    ea = EventAccumulator(str(run_dir))
    ea.Reload()
    assert [e.step for e in ea.Scalars("test/acc")] == RunStore(d).metrics(rec.run_id)["test/acc"][0]


def test_the_live_forecast_serves_a_logged_sweep(tmp_path: Path):
    """A logged group has no atlas law: the forecast refits plateau ~ C T^beta on its finished runs (the keys the
    group varies) and forecasts the run still training."""
    from sparse_tui.science.forecast import forecasts

    d = tmp_path / "runs"
    _sweep(d)
    run = sparse_tui.init(name="T=64", group="mine", config={"task": {"T": 64}, "seed": 0}, runs_dir=d,
                          plateau={"metric": "test/acc", "mode": "above", "value": 0.5})
    run.log({"test/acc": 0.1}, step=10)
    run.flush()
    recs = RunStore(d).runs()
    f = forecasts(recs)[run.id]
    assert f["source"] == "refit" and f["n"] == 6
    assert f["step"] == pytest.approx(3 * 64 + 1, rel=0.05) and f["low"] < f["step"] < f["high"]
    run.finish()


def test_the_mlflow_bridge_exports_a_logged_run(tmp_path: Path):
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    d = tmp_path / "runs"
    with sparse_tui.init(name="w8", group="mine", config={"model": {"d_model": 8}, "seed": 2}, runs_dir=d) as run:
        _curve(run, n=10, at=5)
    uri = f"sqlite:///{tmp_path / 'ml.db'}"
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "export", "--runs-dir", str(d), "--to", "mlflow", uri,
                        "--timeout", "240"], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    client = MlflowClient(tracking_uri=uri)
    (got,) = client.search_runs([client.get_experiment_by_name("mine").experiment_id])
    assert got.data.params["model.d_model"] == "8" and got.data.params["seed"] == "2"
    assert got.data.tags["sparse_tui.run_id"] == run.id and got.info.status == "FINISHED"
    hist = sorted(client.get_metric_history(got.info.run_id, "test/acc"), key=lambda m: m.step)
    assert [m.step for m in hist] == list(range(10)) and hist[5].value == pytest.approx(0.9)


def test_the_theory_overlay_ignores_a_logged_config_of_another_shape(tmp_path: Path):
    """The console's theory overlay reads a run's typed config (``RunRecord.run_config``); a logged run's config is
    the user's own (its ``task`` may be a string), which is no built-in config: no overlay, no error."""
    from sparse_tui.models.ode import recorded_curve

    for cfg in ({"task": "copy-first", "seed": 0}, {"task": {"T": 8}}):
        with sparse_tui.init(config=cfg, runs_dir=tmp_path) as run:
            run.log({"test/loss": 1.0}, step=1)
        rec = RunStore(tmp_path).get(run.id)
        assert rec.run_config is None
        assert recorded_curve(rec.run_config, 100) is None
