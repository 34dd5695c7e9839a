"""Checkpoints and resume, and the faults of the run lifecycle (issue 11): a run stopped part-way and resumed ends
with metrics bit-identical to a run never interrupted; SIGKILL of the coordinator leaves nothing queued or running
once a reader looks; a stopped (SIGSTOP) process is not failed; SIGTERM cuts a long evaluation short; a full disk is
recorded as such; damaged rows are skipped; older stores are migrated."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import StopAfter

from sparse_tui.lifecycle import runner, signals
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.store import RunStore
from sparse_tui.training.checkpoint import has_checkpoint

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}


def _batch(store: RunStore, preset: Path, *overrides: str) -> tuple[str, list[str]]:
    return store.create_runs(expand(load_preset(preset, list(overrides))))


def _series(store: RunStore, run_id: str) -> dict:
    return store.metrics(run_id)


def test_stopped_and_resumed_run_is_bit_identical(tiny_preset, tmp_path):
    opts = ("train.steps=60", "eval.every=10", "train.checkpoint_every=20", "seeds=[3]")
    ref = RunStore(tmp_path / "ref")
    rb, (rid_ref,) = _batch(ref, tiny_preset, *opts)
    runner.work(ref, rb)
    assert ref.get(rid_ref).status == "finished"

    store = RunStore(tmp_path / "cut")
    batch, (rid,) = _batch(store, tiny_preset, *opts)
    runner.work(store, batch, should_stop=StopAfter(33))  # stops at step 33: between checkpoints and evaluations
    rec = store.get(rid)
    assert rec.status == "interrupted" and rec.step == 33, (rec.status, rec.step)
    assert has_checkpoint(store.runs_dir, rid) == 33  # a stop saves a checkpoint at the step it stops
    assert max(_series(store, rid)["test/loss"][0]) == 30

    # resume through the same lifecycle: re-queue, claim, continue from step 33
    assert runner.requeue_for_resume(store, batch, [rid]) == [rid]
    runner.work(store, batch)
    done = store.get(rid)
    assert done.status == "finished" and done.step == 60
    got, want = _series(store, rid), _series(ref, rid_ref)
    assert got.keys() == want.keys()
    for name in want:
        assert got[name] == want[name], name  # bit-identical: same steps, same float values
    assert done.plateau_step == ref.get(rid_ref).plateau_step
    assert done.final == ref.get(rid_ref).final
    assert has_checkpoint(store.runs_dir, rid) is None, "a finished run's checkpoint is removed"
    assert not list((store.runs_dir / "checkpoints").iterdir())


def test_periodic_checkpoint_survives_a_stop_without_save(tiny_preset, tmp_path, monkeypatch):
    """A process killed without warning keeps its last periodic checkpoint: resuming from it (not from the stop)
    still gives the uninterrupted run's numbers."""
    from sparse_tui.training import checkpoint as ck

    opts = ("train.steps=50", "eval.every=5", "train.checkpoint_every=20", "seeds=[1]")
    ref = RunStore(tmp_path / "ref")
    rb, (rid_ref,) = _batch(ref, tiny_preset, *opts)
    runner.work(ref, rb)

    store = RunStore(tmp_path / "cut")
    batch, (rid,) = _batch(store, tiny_preset, *opts)
    real_save = ck.Checkpointer.maybe_save
    monkeypatch.setattr(ck.Checkpointer, "maybe_save", lambda self, step, prep, live, now=False:
                        real_save(self, step, prep, live, now=False))  # as if killed: no save at the stop
    runner.work(store, batch, should_stop=StopAfter(27))
    monkeypatch.undo()
    assert store.get(rid).step == 27 and has_checkpoint(store.runs_dir, rid) == 20
    runner.requeue_for_resume(store, batch, [rid])
    runner.work(store, batch)
    assert store.get(rid).status == "finished"
    assert _series(store, rid) == _series(ref, rid_ref)


def test_checkpoint_between_evaluations_keeps_the_train_loss_logged_before_it(tiny_preset, tmp_path, monkeypatch):
    """train/loss points are buffered between evaluations; a checkpoint at a step that is not an evaluation stores
    them first. Killed after that checkpoint and resumed from it, the run has every point of the uninterrupted one
    (found by hand on a Ray cluster: a node lost at step 182 after a checkpoint at 150 lost train/loss 110-150)."""
    opts = ("train.steps=60", "eval.every=20", "eval.train_every=5", "train.checkpoint_every=15", "seeds=[2]")
    ref = RunStore(tmp_path / "ref")
    rb, (rid_ref,) = _batch(ref, tiny_preset, *opts)
    runner.work(ref, rb)

    store = RunStore(tmp_path / "cut")
    batch, (rid,) = _batch(store, tiny_preset, *opts)
    calls = iter(range(10**6))

    def killed_at_33():  # one call per claim, then one per step: step 33 dies without a word (no end, no save)
        if next(calls) == 33:
            raise SystemError("killed")

    runner.work(store, batch, should_stop=killed_at_33)
    assert store.get(rid).status == "failed"
    assert has_checkpoint(store.runs_dir, rid) == 30  # between the evaluations at 20 and 40
    runner.requeue_for_resume(store, batch, [rid])
    runner.work(store, batch)
    assert store.get(rid).status == "finished"
    got, want = _series(store, rid), _series(ref, rid_ref)
    assert got["train/loss"][0] == want["train/loss"][0]  # steps 25 and 30 included
    assert got == want


