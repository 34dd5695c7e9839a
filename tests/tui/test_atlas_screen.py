"""The console's figure atlas (palette: "Atlas: reproduce a figure of the paper"): pick a figure, launch its CPU
preset through the runner, and read the report of `sparse-tui reproduce` once its runs have finished."""

from __future__ import annotations

from pathlib import Path

from .conftest import palette, run_async, tiny_text, wait_for


@run_async
async def test_atlas_launches_a_figure_and_shows_its_report(tmp_path: Path, console_errors, monkeypatch):
    from textual.widgets import OptionList, Static

    from sparse_tui import atlas
    from sparse_tui.store import RunStore
    from sparse_tui.tui.app import SparseTuiApp
    from sparse_tui.tui.screens.atlas import AtlasScreen

    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "tiny.toml").write_text(tiny_text(40))
    RunStore(tmp_path / "runs").close()  # the console asks before it creates a store (issue 21)
    # an entry that is listed but not built (this test's own: the atlas's entries get built one by one)
    monkeypatch.setitem(atlas.ENTRIES, "fig99_unbuilt", atlas.Entry(
        "fig99_unbuilt", "Fig. 99", "a test", "§0", "nothing", "curves", built="not built yet (a test)"))
    app = SparseTuiApp(tmp_path / "runs", presets, gpu=False, poll_interval=0.1)
    async with app.run_test(size=(150, 45)) as pilot:
        await palette(pilot, "Atlas: reproduce")
        await wait_for(pilot, lambda: isinstance(app.screen, AtlasScreen), 10)
        screen = app.screen
        ol = screen.query_one(OptionList)
        keys = [e.key for e in screen.entries]
        assert "fig15_adam" in keys and "fig16_left" in keys and "fig99_unbuilt" in keys  # built or not
        await wait_for(pilot, lambda: " 0/1" in str(ol.get_option_at_index(keys.index("fig6")).prompt), 30)
        ol.highlighted = keys.index("fig6")
        detail = screen.query_one("#atlas-detail", Static)
        await wait_for(pilot, lambda: "1 to train" in str(detail.content), 30)
        await pilot.press("enter")  # launch asks first (issue 43: it launched at once, keys typed ahead started runs)
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", 10)
        assert "Launch the runs of fig6" in app.screen.question
        await pilot.press("n")  # no: nothing starts
        await wait_for(pilot, lambda: isinstance(app.screen, AtlasScreen), 10)
        await pilot.pause(0.5)
        assert RunStore(tmp_path / "runs", create=False).runs() == []
        await pilot.press("enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", 10)
        await pilot.press("y")  # a detached coordinator trains the one ode run of paper_fig6_theory
        await wait_for(pilot, lambda: "measured path" in str(detail.content), 120)
        await wait_for(pilot, lambda: " 1/1" in str(ol.get_option_at_index(keys.index("fig6")).prompt), 30)
        recs = RunStore(tmp_path / "runs", create=False).runs()
        assert [(r.preset, r.status) for r in recs] == [("paper_fig6_theory", "finished")]
        ol.highlighted = keys.index("fig99_unbuilt")
        await wait_for(pilot, lambda: "not built yet (a test)" in str(detail.content), 30)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, AtlasScreen), 10)
    assert console_errors == []


@run_async
async def test_atlas_list_takes_the_dialogs_height_at_80x24(tmp_path: Path, console_errors):
    """At 80x24 the figure list fills the dialog (13 rows), not a drop-down's six lines (app.tcss caps
    `.dialog OptionList` at 6): two figures were visible at a time."""
    from textual.widgets import OptionList

    from sparse_tui.store import RunStore
    from sparse_tui.tui.app import SparseTuiApp
    from sparse_tui.tui.screens.atlas import AtlasScreen

    RunStore(tmp_path / "runs").close()
    app = SparseTuiApp(tmp_path / "runs", tmp_path, gpu=False, poll_interval=0.1)
    async with app.run_test(size=(80, 24)) as pilot:
        await palette(pilot, "Atlas: reproduce")
        await wait_for(pilot, lambda: isinstance(app.screen, AtlasScreen), 10)
        await pilot.pause(0.3)
        assert app.screen.query_one(OptionList).region.height >= 12
    assert console_errors == []
