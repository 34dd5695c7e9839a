"""Issue 39, item 4: the Runs panel owns its table (``model``, a ``RunTable``) and keeps the user's choices as
reactive variables; what the main screen needs of it arrives in one ``SelectionChanged`` (it pulled the marks off
the widget, while the hidden runs came by message)."""

from __future__ import annotations

from pathlib import Path

from .conftest import opened, run_async, wait_for


@run_async
async def test_one_selection_message_carries_marks_shown_groups_and_hidden(synthetic: Path, presets_dir: Path,
                                                                           console_errors):
    from sparse_tui.tui.messages import SelectionChanged
    from sparse_tui.tui.render.table import RunTable

    async with opened(synthetic, presets_dir) as (app, pilot, _):
        await pilot.press("2")
        panel = app.query_one("RunsPanel")
        assert isinstance(panel.model, RunTable) and not isinstance(panel, RunTable)
        await wait_for(pilot, lambda: isinstance(app.main.selection, SelectionChanged) and panel.visible_ids
                       and app.main.selection.shown == panel.visible_ids, 10)
        first = panel.current_run()
        await pilot.press("space")
        await wait_for(pilot, lambda: app.main.selection.marked == [first], 10)
        assert app.main.marked == [first] == panel.marked == panel.model.marked  # the variable, the table, the screen
        await pilot.press("up", "h")
        await wait_for(pilot, lambda: app.main.selection.hidden == [first], 10)
        assert app.main.hidden == {first} and first not in app.main.view_ids()
        panel.sort = "name"  # a choice set from outside: its watcher writes it into the table and redraws
        await pilot.pause(0.3)
        assert panel.model.sort == "name" and "sort name" in str(panel.query_one("#runs-summary").render())
        await pilot.press("slash", *"toy-sweep", "enter", "g")
        await wait_for(pilot, lambda: app.main.selection.groups == ["task.d", "task.T"], 10)
        assert app.main.selection.marked == []  # the mark is on a run the filter hides: kept, not used
        assert panel.marked == [first]
    assert console_errors == []
