"""Issue 43, 'nothing lost': quitting or opening another preset over unsaved edits asks Save / Discard / Cancel
(q quit at once and dropped them), and Home / End / PgUp / PgDn move the preset list's cursor (End scrolled without
moving it, so Enter opened a preset off screen)."""

from __future__ import annotations

from pathlib import Path

from .conftest import opened, run_async, tiny_text, wait_for


async def _edit_lr(pilot, value: str) -> None:
    w = pilot.app.query_one("#f-train--lr")
    w.focus()
    await pilot.pause()
    await pilot.press("end", *["backspace"] * (len(w.value) + 2), *value)
    await wait_for(pilot, lambda: pilot.app.query_one("PresetsPanel").draft.dirty, 10)
    await pilot.press("escape", "escape")  # out of the field, out of the form: q quits from here
    await pilot.pause(0.2)


def _question(app) -> str:
    return getattr(app.screen, "question", "") if type(app.screen).__name__ == "UnsavedScreen" else ""


@run_async
async def test_quit_over_unsaved_edits_asks_and_cancel_keeps_them(runs_dir: Path, presets_dir: Path, console_errors):
    async with opened(runs_dir, presets_dir, size=(80, 24)) as (app, pilot, _):
        await pilot.press("1")
        await _edit_lr(pilot, "3e-2")
        await pilot.press("q")
        await wait_for(pilot, lambda: "tiny.toml has unsaved edits" in _question(app), 10)
        await pilot.press("c")  # cancel: the console stays, the edits too
        await wait_for(pilot, lambda: type(app.screen).__name__ == "MainScreen", 10)
        assert app.is_running and app.query_one("PresetsPanel").draft.values["train.lr"] == "3e-2"
        await pilot.press("q")
        await wait_for(pilot, lambda: bool(_question(app)), 10)
        await pilot.press("d")  # discard: it quits, the file is as it was
        await wait_for(pilot, lambda: not app.is_running, 10)
    assert "lr = 1e-2" in (presets_dir / "tiny.toml").read_text()
    assert console_errors == []


@run_async
async def test_quit_with_save_writes_the_edits_first(runs_dir: Path, presets_dir: Path, console_errors):
    async with opened(runs_dir, presets_dir, size=(80, 24)) as (app, pilot, _):
        await pilot.press("1")
        await _edit_lr(pilot, "3e-2")
        await pilot.press("q")
        await wait_for(pilot, lambda: bool(_question(app)), 10)
        await pilot.press("s")
        await wait_for(pilot, lambda: not app.is_running, 10)
    assert "lr = 3e-2" in (presets_dir / "tiny.toml").read_text()
    assert console_errors == []


@run_async
async def test_opening_another_preset_over_edits_asks(runs_dir: Path, presets_dir: Path, console_errors):
    (presets_dir / "other.toml").write_text(tiny_text().replace('name = "tiny"', 'name = "other"'))
    async with opened(runs_dir, presets_dir, size=(120, 40)) as (app, pilot, _):
        panel = app.query_one("PresetsPanel")
        await wait_for(pilot, lambda: panel.draft is not None and panel.draft.path.name == "other.toml", 10)
        await pilot.press("1")
        await _edit_lr(pilot, "3e-2")
        lv = app.query_one("#preset-list")
        lv.focus()
        lv.index = panel.rows.index(presets_dir / "tiny.toml")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "open another preset" in _question(app), 10)
        await pilot.press("escape")  # cancel: still other.toml, its edits kept, the cursor back on it
        await wait_for(pilot, lambda: type(app.screen).__name__ == "MainScreen", 10)
        assert panel.draft.path.name == "other.toml" and panel.draft.dirty
        assert panel.rows[lv.index].name == "other.toml"
        lv.index = panel.rows.index(presets_dir / "tiny.toml")
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(_question(app)), 10)
        await pilot.press("d")
        await wait_for(pilot, lambda: panel.draft.path.name == "tiny.toml", 10)
        assert "lr = 1e-2" in (presets_dir / "other.toml").read_text()
    assert console_errors == []


@run_async
async def test_end_home_and_pages_move_the_preset_cursor(runs_dir: Path, presets_dir: Path, console_errors):
    for i in range(30):
        (presets_dir / f"p{i:02d}.toml").write_text(tiny_text().replace('name = "tiny"', f'name = "p{i:02d}"'))
    async with opened(runs_dir, presets_dir, size=(80, 24)) as (app, pilot, _):
        panel = app.query_one("PresetsPanel")
        lv = app.query_one("#preset-list")
        await pilot.press("1")
        await wait_for(pilot, lambda: app.focused is lv, 10)
        await pilot.press("down", "end")
        await pilot.pause(0.2)
        last = panel.rows[lv.index]
        assert last == panel.files[-1]  # was: the cursor stayed on the second preset, the list scrolled
        await pilot.press("enter")
        await wait_for(pilot, lambda: panel.draft.path == last, 10)
        assert lv.region.contains_region(lv.highlighted_child.region)  # the opened preset is on screen
        lv.focus()
        await pilot.press("home")
        await pilot.pause(0.2)
        assert panel.rows[lv.index] == panel.files[0]
        await pilot.press("pagedown")
        await pilot.pause(0.2)
        down = lv.index
        assert down > 5 and panel.rows[down] is not None  # a page, never onto a group's heading
        await pilot.press("pageup")
        await pilot.pause(0.2)
        assert panel.rows[lv.index] == panel.files[0]
    assert console_errors == []