def _wait_for(pred, timeout=90.0, every=0.05):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(every)
    return False


def _cli(*args, timeout=240, env=None):
    return subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or ENV)


def test_sigkill_coordinator_then_runs_then_resume(tiny_preset, tmp_path):
    """SIGKILL of a `run --headless` coordinator (one run training, one queued): the next `runs` shows neither as
    queued or running; `resume BATCH` continues both from their checkpoints; the metrics equal an uninterrupted
    run's, bit for bit."""
    opts = ["--set", "train.steps=240", "--set", "eval.every=40", "--set", "train.checkpoint_every=40",
            "--set", "seeds=[0,1]", "--schedule", "sequential"]
    ref_dir, runs_dir = tmp_path / "ref", tmp_path / "runs"
    r = _cli("run", str(tiny_preset), "--headless", "--runs-dir", str(ref_dir), *opts)
    assert r.returncode == 0, r.stderr

    p = subprocess.Popen([sys.executable, "-m", "sparse_tui", "run", str(tiny_preset), "--headless", "--runs-dir",
                          str(runs_dir), *opts], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _wait_for(lambda: (runs_dir / "runs.db").exists() and any(
            (has_checkpoint(runs_dir, x.run_id) or 0) >= 80 for x in RunStore(runs_dir).runs(reap=False)))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        p.kill()
    r = _cli("runs", "--json", "--runs-dir", str(runs_dir))
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert len(rows) == 2 and not {x["status"] for x in rows} & {"queued", "running"}, rows
    reasons = sorted(x["reason"] for x in rows)
    assert reasons[0].startswith("never started: its coordinator") and reasons[1].startswith("process died at step")

    batch = rows[0]["batch_id"]
    r = _cli("resume", batch, "--runs-dir", str(runs_dir), "--schedule", "sequential")
    assert r.returncode == 0, r.stderr
    store, ref = RunStore(runs_dir), RunStore(ref_dir)
    got = sorted(store.runs(), key=lambda x: x.seed)
    want = sorted(ref.runs(), key=lambda x: x.seed)
    assert [x.status for x in got] == ["finished", "finished"]
    for a, b in zip(got, want):
        assert store.metrics(a.run_id) == ref.metrics(b.run_id)
        assert a.plateau_step == b.plateau_step
    r = _cli("resume", batch, "--runs-dir", str(runs_dir))
    assert r.returncode == 2 and "nothing to resume" in r.stderr


def test_sigstop_does_not_fail_a_live_run(tiny_preset, tmp_path, monkeypatch):
    """Same host: a stopped process is alive. With the heartbeat staleness at 1 s, a run stopped for 3 s is still
    running when read, and finishes after SIGCONT."""
    monkeypatch.setenv("SPARSE_TUI_STALE_AFTER", "1")
    runs_dir = tmp_path / "runs"
    p = subprocess.Popen([sys.executable, "-m", "sparse_tui", "run", str(tiny_preset), "--headless", "--runs-dir",
                          str(runs_dir), "--set", "train.steps=400", "--schedule", "sequential"],
                         env={**ENV, "SPARSE_TUI_STALE_AFTER": "1"}, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        assert _wait_for(lambda: (runs_dir / "runs.db").exists() and any(
            x.step > 10 for x in RunStore(runs_dir).runs(status="running", reap=False)))
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(3.0)  # three times the staleness
        store = RunStore(runs_dir)
        (rec,) = store.runs()  # reaps
        assert rec.status == "running", rec.reason
        os.kill(p.pid, signal.SIGCONT)
        assert p.wait(timeout=120) == 0
    finally:
        os.kill(p.pid, signal.SIGCONT) if p.poll() is None else None
        p.kill()
    assert RunStore(runs_dir).runs()[0].status == "finished"


def test_sigterm_cuts_a_long_evaluation_short(tiny_preset, runs_dir, monkeypatch):
    """A SIGTERM during an evaluation that would take a minute ends the run as interrupted within the grace."""
    import sparse_tui.training.tracker as tracker

    evaluating = threading.Event()

    def slow_evaluate(*a, **k):
        evaluating.set()
        end = time.monotonic() + 60
        while time.monotonic() < end:
            time.sleep(0.01)
        raise AssertionError("the evaluation was not interrupted")

    monkeypatch.setattr(tracker, "evaluate", slow_evaluate)
    store = RunStore(runs_dir)
    batch, (rid,) = _batch(store, tiny_preset)
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM)}
    sent = []

    def kill_when_evaluating():
        evaluating.wait(60)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGTERM)

    try:
        flag = signals.StopFlag()
        signals.install_signal_handlers(flag)
        threading.Thread(target=kill_when_evaluating, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            runner.work(store, batch, should_stop=flag)
        took = time.monotonic() - sent[0]
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
    assert took < 10, took  # the evaluation alone would have taken 60 s; the grace is 1 s
    rec = store.get(rid)
    assert rec.status == "interrupted" and rec.reason == "interrupted at step 0"


def test_full_disk_records_its_reason(tiny_preset, runs_dir, monkeypatch):
    """A write that finds the disk full ends the run as failed with reason 'disk full at step N' and stops the
    worker with one clear error (injected: SQLite's own error for a full disk)."""
    store = RunStore(runs_dir)
    batch, (rid,) = _batch(store, tiny_preset, "train.steps=40", "eval.every=5")
    real = RunStore.log_metrics

    def log_metrics(self, run_id, step, metrics):
        if step >= 15:
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, run_id, step, metrics)

    monkeypatch.setattr(RunStore, "log_metrics", log_metrics)
    with pytest.raises(runner.DiskFull, match="disk full"):
        runner.work(store, batch)
    rec = store.get(rid)
    assert rec.status == "failed" and rec.reason.startswith("disk full at step"), rec.reason
    assert store.metrics(rid)["test/loss"][0] == [0, 5, 10]  # everything logged before is kept


