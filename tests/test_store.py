"""The SQLite run store: lifecycle, metrics, attention, reaping dead runs, and several processes at once."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.store import RunStore, StoreError


def _specs(tiny_preset: Path, n_seeds: int = 2):
    return expand(load_preset(tiny_preset, [f"seeds={list(range(n_seeds))}"]))


def test_lifecycle_and_records(tiny_preset, runs_dir):
    store = RunStore(runs_dir)
    batch, ids = store.create_runs(_specs(tiny_preset))
    assert len(ids) == 2 and all(r.status == "queued" for r in store.runs())
    (rec,) = store.claim_runs(ids[:1], device="cpu", versions={"torch": "x"})
    assert rec.run_id == ids[0] and rec.status == "running" and rec.pid == os.getpid()
    store.log_metrics(rec.run_id, 0, {"test/loss": 2.0, "test/acc": 0.1})
    store.log_metrics(rec.run_id, 5, {"test/loss": 1.0, "test/acc": float("nan")})
    series = store.metrics(rec.run_id)
    assert series["test/loss"] == ([0, 5], [2.0, 1.0])
    assert np.isnan(series["test/acc"][1][1])
    assert store.last_metrics(rec.run_id)["test/loss"] == 1.0
    store.finish(rec.run_id, "finished", plateau_step=5, summary={"final": {"test/loss": 1.0}})
    done = store.get(rec.run_id[:5])  # unique prefix
    assert done.status == "finished" and done.plateau_step == 5 and done.final == {"test/loss": 1.0}
    assert done.config["task"]["kind"] == "recall" and done.params["train.lr"] == 0.01 and done.seed == 0
    assert done.versions == {"torch": "x"} and done.ended_at >= done.started_at
    with pytest.raises(ValueError):
        store.finish(rec.run_id, "running")


def test_a_run_has_one_name_everywhere(tiny_preset, runs_dir):
    """``RunRecord.name`` (preset and label) is the name the export, ``runs --json``, the run table and the
    bridges show: one place decides it."""
    from sparse_tui.export.tables import run_row
    from sparse_tui.tui.render.runs import COLUMNS, table_row

    store = RunStore(runs_dir)
    store.create_runs(_specs(tiny_preset))
    for rec in store.runs():
        assert rec.name == f"{rec.preset} {rec.label}" and rec.label.endswith(f"seed={rec.seed}")
        assert run_row(rec, store)["name"] == rec.name
        assert table_row(rec, None, 0.0).cells[COLUMNS.index("name")] == rec.name
    rec.label = ""
    assert rec.name == rec.preset


def test_unknown_run_and_missing_store(tmp_path):
    with pytest.raises(StoreError, match="no run store here"):
        RunStore(tmp_path / "nothing", create=False)
    assert not (tmp_path / "nothing").exists()
    store = RunStore(tmp_path / "r")
    with pytest.raises(StoreError, match="no run 'zzz'"):
        store.get("zzz")


def test_attention_roundtrip(tiny_preset, runs_dir):
    store = RunStore(runs_dir)
    _, (rid, _) = store.create_runs(_specs(tiny_preset))
    maps = {"L1": np.random.rand(1, 2, 7, 7), "L2": np.random.rand(1, 2, 1, 7)}
    store.log_attention(rid, 10, maps, {"tokens": [[1, 2, 3]]})
    assert store.attention_steps(rid) == [10]
    got, meta = store.attention(rid, 10)
    assert got["L1"].shape == (1, 2, 7, 7) and meta["tokens"] == [[1, 2, 3]]
    np.testing.assert_allclose(got["L2"], maps["L2"], atol=1e-3)  # stored as float16


def test_reap_marks_dead_process_failed(tiny_preset, runs_dir):
    store = RunStore(runs_dir)
    batch, ids = store.create_runs(_specs(tiny_preset))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store.claim_runs(ids[:1], device="cpu", versions={}, pid=dead.pid)
    store.log_metrics(ids[0], 7, {"train/loss": 1.0})
    assert store.runs()[0].status in ("failed", "queued")  # runs() reaps
    rec = store.get(ids[0])
    assert rec.status == "failed" and rec.reason == "process died at step 7"


def test_stale_heartbeat_fails_only_runs_of_other_hosts(tiny_preset, runs_dir):
    store = RunStore(runs_dir)
    batch, ids = store.create_runs(_specs(tiny_preset))
    store.claim_runs(ids[:1], device="cpu", versions={})  # our own pid: alive
    assert store.reap() == []
    # same host: a live pid is alive however old its heartbeat (a stopped or slow process is not failed)
    assert store.reap(now=time.time() + 3600) == []
    assert store.get(ids[0]).status == "running"
    # another host: judged by the heartbeat; its batch's coordinator too once nothing of the batch beats
    store.con.execute("UPDATE runs SET host='elsewhere'")
    store.con.execute("UPDATE coordinators SET host='elsewhere'")
    assert store.reap(now=time.time() + 3600) == [ids[0], ids[1]]
    assert store.get(ids[0]).status == "failed" and store.get(ids[0]).reason == "heartbeat lost at step 0"
    assert store.get(ids[1]).status == "failed" and store.get(ids[1]).reason.startswith("never started")


def test_cancel_and_delete(tiny_preset, runs_dir):
    store = RunStore(runs_dir)
    batch, ids = store.create_runs(_specs(tiny_preset))
    store.claim_runs(ids[:1], device="cpu", versions={})
    running = store.request_cancel(ids)
    assert [r.run_id for r in running] == [ids[0]]
    assert store.get(ids[1]).status == "cancelled"
    assert store.heartbeat(ids[0], 3) is True  # the trainer learns about the cancel at its heartbeat
    assert store.delete(ids) == 2 and store.runs() == []


def _writer(runs_dir: str, run_id: str, offset: int, n: int) -> None:
    store = RunStore(runs_dir)
    for i in range(n):
        store.log_metrics(run_id, offset + i, {"train/loss": float(i), "test/loss": float(i) / 2})
        store.heartbeat(run_id, offset + i)


def test_eight_processes_write_at_once(tiny_preset, runs_dir):
    """Eight writers (seven runs, one of them written by two processes) and a reader at once: nothing is lost and
    no writer sees 'database is locked'."""
    store = RunStore(runs_dir)
    _, ids = store.create_runs(_specs(tiny_preset, n_seeds=7))
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(runs_dir), ids[i], 0, 150)) for i in range(7)]
    procs.append(ctx.Process(target=_writer, args=(str(runs_dir), ids[0], 1000, 150)))
    for p in procs:
        p.start()
    # read concurrently while they write
    seen = 0
    while any(p.is_alive() for p in procs):
        seen = max(seen, len(store.metrics(ids[0]).get("train/loss", ([], []))[0]))
    for p in procs:
        p.join()
        assert p.exitcode == 0
    assert len(store.metrics(ids[0])["train/loss"][0]) == 300
    assert all(len(store.metrics(i)["test/loss"][0]) == 150 for i in ids[1:])
    assert store.get(ids[0]).step == 1149


def test_the_store_parts_define_each_method_once():
    """``RunStore`` is the sum of its parts (store/schema, claims, writes, reads): a method defined in two of them
    would hide one silently."""
    from sparse_tui.store.claims import Claims
    from sparse_tui.store.reads import Reads
    from sparse_tui.store.schema import StoreFile
    from sparse_tui.store.writes import Writes

    parts = [set(vars(p)) - {"__module__", "__doc__", "__dict__", "__weakref__", "__qualname__", "__firstlineno__",
                             "__static_attributes__"} for p in (StoreFile, Claims, Writes, Reads)]
    seen: set[str] = set()
    for names in parts:
        assert not names & seen, names & seen
        seen |= names
    assert {"create_runs", "claim_runs", "reap", "finish", "log_metrics", "runs", "find", "con"} <= seen
    from sparse_tui.store import RunSink

    # RunSink is the Protocol the store declares (what train_claimed writes through); it defines no storage
    assert set(RunStore.__bases__) == {StoreFile, Claims, Writes, Reads, RunSink}
