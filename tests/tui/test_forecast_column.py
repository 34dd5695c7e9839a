"""The Runs panel at 80x24 shows the emergence forecast (forecast.py, issue 33): '~512' in the plateau column of a run
still on its plateau, the live plateau (1200) of a run that left it while still training, and on the detail line of
the run under the cursor the forecast in full (measured / forecast after the plateau; interval, source and ETA
before); on a synthetic store of Fig. 15's CPU preset (4 finished runs on an exact law)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.store import RunStore

from .conftest import BASE_TIME, make, pin_times

FIG15 = Path(__file__).parents[2] / "presets" / "paper_fig15_adam_cpu.toml"


def forecast_store(runs_dir: Path) -> list[str]:
    import sparse_tui.store.claims as store_mod

    counter = itertools.count(1)
    orig = store_mod.new_id
    store_mod.new_id = lambda nbytes=4: f"{next(counter):0{2 * nbytes}x}"
    try:
        store = RunStore(runs_dir)
        specs = expand(load_preset(FIG15, ["seeds=[0]", 'sweep={"task.d" = [16, 32, 64], "task.T" = [16, 64]}']))
        _, ids = store.create_runs(specs)
    finally:
        store_mod.new_id = orig
    con = store.con
    for i, rid in enumerate(ids):
        r = store.get(rid)
        if i < 4:
            store.finish(rid, "finished", plateau_step=2.0 * r.params["task.d"] * r.params["task.T"] ** 0.5, step=6000)
            pin_times(con, rid, BASE_TIME + i, 60)
        else:  # running in this (live) process: 500 / 900 steps in 100 s
            con.execute("UPDATE runs SET status='running', device='cpu', step=?, created_at=?, started_at=?,"
                        " heartbeat_at=?, pid=?, host=? WHERE run_id=?",
                        (500 if i == 4 else 900, BASE_TIME + i, BASE_TIME + 1000, BASE_TIME + 1100, os.getpid(),
                         store._host, rid))
    con.commit()
    store.log_plateau(ids[5], 1200.0)
    store.close()
    return ids


async def _runs(pilot):
    await pilot.press("2")
    for _ in range(300):
        if pilot.app.query_one("RunsPanel").rows:
            break
        await pilot.pause(0.05)
    await pilot.pause(0.3)


async def _second_row(pilot):
    await _runs(pilot)
    await pilot.press("down")
    await pilot.pause(0.3)


def test_forecast_in_runs_at_80x24(snap_compare, tmp_path):
    runs, presets = tmp_path / "runs", tmp_path / "presets"
    presets.mkdir()
    forecast_store(runs)
    assert snap_compare(make(runs, presets), terminal_size=(80, 24), run_before=_runs)


def test_forecast_of_a_run_on_its_plateau_at_80x24(snap_compare, tmp_path):
    runs, presets = tmp_path / "runs", tmp_path / "presets"
    presets.mkdir()
    forecast_store(runs)
    assert snap_compare(make(runs, presets), terminal_size=(80, 24), run_before=_second_row)


def test_forecasts_are_fitted_in_the_poller_thread(tmp_path, monkeypatch):
    """A preset's first forecasts are least-squares fits (one per run): the store poller's thread fits them and its
    message carries them; the UI thread only draws (it fitted them on every first sight of a preset)."""
    import asyncio
    import threading

    import sparse_tui.tui.poller as poller_mod

    runs, presets = tmp_path / "runs", tmp_path / "presets"
    presets.mkdir()
    forecast_store(runs)
    threads: list[str] = []
    real = poller_mod.forecasts

    def spy(records):
        threads.append(threading.current_thread().name)
        return real(records)

    monkeypatch.setattr(poller_mod, "forecasts", spy)
    import sparse_tui.science.forecast as forecast_mod

    def not_here(*a, **k):  # the Runs table must not fit
        raise AssertionError("forecast fitted outside the poller")

    monkeypatch.setattr(forecast_mod, "forecasts", not_here)

    async def go():
        app = make(runs, presets)
        async with app.run_test(size=(80, 24)) as pilot:
            await _runs(pilot)
            cells = [str(c) for c in app.query_one("#run-table").get_column_at(
                [k for k, _t, _w in app.query_one("RunsPanel")._cols].index("plateau"))]
            assert any(c.startswith("~") for c in cells), cells  # the forecasts reached the table
            assert app.main.forecasts and all(f is not None for f in app.main.forecasts.values())

    asyncio.run(go())
    assert threads and threading.main_thread().name not in threads
