"""Issue 43, keys: jump to a form field by typing its name (~30 Tabs from seeds to train.steps), the Atlas list
says each figure's verdict and CPU minutes on one line at 80 columns, and help lists every key and the palette's
commands (? did not list ctrl+p or the Atlas)."""

from __future__ import annotations

from pathlib import Path

from .conftest import opened, palette, run_async, wait_for


@run_async
async def test_slash_in_the_form_jumps_to_a_field_by_name(runs_dir: Path, presets_dir: Path, console_errors):
    async with opened(runs_dir, presets_dir, size=(80, 24)) as (app, pilot, _):
        await pilot.press("1", "enter")  # the form of the preset under the cursor
        form = app.query_one("PresetForm")
        await wait_for(pilot, lambda: app.focused is form, 10)
        await pilot.press("slash")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "PromptScreen", 10)
        await pilot.press(*"steps", "enter")
        await wait_for(pilot, lambda: app.focused is app.query_one("#f-train--steps"), 10)
        await pilot.press("ctrl+g")  # from inside a field too (there / types)
        await wait_for(pilot, lambda: type(app.screen).__name__ == "PromptScreen", 10)
        await pilot.press(*"train.l", "right", "enter")  # → takes the completion: train.lr
        await wait_for(pilot, lambda: app.focused is app.query_one("#f-train--lr"), 10)
        await pilot.press("ctrl+g", *"nosuch", "enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "MainScreen", 10)
        assert app.focused is app.query_one("#f-train--lr")  # a name that fits no field moves nothing, and says so
    assert console_errors == []


@run_async
async def test_help_lists_every_key_and_the_palettes_commands(runs_dir: Path, presets_dir: Path, console_errors):
    from sparse_tui.tui.commands import help_groups

    async with opened(runs_dir, presets_dir, size=(120, 40)) as (app, pilot, _):
        groups = dict(help_groups(app))
        for where in ("everywhere", "Preset list", "Presets form", "Full-screen chart (f)", "Atlas (palette)",
                      "Unsaved edits", "Palette (ctrl+p)", "Curves", "Runs"):
            assert groups.get(where), where
        text = " | ".join(f"{b.key} {b.description}" for bs in groups.values() for b in bs)
        for needle in ("ctrl+p the command palette", "Atlas: reproduce a figure of the paper", "Help: all keys",
                       "Panel: Scatter", "Preset: NAME", "home Reset", "x Log x", "t Tiles",
                       "slash, ctrl+g go to a field",
                       "end Last", "s Save"):
            assert needle in text, needle
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "HelpScreen", 10)
        assert dict(app.screen.groups).keys() == groups.keys()  # ? shows these tables
    assert console_errors == []


@run_async
async def test_atlas_lines_show_verdict_and_cpu_minutes_at_80_columns(runs_dir: Path, presets_dir: Path,
                                                                       console_errors):
    from textual.widgets import OptionList

    from sparse_tui.tui.screens.atlas import AtlasScreen

    async with opened(runs_dir, presets_dir, size=(80, 24)) as (app, pilot, _):
        await palette(pilot, "Atlas: reproduce")
        await wait_for(pilot, lambda: isinstance(app.screen, AtlasScreen), 10)
        screen = app.screen
        ol = screen.query_one(OptionList)
        keys = [e.key for e in screen.entries]
        await wait_for(pilot, lambda: "/" in str(ol.get_option_at_index(keys.index("fig3")).prompt), 90)
        line = str(ol.get_option_at_index(keys.index("fig3")).prompt)
        assert line.split() == ["fig3", "in", "kind*", "18m", "0/18"], line  # the record's verdict, 18.2 CPU min
        await pilot.pause(0.3)
        assert all(len(str(ol.get_option_at_index(i).prompt)) <= ol.scrollable_content_region.width
                   for i in range(ol.option_count))  # one line each
    assert console_errors == []
