"""Issue 43, 'real timestamps': every metric point keeps the wall-clock time it was logged (schema 6); a store of
schema 5 opens, migrates, and keeps its points (without times: interpolated as before); the writer's new argument is
optional (defaults to now); the TensorBoard export's wall times are the stored ones, read back with TensorBoard's
own reader."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from sparse_tui.presets.loading import expand, validate_preset_data
from sparse_tui.store import SCHEMA_VERSION, RunStore
from sparse_tui.store.reads import step_clock

RAW = {"name": "t", "task": {"kind": "recall", "n_tokens": 8, "n_pairs": 2},
       "model": {"kind": "transformer", "n_layers": 1, "d_model": 8}, "train": {"steps": 100, "device": "cpu"}}


def _run(store: RunStore) -> str:
    _, ids = store.create_runs(expand(validate_preset_data(RAW, "t.toml", path=Path("t.toml"))))
    return ids[0]


def test_points_keep_their_time_and_the_writer_stays_compatible(tmp_path):
    store = RunStore(tmp_path / "runs")
    rid = _run(store)
    before = time.time()
    store.log_metrics(rid, 0, {"test/loss": 1.0})  # the old call: now
    store.log_metrics(rid, 10, {"test/loss": 0.5}, wall_time=before + 100.0)  # a worker's own clock
    store.log_metrics_many(rid, [20, 30], {"test/loss": [0.4, 0.3]}, [before + 200.0, before + 300.0])
    steps, times = store.metric_times(rid)
    assert steps == [0, 10, 20, 30] and before <= times[0] <= time.time()
    assert times[1:] == [before + 100.0, before + 200.0, before + 300.0]
    start, _, at = step_clock(store.get(rid), steps, times)
    assert at(10) == before + 100.0 and at(25) == pytest.approx(before + 250.0)  # exact, then linear between
    assert store.metrics(rid)["test/loss"] == ([0, 10, 20, 30], [1.0, 0.5, 0.4, 0.3])  # reads as before
    store.close()


def test_a_schema_5_store_opens_migrates_and_keeps_its_points(tmp_path):
    store = RunStore(tmp_path / "runs")
    rid = _run(store)
    store.log_metrics(rid, 0, {"test/loss": 1.0})
    store.log_metrics(rid, 50, {"test/loss": 0.2})
    store.finish(rid, "finished", step=100)
    store.close()
    con = sqlite3.connect(tmp_path / "runs" / "runs.db")  # as sparse-tui wrote it before times were kept
    con.execute("ALTER TABLE metrics DROP COLUMN time")
    con.execute("UPDATE meta SET value='5' WHERE key='schema_version'")
    con.execute("UPDATE runs SET started_at=1000.0, ended_at=1100.0 WHERE run_id=?", (rid,))
    con.commit()
    con.close()
    old = RunStore(tmp_path / "runs")
    assert old.con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert old.metrics(rid)["test/loss"] == ([0, 50], [1.0, 0.2])  # nothing lost
    assert old.metric_times(rid) == ([], [])  # no time was kept: none is made up
    _, _, at = step_clock(old.get(rid), [], [])
    assert at(50) == pytest.approx(1050.0)  # interpolated in the step between start and end, as before
    old.close()


def test_tensorboard_export_uses_the_stored_times(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from sparse_tui.export.bridges import to_tensorboard

    store = RunStore(tmp_path / "runs")
    rid = _run(store)
    t0 = 1_700_000_000.0
    store.log_metrics_many(rid, [0, 10, 90], {"test/loss": [1.0, 0.9, 0.1]}, [t0, t0 + 50.0, t0 + 60.0])
    store.finish(rid, "finished", step=100)
    store.con.execute("UPDATE runs SET started_at=?, ended_at=? WHERE run_id=?", (t0, t0 + 70.0, rid))
    store.con.commit()
    out = tmp_path / "tb"
    to_tensorboard(store, [store.get(rid)], out)
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    ea = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    ea.Reload()
    walls = [e.wall_time for e in ea.Scalars("test/loss")]
    assert walls == pytest.approx([t0, t0 + 50.0, t0 + 60.0])  # was: interpolated, t0 + 7 at step 10
    store.close()
