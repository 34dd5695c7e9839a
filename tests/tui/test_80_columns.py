"""80 columns and small things (issue 12): full run ids in `sparse-tui runs`, the Runs table's columns and detail
line, footers that end in `? more`, help keys as typed, the export dialog, the command palette."""

from __future__ import annotations

import os
from pathlib import Path

from .conftest import Seen, make, run_async, wait_for


def test_runs_command_keeps_full_ids_at_80_columns(synthetic: Path, monkeypatch):
    import io

    from rich.console import Console

    from sparse_tui.cli import common, runs

    buf = io.StringIO()
    terminal = Console(width=80, file=buf, highlight=False, soft_wrap=True)
    monkeypatch.setattr(common, "out", terminal)  # the table is printed by common's helper, the title by the command
    monkeypatch.setattr(runs, "out", terminal)
    runs.runs(runs_dir=synthetic, as_json=False, status=None, preset=None, limit=0)
    out = buf.getvalue()
    from sparse_tui.store import RunStore

    ids = [r.run_id for r in RunStore(synthetic).runs(reap=False)]
    assert len(ids) == 11
    assert all(i in out for i in ids), out  # was: '0000…' cut
    assert max(len(line) for line in out.splitlines()[1:]) <= 80  # the table (the title line holds the path)


@run_async
async def test_runs_table_footer_help_export_palette(synthetic: Path, presets_dir: Path, tmp_path: Path,
                                                      console_errors):
    app = make(synthetic, presets_dir)
    seen = Seen()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        await wait_for(pilot, lambda: seen.tables >= 1, 20)
        await pilot.press("2")
        await pilot.pause(0.3)
        table = app.query_one("#run-table")
        labels = [str(c.label) for c in table.columns.values()]
        assert labels[1:] == ["run", "name", "status", "step", "loss", "acc", "plateau"]
        assert sum(c.get_render_width(table) for c in table.columns.values()) <= 78  # all on screen
        detail = str(app.query_one("#run-detail").render())
        assert "0000000d" in detail and "params lr=0.001" in detail and "preset recall-lr" in detail
        # the footer: what fits, then '? more'
        footer_keys = [(k.key_display, k.description) for k in app.query("FooterKey")]
        assert footer_keys[-1] == ("?", "more") and ("t", "Attention") in footer_keys
        # help: keys as typed
        await pilot.press("question_mark")
        await pilot.pause(0.3)
        from rich.console import Console

        con = Console(width=120, record=True, file=open(os.devnull, "w"))
        from sparse_tui.tui.screens.help import binding_table

        con.print(binding_table(app.screen.groups))
        text = con.export_text()
        assert "question_mark" not in text and "full_stop" not in text and " ." in text and "?" in text
        await pilot.press("escape")
        await pilot.pause(0.2)
        # export: the format list has the focus; ↓ picks jsonl; Enter exports; a metrics file is metrics-*
        await pilot.press("e")
        await pilot.pause(0.3)
        assert type(app.focused).__name__ == "OptionList"
        app.screen.query_one("#folder").value = str(tmp_path / "out")
        await pilot.press("m", "down")
        await pilot.pause(0.2)
        name = app.screen.query_one("#path").value
        assert name.startswith("metrics-") and name.endswith(".jsonl")
        await pilot.press("enter")
        await wait_for(pilot, lambda: (tmp_path / "out" / name).exists(), 15)
        assert (tmp_path / "out" / name).read_text().count("\n") > 100  # one line per metric point
        # the command palette lists panels, presets and actions
        await pilot.press("ctrl+p")
        await pilot.pause(0.3)
        assert type(app.screen).__name__ == "CommandPalette"
        await pilot.press(*"Panel: Phase")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.query_one("#panels").active == "tab-phase", 5)
    assert console_errors == []


def test_run_names_are_cut_the_same_way_keeping_their_end():
    """At 80 columns every run name is cut from the front (it was: seed-0 names cut at the end, 'blog… d_model=8',
    the others at the front, '…model=8 seed=1'), so the swept values and the seed stay visible and line up."""
    from sparse_tui.tui.render.runs import fit_name

    a, b = "blog_n80 model.d_model=8 seed=0", "blog_n80 model.d_model=8 seed=1"
    cut = [fit_name(a, 16), fit_name(b, 16)]
    assert cut == ["…_model=8 seed=0", "…_model=8 seed=1"]
    assert all(len(c) == 16 for c in cut)
    assert fit_name("short seed=0", 16) == "short seed=0"
