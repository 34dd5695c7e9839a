"""Two ``reproduce`` on one store (issue 45): started together on an empty store, two ``reproduce fig1c --size cpu``
trained every point twice (40 rows for 20 points), and a report gave its verdict while the other process was still
training a point. Each entry is now planned and trained under the store's lock of that entry (store/locks.py, an
SQLite lock the OS drops with its process), and points training elsewhere are joined, never trained again."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from sparse_tui import atlas
from sparse_tui.presets.catalog import bundled_dir
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.store import RunStore

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}


def test_two_reproduce_started_together_train_each_point_once_and_print_the_same_report(tmp_path: Path):
    runs = tmp_path / "runs"
    cmd = [sys.executable, "-m", "sparse_tui", "reproduce", "fig1c", "--size", "cpu", "--runs-dir", str(runs),
           "--workers", "1", "--json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=tmp_path)
             for _ in range(2)]
    outs = [p.communicate(timeout=900) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    n = sqlite3.connect(runs / "runs.db").execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    assert n == 20
    a, b = (json.loads(o[0]) for o in outs)
    assert a == b and a[0]["entry"] == "fig1c" and a[0]["verdict"]
    assert "training_elsewhere" not in a[0]
    assert any("waiting for it" in o[1] for o in outs)  # one of them waited for the other's lock


def test_points_training_elsewhere_are_joined_and_withhold_the_verdict(tmp_path: Path):
    from sparse_tui.reports.reproduce import reproduce

    (entry,) = atlas.find("fig1c")
    store = RunStore(tmp_path / "runs")
    specs = expand(load_preset(bundled_dir() / "paper_fig1c_theory.toml"))
    _, ids = store.create_runs(specs[:1])  # one point queued by another process (a console launch, run --detach)
    (out,) = reproduce(store, [entry], "cpu", reports=False)
    assert list(out.plan.elsewhere) == [0] and len(out.plan.to_train()) == 19
    assert "1 training elsewhere (not trained again)" in out.plan.describe()
    _, rest = store.create_runs(specs[1:])  # the 19 others end with the paper's law (plateau ~ 1.56 sqrt(d) T)
    for rid, spec in zip(rest, specs[1:]):
        t = spec.config.task
        store.finish(rid, "finished", plateau_step=1.56 * t.d ** 0.5 * t.T, step=spec.config.train.steps)
    (out,) = reproduce(store, [entry], "cpu")
    assert out.elsewhere == ids and out.report.verdict is None
    assert "1 of 20 point(s) still training elsewhere" in out.report.text and "no verdict until they end" in \
        out.report.text
    assert out.report.to_dict()["verdict"] is None and out.report.to_dict()["training_elsewhere"] == ids
    (out,) = reproduce(store, [entry], "cpu", verdict_now=True)  # asked: the verdict over the 19 stored
    assert out.report.verdict is not None and "still training elsewhere" in out.report.text


def test_the_lock_is_held_and_dropped_with_its_holder(tmp_path: Path):
    from sparse_tui.store.locks import held

    code = ("import sys, time; from sparse_tui.store.locks import held\n"
            "with held(sys.argv[1], 'x'):\n print('held', flush=True); time.sleep(600)\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=ENV)
    assert p.stdout.readline().strip() == "held"
    waited = []
    try:
        import threading

        t = threading.Thread(target=lambda: p.kill(), daemon=True)
        with held(tmp_path, "x", on_wait=lambda: (waited.append(1), t.start())) as got:
            assert got  # taken once the holder is killed: a crash leaves nothing that keeps it
    finally:
        p.kill()
        p.wait()
    assert waited == [1]


def test_reproduce_with_a_budget_waits_for_the_entrys_lock(tmp_path: Path):
    """``reproduce KEY --budget`` (issue 41's planner) trains under the same lock as a plain ``reproduce``: while
    another process holds fig1c's lock it trains nothing, and once the lock is dropped it trains and reports."""
    import time

    from sparse_tui.store.locks import held

    runs = tmp_path / "runs"
    RunStore(runs)  # the lock lives in the store's folder
    cmd = [sys.executable, "-m", "sparse_tui", "reproduce", "fig1c", "--size", "cpu", "--runs-dir", str(runs),
           "--workers", "1", "--budget", "30s"]
    count = "SELECT COUNT(*) FROM runs"
    with held(runs, "reproduce-fig1c"):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=tmp_path)
        first = proc.stderr.readline()  # the plan's line, said just before the lock is asked for
        time.sleep(3)
        assert proc.poll() is None, first  # still waiting for the lock
        assert sqlite3.connect(runs / "runs.db").execute(count).fetchone()[0] == 0
    out, errs = proc.communicate(timeout=900)
    assert proc.returncode == 0, errs[-2000:]
    assert sqlite3.connect(runs / "runs.db").execute(count).fetchone()[0] > 0
    assert "verdict" in out
