"""The command line as a user drives it: exit codes, one-line errors, a real run, export, Ctrl-C, a killed worker."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from sparse_tui.store import RunStore

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}


def cli(*args: str, timeout: float = 240, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True, timeout=timeout, env=ENV, **kw
    )


def test_help_is_light():
    code = (
        "import sys; from sparse_tui.cli import app; import typer.testing as t;"
        "r = t.CliRunner().invoke(app, ['--help']); assert r.exit_code == 0, r.output;"
        "assert 'run' in r.output and 'export' in r.output;"
        "heavy = [m for m in ('torch', 'textual', 'ray') if m in sys.modules]; assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV, timeout=60)
    r = cli("--help")
    assert r.returncode == 0 and "Usage" in r.stdout


def test_bad_preset_exit_2_one_line_store_untouched(tiny_preset, runs_dir):
    tiny_preset.write_text(tiny_preset.read_text().replace("lr = 1e-2", "lr = -1.0"))
    r = cli("run", str(tiny_preset), "--headless", "--runs-dir", str(runs_dir))
    assert r.returncode == 2
    assert r.stderr.strip() == "tiny.toml: train.lr: must be > 0"
    assert "Traceback" not in r.stderr + r.stdout
    assert not runs_dir.exists(), "nothing is written for a bad preset"


def test_bad_set_and_flags_exit_2(tiny_preset, runs_dir):
    r = cli("run", str(tiny_preset), "--headless", "--runs-dir", str(runs_dir), "--set", "train.steps=0")
    assert r.returncode == 2 and r.stderr.strip() == "tiny.toml: train.steps: must be >= 1"
    r = cli("run", str(tiny_preset), "--headless", "--runs-dir", str(runs_dir), "--workers", "zero")
    assert r.returncode == 2 and "--workers" in r.stderr and "Traceback" not in r.stderr
    r = cli("run", str(tiny_preset.parent / "missing.toml"), "--headless")
    assert r.returncode == 2 and r.stderr.strip().endswith("missing.toml: file not found")
    r = cli("show", "abc", "--runs-dir", str(runs_dir))
    assert r.returncode == 2 and "no run store here" in r.stderr and not runs_dir.exists()


def test_dry_run_lists_runs(tiny_preset):
    r = cli("run", str(tiny_preset), "--dry-run", "--set", "seeds=[0,1,2]")
    assert r.returncode == 0 and "3 run(s)" in r.stdout


def test_run_runs_show_export(tiny_preset, runs_dir, tmp_path):
    r = cli("run", str(tiny_preset), "--headless", "--runs-dir", str(runs_dir), "--set", "seeds=[0,1]")
    assert r.returncode == 0, r.stderr
    assert "finished" in r.stdout and "batch" in r.stderr  # summary table on stdout, progress on stderr
    r = cli("runs", "--json", "--runs-dir", str(runs_dir))
    rows = json.loads(r.stdout)
    assert len(rows) == 2 and {row["status"] for row in rows} == {"finished"}
    rid = rows[0]["run_id"]
    r = cli("show", rid[:6], "--runs-dir", str(runs_dir), "--width", "80")
    assert r.returncode == 0 and "loss (log scale)" in r.stdout and "test accuracy" in r.stdout

    r = cli("export", "--format", "csv", "--runs-dir", str(runs_dir))
    assert r.returncode == 0
    table = list(csv.DictReader(io.StringIO(r.stdout)))
    assert len(table) == 2
    for col in ("run_id", "preset", "status", "params.train.lr", "params.task.n_tokens", "plateau_step",
                "final.test/loss", "final.test/acc", "started_at", "ended_at"):
        assert col in table[0], col
    assert {t["params.seed"] for t in table} == {"0", "1"}

    r = cli("export", "--format", "jsonl", "--metrics", "--runs-dir", str(runs_dir))
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert {"run_id", "step", "name", "value"} == set(lines[0]) and any(x["name"] == "test/acc" for x in lines)

    out = tmp_path / "runs.parquet"
    r = cli("export", "--format", "parquet", "-o", str(out), "--runs-dir", str(runs_dir))
    assert r.returncode == 0, r.stderr
    import pyarrow.parquet as pq

    assert pq.read_table(out).num_rows == 2

    r = cli("export", "--format", "xlsx", "--runs-dir", str(runs_dir))
    assert r.returncode == 2 and "--format" in r.stderr


def _wait_for(pred, timeout=60.0, every=0.2):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(every)
    return False


def test_ctrl_c_marks_interrupted_and_keeps_logs(tiny_preset, runs_dir):
    p = subprocess.Popen(
        [sys.executable, "-m", "sparse_tui", "run", str(tiny_preset), "--headless", "--runs-dir", str(runs_dir),
         "--set", "train.steps=100000", "--set", "seeds=[0,1]",
         "--schedule", "sequential"],  # one run at a time: the second is still queued at Ctrl-C
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert _wait_for(lambda: (runs_dir / "runs.db").exists() and any(
            r.step > 10 for r in RunStore(runs_dir).runs(status="running", reap=False)))
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 130, stderr
    runs = RunStore(runs_dir).runs()
    assert sorted(r.status for r in runs) == ["interrupted", "interrupted"]
    started = [r for r in runs if r.started_at]
    assert len(started) == 1 and RunStore(runs_dir).metrics(started[0].run_id)["test/loss"][0][0] == 0
    assert "never started" in {r.reason for r in runs}
    batch = runs[0].batch_id  # two lines say what next (issue 21)
    m = re.search(rf"what next:\n  (\S*sparse-tui) resume {batch} --runs-dir {re.escape(str(runs_dir))}\s", stderr)
    assert m and (shutil.which(m.group(1)) or Path(m.group(1)).is_file()), stderr  # it runs as typed (issue 29)


def test_sigkill_worker_fails_only_its_run(tiny_preset, runs_dir):
    p = subprocess.Popen(
        [sys.executable, "-m", "sparse_tui", "run", str(tiny_preset), "--headless", "--runs-dir", str(runs_dir),
         "--set", "train.steps=1500", "--set", "seeds=[0,1]", "--workers", "2"],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        store = RunStore(runs_dir) if _wait_for(lambda: (runs_dir / "runs.db").exists()) else None
        assert _wait_for(lambda: len([r for r in store.runs(status="running", reap=False) if r.step > 5]) == 2)
        victim = store.runs(status="running", reap=False)[0]
        os.kill(victim.pid, signal.SIGKILL)
        t0 = time.time()
        assert _wait_for(lambda: store.get(victim.run_id).status == "failed" or bool(store.reap()), timeout=10)
        assert time.time() - t0 < 10
        rec = store.get(victim.run_id)
        assert rec.status == "failed" and rec.reason.startswith("process died at step")
        stdout, stderr = p.communicate(timeout=180)
    finally:
        p.kill()
    other = [r for r in RunStore(runs_dir).runs() if r.run_id != victim.run_id]
    assert [r.status for r in other] == ["finished"]
    assert p.returncode == 1  # a run failed


def test_detach_returns_at_once_and_the_coordinator_plans_and_trains(tiny_preset, runs_dir):
    """run --detach records the runs and returns; the detached coordinator asks the scheduler for the plan (the
    first line of the batch's log) and trains every run to the end."""
    r = cli("run", str(tiny_preset), "--headless", "--detach", "--runs-dir", str(runs_dir),
            "--set", "train.steps=60", "--set", "seeds=[0,1]", "--schedule", "sequential")
    assert r.returncode == 0, r.stderr
    assert "started in the background" in r.stdout and "log:" in r.stdout
    store = RunStore(runs_dir)
    assert _wait_for(lambda: len(store.runs(reap=False)) == 2
                     and all(x.status == "finished" for x in store.runs(reap=False)), 120)
    logs = list((runs_dir / "logs").glob("*.log"))
    assert len(logs) == 1
    first = logs[0].read_text().splitlines()[0]
    assert first.startswith("schedule sequential: 1 worker(s)") and "(requested)" in first
    assert all(len(store.metrics(x.run_id)["test/loss"][0]) >= 2 for x in store.runs(reap=False))
