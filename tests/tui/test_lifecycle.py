"""A worker killed with SIGKILL shows as failed within seconds; the other run keeps training."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from sparse_tui.lifecycle import runner
from sparse_tui.presets.loading import expand, validate_preset_data
from sparse_tui.store import RunStore

from .conftest import make, run_async, tiny_text, wait_for


@pytest.mark.slow
@run_async
async def test_sigkill_worker_shows_failed_others_keep_running(presets_dir: Path, runs_dir: Path, console_errors):
    import tomllib

    raw = tomllib.loads(tiny_text(steps=200000))
    raw["seeds"] = [0, 1]
    loaded = validate_preset_data(raw, "tiny.toml", path=presets_dir / "tiny.toml")
    store = RunStore(runs_dir)
    batch, ids = store.create_runs(expand(loaded))
    coord = runner.detach(store, batch, workers=2)
    app = make(runs_dir, presets_dir)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: len(app.main.records) == 2
                           and all(r.status == "running" and r.step > 0 for r in app.main.records), 60)
            victim = app.main.records[0]
            other = app.main.records[1]
            assert victim.pid and victim.pid != other.pid
            os.kill(victim.pid, signal.SIGKILL)
            # (the store notices a dead process within seconds; the bound is generous for a loaded 2-core machine,
            # where it took 20 s: a timing is not what this test checks)
            await wait_for(pilot, lambda: next(r for r in app.main.records if r.run_id == victim.run_id).status
                           == "failed", 60)
            dead = next(r for r in app.main.records if r.run_id == victim.run_id)
            assert "process died" in (dead.reason or "")
            step_then = next(r for r in app.main.records if r.run_id == other.run_id).step
            await wait_for(pilot, lambda: next(r for r in app.main.records
                                               if r.run_id == other.run_id).step > step_then, 15)
            assert next(r for r in app.main.records if r.run_id == other.run_id).status == "running"
            # cancel the survivor from the table (c): the trainer stops it within about a second
            await pilot.press("2")
            await pilot.pause(0.2)
            table_ids = app.query_one("RunsPanel").shown
            for _ in range(table_ids.index(other.run_id)):
                await pilot.press("down")
            await pilot.pause(0.2)
            assert app.main.current == other.run_id
            await pilot.press("c")
            await wait_for(pilot, lambda: next(r for r in app.main.records if r.run_id == other.run_id).status
                           == "cancelled", 15)
        assert console_errors == []
    finally:
        for r in store.runs(reap=False):
            if r.status in ("queued", "running"):
                store.request_cancel([r.run_id])
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                os.kill(coord, 0)
            except ProcessLookupError:
                break
            if os.waitpid(coord, os.WNOHANG) != (0, 0):
                break
            time.sleep(0.2)
