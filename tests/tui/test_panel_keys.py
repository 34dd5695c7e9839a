"""Keys that differ by one value call one parameterised action (issue 23): Home / End in Attention, m / M, l, h and g
in Curves, x in Phase, n / T in Runs, and the dialogs' Esc / n close them through Textual's dismiss action. Driven
as a user on the synthetic store."""

from __future__ import annotations

from pathlib import Path

from .conftest import Seen, make, run_async, to_run, wait_for


@run_async
async def test_parameterised_panel_keys(synthetic: Path, presets_dir: Path, console_errors):
    app = make(synthetic, presets_dir)
    seen = Seen()
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        await wait_for(pilot, lambda: seen.tables >= 1 and app.main.panels_mounted(), 30)
        screen = app.screen

        # Runs: n and T ask for the note and the tags of the run under the cursor; Esc closes the prompt
        await to_run(pilot, "recall-lr", "finished")
        for key, title in (("n", "Note of "), ("T", "Tags of ")):
            await pilot.press(key)
            await wait_for(pilot, lambda: type(app.screen).__name__ == "PromptScreen", 10)
            assert app.screen.title_text.startswith(title)
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is screen, 10)

        # a delete question answered n deletes nothing
        n_runs = len(app.main.records)
        await pilot.press("d")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", 10)
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is screen, 10)
        await pilot.pause(0.3)
        assert len(app.main.records) == n_runs

        # Attention: End and Home go to the newest and the first snapshot (0, 100, 200, 300)
        await pilot.press("t")
        await pilot.pause(0.3)
        attn = app.query_one("AttentionPanel")
        await wait_for(pilot, lambda: attn.steps == [0, 100, 200, 300], 20)
        await pilot.press("home")
        await wait_for(pilot, lambda: attn.step == 0 and "step 0 " in str(attn.border_title), 10)
        await pilot.press("end")
        await wait_for(pilot, lambda: attn.step == 300 and "step 300 " in str(attn.border_title), 10)

        # Curves: m and M step through the metric groups and back; l, h and g toggle
        await pilot.press("3")
        await pilot.pause(0.3)
        curves = app.query_one("CurvesPanel")
        await wait_for(pilot, lambda: curves.data is not None and curves.data.run_ids, 10)
        first = curves.group
        await pilot.press("m")
        assert curves.group != first
        await pilot.press("M")
        assert curves.group == first
        await pilot.press("M")
        assert curves.group != first
        log, theory = curves.log_loss, curves.theory
        await pilot.press("l", "h", "g")
        assert (curves.log_loss, curves.theory, curves.grid) == (not log, not theory, True)
        await pilot.press("g")
        assert not curves.grid

        # Phase: x moves the x axis to the next swept key (the y axis then takes the other)
        await to_run(pilot, "toy-sweep", "finished")
        await pilot.press("6")
        await pilot.pause(0.3)
        phase = app.query_one("PhasePanel")
        await wait_for(pilot, lambda: sorted(phase.keys) == ["task.T", "task.d"] and phase.x is not None, 10)
        x0 = phase.x
        await pilot.press("x")
        await pilot.pause(0.2)
        assert phase.x != x0 and phase.y == x0
    assert console_errors == []
