"""The console driven by Pilot, end to end with real training on CPU (tiny preset, tmp run store)."""

from __future__ import annotations

import csv
import os
import signal
import sys
from pathlib import Path

import pytest

from sparse_tui.store import TERMINAL, RunStore
from sparse_tui.tui.widgets.attention_map import AttentionPanel
from sparse_tui.tui.widgets.curves import CurvesPanel
from sparse_tui.tui.widgets.field_row import FieldRow
from sparse_tui.tui.widgets.presets_panel import PresetsPanel

from .conftest import Seen, launch, make, opened, run_async, tiny_text, wait_for


async def type_into(pilot, widget_id: str, text: str) -> None:
    app = pilot.app
    w = app.query_one(f"#{widget_id}")
    w.focus()
    await pilot.pause()
    await pilot.press("end", *["backspace"] * (len(w.value) + 2))
    await pilot.press(*text)
    await pilot.pause(0.3)


def _kill_batches(runs_dir: Path) -> None:
    """Stop training processes a failed test may leave behind (by their recorded pids only)."""

    try:
        store = RunStore(runs_dir, create=False)
    except Exception:
        return
    for r in store.runs(reap=False):
        if r.status in ("queued", "running"):
            store.request_cancel([r.run_id])


@pytest.mark.slow
@run_async
async def test_edit_save_launch_watch_quit_reopen(presets_dir: Path, runs_dir: Path, console_errors):
    path = presets_dir / "tiny.toml"
    # 3000 steps: the run must still be training when Curves first draws it, so that the live check below sees its
    # curve grow (with 1500 it could end first on a loaded machine: the curve never grew, seen once in CI)
    path.write_text(tiny_text(steps=3000), encoding="utf-8")
    app = make(runs_dir, presets_dir)
    try:
        seen = Seen()
        async with app.run_test(size=(100, 32), message_hook=seen) as pilot:
            await wait_for(pilot, lambda: app.query(FieldRow) and seen.tables >= 1)
            panel = app.query_one(PresetsPanel)
            # an invalid learning rate is flagged at the field, with the CLI's message
            await type_into(pilot, "f-train--lr", "-1")
            await wait_for(pilot, lambda: panel.errors.get("train.lr") == "must be > 0", 10)
            row = app.query_one("#f-train--lr-row", FieldRow)
            assert row.has_class("-invalid")
            assert "must be > 0" in str(row.query_one(".error").render())
            await pilot.press("ctrl+l")  # launching an invalid preset is refused
            await pilot.pause(0.3)
            assert not RunStore(runs_dir).runs()
            # fix it and save: the comments survive
            await type_into(pilot, "f-train--lr", "2e-2")
            await wait_for(pilot, lambda: not panel.errors, 10)
            assert not row.has_class("-invalid")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: "lr = 2e-2" in path.read_text(), 10)
            text = path.read_text()
            assert "lr = 2e-2         # learning rate" in text
            assert "# Keep this comment: the form must preserve it on save." in text
            # launch: the run appears in the table and trains in a detached process
            await launch(pilot)
            await wait_for(pilot, lambda: len(app.main.records) == 1, 20)
            assert app.query_one("#panels").active == "tab-runs"
            rid = app.main.records[0].run_id
            await wait_for(pilot, lambda: app.main.records[0].status == "running" and app.main.records[0].step > 0, 60)
            # curves update live. The training process is held (SIGSTOP: a stopped process is alive to the reaper)
            # until Curves has drawn the run, so that it cannot end before the live check on a loaded machine (CI
            # once saw the 3000 steps end while the starved console was still switching panels: no growth in 90 s)
            pid = RunStore(runs_dir).get(rid).pid
            assert pid and pid != os.getpid()
            os.kill(pid, signal.SIGSTOP)
            try:
                assert RunStore(runs_dir).get(rid).step < 3000
                await pilot.press("enter")
                await wait_for(pilot, lambda: app.query_one("#panels").active == "tab-curves", 5)
                curves = app.query_one(CurvesPanel)
                await wait_for(pilot, lambda: curves.data and rid in curves.data.series
                               and "test/loss" in curves.data.series[rid], 30)
                n0 = len(curves.data.series[rid]["test/loss"][0])
            finally:
                os.kill(pid, signal.SIGCONT)
            await wait_for(pilot, lambda: len(curves.data.series[rid]["test/loss"][0]) > n0, 90)
            await pilot.press("m")  # accuracy
            await pilot.pause(0.2)
            # attention panel
            await pilot.press("4")
            att = app.query_one(AttentionPanel)
            await wait_for(pilot, lambda: att.steps, 30)
            assert "L1" in att.layer_names
            await pilot.press("left")
            await pilot.pause(0.3)
            status_at_quit = RunStore(runs_dir).get(rid).status
            await pilot.press("q")
        assert console_errors == []
        # the run outlived the app
        assert status_at_quit in ("running", "finished")
        assert RunStore(runs_dir).get(rid).status in ("running", "finished")
        # reopen: the run is there, live or finished
        app2 = make(runs_dir, presets_dir)
        seen2 = Seen()
        async with app2.run_test(size=(80, 24), message_hook=seen2) as pilot:
            await wait_for(pilot, lambda: seen2.tables >= 1)
            assert [r.run_id for r in app2.main.records] == [rid]
            await wait_for(pilot, lambda: app2.main.records[0].status in TERMINAL, 90)
            assert app2.main.records[0].status == "finished"
            assert app2.main.records[0].step == 3000
        assert console_errors == []
    finally:
        _kill_batches(runs_dir)


