"""Issue 34 (the Runs side): keys typed during start-up are kept, every key that changes state says so, the header
fits 80 columns."""

from __future__ import annotations

import threading
from pathlib import Path

from .conftest import Seen, make, run_async, wait_for


@run_async
async def test_keys_typed_while_the_console_starts_are_kept_in_order(synthetic: Path, presets_dir: Path,
                                                                     monkeypatch, console_errors):
    """`2 /toy` typed before the first read of the store is drawn: held (the header says so), then pressed in order
    once the console is ready. It was: the keys went to the preset list, or nowhere."""
    from sparse_tui.tui.poller import StorePoller

    gate = threading.Event()
    run = StorePoller.run

    def slow_run(self):  # the first read of the store waits for the test (a loaded machine: seconds)
        gate.wait(30)
        run(self)

    monkeypatch.setattr(StorePoller, "run", slow_run)
    app = make(synthetic, presets_dir)
    seen = Seen()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        await pilot.press("2", "slash", "t", "o", "y")
        assert seen.tables == 0 and [k.key for k in app.held_keys] == ["2", "slash", "t", "o", "y"]
        assert "5 key(s) kept" in app.sub_title
        gate.set()
        await wait_for(pilot, lambda: app.query_one("RunsPanel").query_text == "toy", 30)
        assert app.query_one("#panels").active == "tab-runs"
        panel = app.query_one("RunsPanel")
        assert panel.visible_ids and all(app.store.get(r).preset == "toy-sweep" for r in panel.visible_ids)
    assert console_errors == []


@run_async
async def test_header_keeps_the_gpu_status_whole_at_80_columns(synthetic: Path, presets_dir: Path, console_errors):
    """The header cut the GPU status at 80 columns (`… · RAM 3.1/23.5G ·…`): zero counts, the GPU names, RAM and
    CPU make way first; at 200 columns everything shows."""
    from sparse_tui.tui.messages import GpuInfo

    from .conftest import opened

    gpu = "GPU0 H100 45% 12.3/80G  GPU1 H100 3% 0.5/80G"
    async with opened(synthetic, presets_dir, size=(80, 24)) as (app, pilot, seen):
        app.post_message(GpuInfo(gpu, "CPU 100% · RAM 3.1/23.5G"))
        await pilot.pause(0.3)
        assert app.sub_title == "11 runs · GPU0 45% 12.3/80G  GPU1 3% 0.5/80G"
        assert len(f"{app.title} — {app.sub_title}") <= 80 - 18  # the header's icon and clock space
        app.post_message(GpuInfo(None, "CPU 100% · RAM 3.1/23.5G"))
        await pilot.pause(0.3)
        assert app.sub_title == "11 runs · CPU 100% · RAM 3.1/23.5G · no GPU"
        await pilot.resize_terminal(200, 50)
        app.post_message(GpuInfo(gpu, "CPU 100% · RAM 3.1/23.5G"))
        await pilot.pause(0.3)
        assert app.sub_title == f"11 runs · 0 running · CPU 100% · RAM 3.1/23.5G · {gpu}"
    assert console_errors == []


@run_async
async def test_mark_all_says_what_it_did(synthetic: Path, presets_dir: Path, console_errors):
    """`a` marked or unmarked every shown run without a word (with the marks off screen, nothing showed it)."""
    from .conftest import opened

    async with opened(synthetic, presets_dir, size=(80, 24)) as (app, pilot, seen):
        await pilot.press("2")
        await pilot.pause(0.3)
        await pilot.press("a")
        await pilot.pause(0.2)
        assert app.query_one("RunsPanel").marked
        assert list(app._notifications)[-1].message == "marked the 11 shown run(s)"
        await pilot.press("a")
        await pilot.pause(0.2)
        assert not app.query_one("RunsPanel").marked and list(app._notifications)[-1].message == "unmarked 11 run(s)"
    assert console_errors == []


@run_async
async def test_help_covers_the_table_scrollbar_at_80_columns(tmp_path: Path, presets_dir: Path, console_errors):
    """The help overlay at 80x24 left the Runs table's scrollbar visible beside its own: two scrollbars."""
    from .conftest import fill_sweep, opened

    fill_sweep(tmp_path / "sweep").close()
    async with opened(tmp_path / "sweep", presets_dir, size=(80, 24)) as (app, pilot, seen):
        await pilot.press("2")
        await pilot.pause(0.3)
        assert app.query_one("#run-table").show_vertical_scrollbar  # 20 runs: the table scrolls
        await pilot.press("question_mark")
        await pilot.pause(0.3)
        bars = [w for w in app.screen.walk_children() if w.show_vertical_scrollbar]
        assert len(bars) == 1 and app.screen.query_one("#help").region.width == 80
    assert console_errors == []


