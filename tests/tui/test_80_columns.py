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


def test_hyperparameter_cells_never_cut_a_number():
    """A hyperparameter cell narrower than its value was cut from the front (``…00000`` for 100000, ``…000316228`` for
    3.16e-4): now a number is written shorter, never cut (issue 43); run names follow names.py (test_run_names)."""
    from sparse_tui.tui.render.names import fit_value

    assert fit_value(100000, 6) == "100000" and fit_value(100000, 4) == "100k" and fit_value(100000, 3) == "1e5"
    assert fit_value(3.16227766e-4, 6) == "3.2e-4" and fit_value(0.001, 10) == "0.001"
    assert fit_value("transformer", 6) == "…ormer"  # a text keeps its end
