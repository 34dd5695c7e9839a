"""The console's preset list (issue 29): the user's own presets first, then the bundled ones in the groups of
``sparse-tui presets``; smoke is the first bundled name; a bundled preset edited and saved becomes the user's own
copy, and the package's file is never written."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import ListView

from sparse_tui.presets.catalog import bundled_dir
from sparse_tui.tui.widgets.presets_panel import PresetsPanel

from .conftest import opened, run_async, wait_for


@run_async
async def test_groups_yours_first_smoke_next_and_a_bundled_save_is_your_copy(presets_dir: Path, runs_dir: Path,
                                                                            console_errors):
    bundled = bundled_dir() / "smoke.toml"
    before = bundled.read_bytes()
    async with opened(runs_dir, presets_dir, size=(80, 24)) as (app, pilot, seen):
        panel = app.query_one(PresetsPanel)
        await wait_for(pilot, lambda: panel.draft is not None, 20)
        lv = panel.query_one("#preset-list", ListView)
        labels = [str(item.query_one("Label").render()) for item in lv.children]
        assert labels[:4] == ["─ your own", "tiny", "─ checks", "smoke"]
        headings = [text for text in labels if text.startswith("─ ")]
        assert headings == ["─ your own", "─ checks", "─ theory", "─ paper (CPU)", "─ paper (GPU)", "─ blogs"]
        assert lv.index == 1 and panel.draft.path == presets_dir / "tiny.toml"
        smoke_row = lv.children[3]
        assert smoke_row.region.y + smoke_row.region.height <= 24  # on the first screen at 80x24
        lv.focus()
        await pilot.press("down")  # the heading "checks" is skipped
        assert lv.index == 3
        await pilot.press("enter")
        await wait_for(pilot, lambda: panel.draft is not None and panel.draft.path == bundled, 10)
        lr = app.query_one("#f-train--lr")
        lr.focus()
        await pilot.pause()
        await pilot.press("end", *["backspace"] * (len(lr.value) + 2), *"2e-3")
        await wait_for(pilot, lambda: panel.draft.dirty and not panel.errors, 10)
        await pilot.press("ctrl+s")
        mine = presets_dir / "smoke.toml"
        await wait_for(pilot, lambda: mine.exists() and panel.draft.path == mine, 10)
        assert "lr = 2e-3" in mine.read_text()
        labels = [str(item.query_one("Label").render()) for item in lv.children]
        assert labels[:3] == ["─ your own", "smoke", "tiny"] and lv.index == 1
    assert bundled.read_bytes() == before
    assert console_errors == []
