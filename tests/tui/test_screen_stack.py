"""Dialogs do not pile up (CI, 2026-11-29: the chaos test ended in ``RecursionError``). Textual draws a modal
screen over a picture of the screens under it, one nested render per screen, and the app's keys (``?``, ctrl+p and
the palette's commands) work on every screen: help opened from the palette over help, again and again, stacked one
screen per round until the nested renders passed Python's recursion limit. A dialog that is open already is not
opened a second time."""

from __future__ import annotations

from sparse_tui.tui.screens.help import HelpScreen

from .conftest import opened, palette, run_async


@run_async
async def test_help_from_the_palette_over_help_does_not_stack(synthetic, presets_dir, console_errors):
    async with opened(synthetic, presets_dir) as (app, pilot, _):
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        assert isinstance(app.screen, HelpScreen)
        depth = len(app.screen_stack)
        for _ in range(4):
            await palette(pilot, "Help: all keys")
            assert len(app.screen_stack) == depth, [type(s).__name__ for s in app.screen_stack]
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert app.screen is app.main
        assert not console_errors


@run_async
async def test_every_dialog_kind_opens_once(synthetic, presets_dir, console_errors):
    """Through every route: the help key and the palette's Atlas over each other, six rounds; the stack never holds
    two screens of one kind."""
    async with opened(synthetic, presets_dir) as (app, pilot, _):
        for _ in range(6):
            await pilot.press("f1")
            await palette(pilot, "Atlas")
        kinds = [type(s).__name__ for s in app.screen_stack]
        assert len(kinds) == len(set(kinds)), kinds
        app.screen._compositor.render_update(full=True)  # the whole stack drawn at once
        assert not console_errors