def test_reaping_without_a_write_still_shows_the_verdict(tiny_preset, runs_dir, monkeypatch):
    """When the store cannot be written (full disk, read-only mount), readers still show a dead run as failed."""
    store = RunStore(runs_dir)
    batch, ids = _batch(store, tiny_preset, "seeds=[0,1]")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store.claim_runs(ids[:1], device="cpu", versions={}, pid=dead.pid)
    store.drop_coordinator(batch)
    store.add_coordinator(batch, dead.pid)

    class Full:
        def __enter__(self):
            raise sqlite3.OperationalError("database or disk is full")

        def __exit__(self, *a):
            return False

    # every write opens its transaction through _tx: patched there, reap's write fails as on a full disk
    monkeypatch.setattr(RunStore, "_tx", lambda self: Full())
    with pytest.raises(sqlite3.OperationalError):
        store.add_coordinator(batch, dead.pid)  # (the patch applies: a write fails)
    recs = {r.run_id: r for r in store.runs()}
    assert recs[ids[0]].status == "failed" and recs[ids[0]].reason.startswith("process died")
    assert recs[ids[1]].status == "failed" and recs[ids[1]].reason.startswith("never started")
    assert store.runs(status="running") == [] and store.runs(status="queued") == []
    monkeypatch.undo()
    assert {r.status for r in RunStore(runs_dir).runs()} == {"failed"}  # written once the store can be


def test_one_damaged_row_is_skipped_with_a_warning(tiny_preset, runs_dir):
    store = RunStore(runs_dir)
    _, ids = _batch(store, tiny_preset, "seeds=[0,1,2]")
    store.con.execute("UPDATE runs SET config='{not json' WHERE run_id=?", (ids[1],))
    r = _cli("runs", "--json", "--runs-dir", str(runs_dir))
    assert r.returncode == 0, r.stderr
    assert sorted(x["run_id"] for x in json.loads(r.stdout)) == sorted([ids[0], ids[2]])
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("warning:") and ids[1] in line and "damaged row skipped" in line
    r = _cli("export", "--runs-dir", str(runs_dir))
    assert r.returncode == 0 and len(r.stdout.strip().splitlines()) == 3  # header + 2 runs


def _as_schema_2(store: RunStore) -> None:
    """Turn a store into a schema-2 one: one coordinator per batch, in a ``batches`` table."""
    store.con.execute("CREATE TABLE batches (batch_id TEXT PRIMARY KEY, pid INTEGER, host TEXT, started_at REAL,"
                      " heartbeat_at REAL)")
    store.con.execute("INSERT INTO batches SELECT batch_id, pid, host, started_at, heartbeat_at FROM coordinators")
    store.con.execute("DROP TABLE coordinators")
    store.con.execute("UPDATE meta SET value='2' WHERE key='schema_version'")