@run_async
async def test_run_preset_opens_with_it_selected(presets_dir: Path, runs_dir: Path, tmp_path: Path, console_errors):
    other = tmp_path / "elsewhere.toml"
    other.write_text(tiny_text(), encoding="utf-8")
    app = make(runs_dir, presets_dir, preset=other, overrides=["train.lr=3e-3"])
    seen = Seen()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        panel = app.query_one(PresetsPanel)
        await wait_for(pilot, lambda: panel.draft is not None and app.query(FieldRow), 10)
        assert panel.draft.path == other
        assert app.query_one("#f-train--lr").value == "3e-3"
        assert app.focused is not None and panel in app.focused.ancestors
        await pilot.press("ctrl+d")  # diff of the unsaved override
        await pilot.pause(0.3)
        assert "3e-3" in app.screen.diff
        await pilot.press("escape")
    assert console_errors == []


@run_async
async def test_fit_phase_export_delete_on_synthetic_store(synthetic: Path, presets_dir: Path, tmp_path: Path,
                                                           console_errors):
    from sparse_tui.export.tables import run_row
    from sparse_tui.science import fitting
    from sparse_tui.tui.widgets.fit_panel import FitPanel
    from sparse_tui.tui.widgets.phase_diagram import PhasePanel

    async with opened(synthetic, presets_dir) as (app, pilot, seen):
        await pilot.press("2")
        await pilot.pause(0.2)
        await pilot.press("down", "down")  # a toy-sweep run
        await pilot.press("5")
        fit = app.query_one(FitPanel)
        await wait_for(pilot, lambda: fit.query_one("#fit-vars").value == "d T", 5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: fit.result is not None, 20)
        store = RunStore(synthetic)
        rows = [run_row(r, store) for r in store.runs(preset="toy-sweep")]
        res = fitting.fit_power_law(rows, ["d", "T"])
        table = fit.query_one("#fit-table").render()
        assert f"{res.exponents['d']:+.2f}" in str(table) and f"{res.exponents['T']:+.2f}" in str(table)
        assert abs(res.exponents["d"] - 0.5) < 0.05 and abs(res.exponents["T"] - 1.0) < 0.05
        assert "censored = 0" in str(table)
        # phase diagram over d x T
        await pilot.press("6")
        phase = app.query_one(PhasePanel)
        await pilot.pause(0.3)
        assert {phase.x, phase.y} == {"task.d", "task.T"} or phase.keys  # all runs: lr swept too
        await pilot.press("slash", *"toy", "enter")
        await pilot.pause(0.3)
        assert {phase.x, phase.y} == {"task.d", "task.T"}
        assert "376" in str(phase.query_one("#phase-map").render())
        # export the table (CSV through sparse_tui.export.tables)
        await pilot.press("2")
        await pilot.pause(0.2)
        await pilot.press("e")
        await pilot.pause(0.3)
        out = tmp_path / "table.csv"
        inp = app.screen.query_one("#path")
        inp.value = str(out)
        await pilot.press("enter")
        await wait_for(pilot, lambda: out.exists(), 10)
        rows = list(csv.DictReader(out.open()))
        assert len(rows) == 11 and rows[0]["run_id"] == "00000002"
        # delete the failed run, with confirmation
        await pilot.press("up", "up", "up")
        await pilot.pause(0.2)
        assert app.main.current == "0000000d"
        await pilot.press("d")
        await pilot.pause(0.3)
        await pilot.press("y")
        await wait_for(pilot, lambda: len(app.main.records) == 10, 10)
        # help screen lists the bindings
        await pilot.press("f1")
        await pilot.pause(0.3)
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
    assert console_errors == []


def test_help_does_not_import_textual():
    import subprocess

    code = ("import sys\nfrom sparse_tui import cli\nsys.argv=['sparse-tui','--help']\n"
            "try:\n    cli.main()\nexcept SystemExit:\n    pass\nprint('TEXTUAL', 'textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert "TEXTUAL False" in out
