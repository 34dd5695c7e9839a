"""The Runs table of a large store is laid out once (issue 41: a 2,000-run console took 8.5 s to its first table):
showing the panel after its rows were built while hidden does not rebuild them, and no cell is parsed as markup."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .conftest import fill_sweep, opened, run_async


@run_async
async def test_showing_the_runs_panel_keeps_the_rows_built_while_hidden(tmp_path: Path, presets_dir: Path,
                                                                         console_errors):
    """The panel sized its columns to the screen while hidden, 2 columns wider than it is when shown: showing it
    cleared and rebuilt every row (at 2,000 runs, 22,000 cells measured again)."""
    fill_sweep(tmp_path / "sweep").close()
    async with opened(tmp_path / "sweep", presets_dir) as (app, pilot, seen):
        panel = app.query_one("RunsPanel")
        table = panel.table
        assert table.row_count == 20
        cleared = []
        orig = table.clear
        table.clear = lambda *a, **kw: (cleared.append(kw), orig(*a, **kw))[1]
        await pilot.press("2")
        await pilot.pause(0.3)
        assert panel.size.width > 0 and table.row_count == 20
        assert cleared == [], cleared
    assert console_errors == []


@run_async
async def test_a_run_name_is_shown_as_typed_not_as_markup(tmp_path: Path, presets_dir: Path, console_errors):
    """A preset named '[bold]fig' showed as a bold 'fig': every text cell went through Rich's markup parser."""
    fill_sweep(tmp_path / "sweep").close()
    con = sqlite3.connect(tmp_path / "sweep" / "runs.db")
    con.execute("UPDATE runs SET preset='[bold]fig' WHERE run_id=(SELECT min(run_id) FROM runs)")
    con.commit()
    con.close()
    async with opened(tmp_path / "sweep", presets_dir) as (app, pilot, seen):
        await pilot.press("2")
        await pilot.pause(0.3)
        panel = app.query_one("RunsPanel")
        col = [k for k, _, _ in panel._cols].index("name")
        shown = [panel.table._get_row_renderables(i).cells[col] for i in range(panel.table.row_count)]  # as drawn
        assert any(c.plain.startswith("[bold]fig") and not c.spans for c in shown), [c.plain for c in shown]
    assert console_errors == []


@run_async
async def test_the_age_tick_skips_a_table_a_store_read_just_made(tmp_path: Path, presets_dir: Path, console_errors):
    """The 5 s tick remade every row for the run ages (0.6 s of CPU at 2,000 runs) even when the poller's read had
    just done so; now it does only when the last read is 4 s old or more, on the app's clock."""
    fill_sweep(tmp_path / "sweep").close()
    now = [1_700_000_000.0]
    async with opened(tmp_path / "sweep", presets_dir, clock=lambda: now[0]) as (app, pilot, seen):
        panel = app.query_one("RunsPanel")
        calls = []
        orig = panel.store_changed
        panel.store_changed = lambda view: (calls.append(view.now), orig(view))[1]
        app.main._read_at = now[0]  # a store read just now
        app.main.tick()
        assert calls == []
        now[0] += 4.0
        app.main.tick()
        assert calls == [now[0]]  # the rows again, with the time now
    assert console_errors == []