def test_older_store_is_migrated(tiny_preset, runs_dir):
    """A schema-1 store (no batches table) opens, gains the coordinators table, and keeps its runs; a schema-2 store
    keeps its batches' coordinators."""
    from sparse_tui.store import SCHEMA_VERSION

    store = RunStore(runs_dir)
    _, ids = _batch(store, tiny_preset)
    store.con.execute("DROP TABLE coordinators")
    store.con.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    store.close()
    again = RunStore(runs_dir, create=False)
    assert again.con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert [r.run_id for r in again.runs()] == ids
    assert again.get(ids[0]).status == "failed" and again.get(ids[0]).reason == "never started: no coordinator"

    two = RunStore(runs_dir.parent / "two")
    batch, ids = _batch(two, tiny_preset)
    _as_schema_2(two)
    two.close()
    again = RunStore(runs_dir.parent / "two", create=False)
    assert again.coordinators(batch) == [(os.getpid(), again._host)]
    assert again.get(ids[0]).status == "queued"  # its coordinator (this process) is alive


def test_run_id_prefix_is_literal(tiny_preset, runs_dir):
    store = RunStore(runs_dir)
    _, (rid,) = _batch(store, tiny_preset)
    assert store.get(rid[:3]).run_id == rid
    for pattern in ("_", "%", rid[0] + "_", rid[:2] + "%"):
        with pytest.raises(Exception, match="no run"):
            store.get(pattern)


def _as_format_1(path: Path, fused: bool) -> None:
    """Rewrite a checkpoint in format 1, the layout sparse-tui wrote before the stack was an ``nn.Module``
    (training/checkpoint.py at bcea166): the parameters as a list, the optimiser's state as torch.optim's own
    state_dict (``fused``) or as the per-model update's attributes ``t``, ``lr_now``, ``state1``, ``state2``."""
    import torch

    state = torch.load(path, weights_only=True)
    per = state["opt"]["state"]
    if fused:
        groups = [{"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "amsgrad": False,
                   "fused": True, "params": list(range(len(per)))}]
        opt = {"fused": {"state": dict(enumerate(per)), "param_groups": groups}}
    else:
        opt = {"t": per[0]["step"], "lr_now": torch.tensor([0.01, 0.02]),
               "state1": [s["exp_avg"] for s in per], "state2": [s["exp_avg_sq"] for s in per]}
    state.update(format=1, params=list(state.pop("model").values()), opt=opt)
    torch.save(state, path)


@pytest.mark.parametrize("lrs", [[1e-2], [1e-2, 2e-2]], ids=["fused", "per-model"])
def test_a_checkpoint_of_the_previous_format_resumes_bit_identically(tmp_path, monkeypatch, lrs):
    """A run interrupted under the previous version (checkpoint format 1) resumes after an upgrade: the same
    numbers as a run never interrupted (one run: torch's fused Adam; two learning rates: the per-model update)."""
    from sparse_tui.presets.loading import RunSpec
    from sparse_tui.presets.schema import RunConfig
    from sparse_tui.training.checkpoint import Checkpointer, CheckpointFiles, check

    raw = {"task": {"kind": "recall", "n_tokens": 8, "n_pairs": 3}, "seed": 3,
           "model": {"kind": "transformer", "n_layers": 2, "n_heads": 1, "d_model": 16},
           "train": {"lr": 1e-2, "batch_size": 16, "steps": 60, "device": "cpu", "checkpoint_every": 20},
           "eval": {"every": 10, "test_size": 32}}
    cfgs = [RunConfig.model_validate({**raw, "train": {**raw["train"], "lr": lr}}) for lr in lrs]
    specs = [RunSpec("fmt", "fmt.toml", c, {"train.lr": c.train.lr}) for c in cfgs]
    ref = RunStore(tmp_path / "ref")
    rb, ref_ids = ref.create_runs(specs)
    runner.work(ref, rb, group=8)

    store = RunStore(tmp_path / "cut")
    batch, ids = store.create_runs(specs)
    runner.work(store, batch, group=8, should_stop=StopAfter(33))
    assert [store.get(i).step for i in ids] == [33] * len(ids)
    path = CheckpointFiles(store.runs_dir, ids).path
    _as_format_1(path, fused=len(lrs) == 1)
    check(store.runs_dir, ids[0])  # what `sparse-tui resume` asks first: accepted
    assert runner.requeue_for_resume(store, batch, ids) == ids
    starts, restore = [], Checkpointer.restore

    def spy(self, prep):
        out = restore(self, prep)
        starts.append(out[0])
        return out

    monkeypatch.setattr(Checkpointer, "restore", spy)
    runner.work(store, batch, group=8)
    assert starts[0] == 33
    for i, r in zip(ids, ref_ids):
        assert store.get(i).status == "finished" and store.get(i).step == 60
        assert _series(store, i) == _series(ref, r)  # bit-identical: it resumed at 33, not from step 0