@run_async
async def test_fit_options_field_says_esc_leaves_it_and_shows_no_options_in_force(synthetic: Path,
                                                                                  presets_dir: Path, console_errors):
    """In the Fit panel's options field `o` types an `o` (fine) but nothing said Esc leaves the field, and the grey
    example options looked like options in force."""
    from .conftest import opened

    async with opened(synthetic, presets_dir, size=(80, 24)) as (app, pilot, seen):
        await pilot.press("5")
        await pilot.pause(0.3)
        panel = app.query_one("FitPanel")
        opts = panel.query_one("#fit-opts")
        assert opts.placeholder.startswith("none (e.g. --tie")
        await pilot.press("o", "o")
        await pilot.pause(0.2)
        assert app.focused is opts and opts.value == "o"
        assert "Esc leaves it" in panel.border_subtitle
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert app.focused is panel and "Esc" not in panel.border_subtitle and opts.value == "o"
    assert console_errors == []


@run_async
async def test_launch_question_is_worked_out_in_a_thread_and_said_meanwhile(runs_dir: Path, presets_dir: Path,
                                                                            monkeypatch, console_errors):
    """ctrl+l read the store for its estimate on the UI thread: 3-5 s at load 8 with no sign of work."""
    from sparse_tui.tui import actions

    from .conftest import opened

    gate = threading.Event()
    question = actions.launch_question

    def slow_question(*a, **kw):  # a loaded machine: the estimate takes seconds
        gate.wait(30)
        return question(*a, **kw)

    monkeypatch.setattr(actions, "launch_question", slow_question)
    async with opened(runs_dir, presets_dir) as (app, pilot, seen):
        await wait_for(pilot, lambda: app.query("#f-train--lr"))
        await pilot.press("ctrl+l")
        await pilot.pause(0.3)
        assert type(app.screen).__name__ == "MainScreen"  # the console goes on meanwhile
        assert list(app._notifications)[-1].message == "ctrl+l: working out what tiny would start …"
        gate.set()
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", 10)
        assert app.screen.question.startswith("Launch tiny: 1 run(s)")
        await pilot.press("n")
    assert console_errors == []


@run_async
async def test_h_hides_a_run_or_a_group_in_the_charts(synthetic: Path, presets_dir: Path, console_errors):
    """h in Runs hides the run (or the group's runs) under the cursor in the charts (wandb-tui's Space; Space marks
    here): MainScreen.hidden, which view_ids (the runs Curves is sent) leaves out; again: shown."""
    from .conftest import opened

    async with opened(synthetic, presets_dir, size=(80, 24)) as (app, pilot, seen):
        await pilot.press("2", "slash", *"toy-sweep", "enter", "space", "space", "space")
        await pilot.pause(0.3)
        panel = app.query_one("RunsPanel")
        panel.table.move_cursor(row=0)
        await pilot.pause(0.2)
        first = panel.current_key()
        assert app.main.view_ids() == panel.marked and first in panel.marked
        await pilot.press("h")
        await pilot.pause(0.3)
        assert app.main.hidden == {first} and first not in app.main.view_ids() and len(app.main.view_ids()) == 2
        assert str(panel.table.get_cell(first, "mark")) == "◌"
        assert list(app._notifications)[-1].message == f"hidden in the charts: {first}"
        assert "1 hidden in charts" in str(panel.query_one("#runs-summary").render())
        await wait_for(pilot, lambda: app.query_one("CurvesPanel").data is not None
                       and first not in app.query_one("CurvesPanel").data.run_ids, 20)
        await pilot.press("h")
        await pilot.pause(0.3)
        assert app.main.hidden == set() and first in app.main.view_ids()
        await pilot.press("g")
        await pilot.pause(0.3)
        panel.table.move_cursor(row=0)
        await pilot.press("h")  # a group row: its runs
        await pilot.pause(0.3)
        group = panel.groups[panel.current_key()]
        assert app.main.hidden == set(group.run_ids) and str(panel.table.get_cell(group.key, "mark")) == "◌"
    assert console_errors == []


@run_async
async def test_a_burst_that_switches_panels_goes_to_the_new_panel(synthetic: Path, presets_dir: Path,
                                                                   console_errors):
    """`2 /toy d` typed in one burst once the console is ready, from the Presets panel (found in the tmux walk
    right after start-up): the panel switch moves the focus later (a call_later), so `/` went to the preset list
    and `d` to the run table, which asked to delete a run. Keys that arrive during a switch wait for it."""
    from textual import events

    from .conftest import opened

    async with opened(synthetic, presets_dir, size=(80, 24)) as (app, pilot, seen):
        assert app.query_one("#panels").active == "tab-presets"
        for key, char in [("2", "2"), ("slash", "/"), ("t", "t"), ("o", "o"), ("y", "y")]:
            app.post_message(events.Key(key, char))  # a burst: no pause between the keys
        await wait_for(pilot, lambda: app.query_one("RunsPanel").query_text == "toy", 10)
        assert app.query_one("#panels").active == "tab-runs"
        assert type(app.screen).__name__ == "MainScreen"
        assert app.query_one("#run-filter").value == "toy"
    assert console_errors == []
