"""The crashes of issue 12, reproduced: each sequence exited the console with a plotext traceback (``IndexError`` in
``_build.py`` or ``math domain error``) because plotext's figure state was rebuilt at another size or logged twice.
Each must now leave the console running with no error reported; and an exception inside a panel must show in that
panel, be logged, and leave the app running."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Seen, make, run_async, wait_for

SEQUENCES = {
    "curves_after_runs_enter": ["2", "enter", "2", "3"],
    "resize_with_curves_open": ["2", "down", "enter", (120, 40), (80, 24), (160, 50), (100, 30)],
    "fit_then_runs_then_fit": ["2", "down", "down", "5", "enter", "2", "5"],
    "fit_enter_three_times": ["2", "down", "down", "5", "enter", "enter", "enter"],
    "fit_resize": ["2", "down", "down", "5", "enter", (80, 24), (140, 45)],
    "curves_every_group_log": ["2", "down", "enter", "m", "m", "m", "m", "m", "l", "l", "2", "3"],
}


@pytest.mark.parametrize("name", list(SEQUENCES))
@run_async
async def test_no_crash(synthetic: Path, presets_dir: Path, name: str, console_errors):
    app = make(synthetic, presets_dir)
    seen = Seen()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        await wait_for(pilot, lambda: seen.tables >= 1, 20)
        for step in SEQUENCES[name]:
            if isinstance(step, tuple):
                await pilot.resize_terminal(*step)
            else:
                await pilot.press(step)
            await pilot.pause(0.15)
            if app.query_one("#panels").active == "tab-fit":
                fp = app.query_one("FitPanel")
                await wait_for(pilot, lambda: "fitting" not in str(fp.query_one("#fit-table").render()), 30)
        await pilot.pause(0.3)
        assert app.is_running
        assert console_errors == []
        if "fit" in name:  # the fit really happened (and was drawn) each time
            assert app.query_one("FitPanel").result is not None


@run_async
async def test_an_exception_in_a_panel_is_shown_logged_and_survived(synthetic: Path, presets_dir: Path,
                                                                     monkeypatch, console_errors):
    from sparse_tui.tui.widgets.phase_diagram import PhasePanel

    def broken(self, *a, **kw):
        raise RuntimeError("phase exploded")

    monkeypatch.setattr(PhasePanel, "action_value", broken)
    app = make(synthetic, presets_dir)
    seen = Seen()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        await wait_for(pilot, lambda: seen.tables >= 1, 20)
        await pilot.press("6")
        await pilot.pause(0.2)
        await pilot.press("m")  # the broken action
        await pilot.pause(0.3)
        assert app.is_running
        assert console_errors == ["RuntimeError: phase exploded"]
        line = app.query_one("#phase .panel-error")
        assert "phase exploded" in str(line.render())
        log = (synthetic / "logs" / "console.log").read_text()
        assert "RuntimeError: phase exploded" in log and "Traceback" in log
        await pilot.press("x")  # the console goes on
        await pilot.press("2")
        await pilot.pause(0.2)
        assert app.query_one("#panels").active == "tab-runs"
