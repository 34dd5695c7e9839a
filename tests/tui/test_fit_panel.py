"""The Fit panel fits through ``fitreport.fit_store``, like ``sparse-tui fit``: same runs, same options, same
numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sparse_tui.base.plotting import fmt_r2
from sparse_tui.store import RunStore
from sparse_tui.tui.messages import FitDone
from sparse_tui.tui.widgets.fit_panel import FitPanel

from .conftest import Seen, make, run_async, wait_for

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}


def cli_fit_json(runs_dir: Path, argv: list[str]) -> dict:
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "fit", "--runs-dir", str(runs_dir), *argv, "--json"],
                       capture_output=True, text=True, timeout=120, env=ENV)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


async def _fit(pilot, seen: Seen, fit: FitPanel, runs: str, vars_: str, opts: str) -> None:
    fit.query_one("#fit-runs").value = runs
    fit.query_one("#fit-vars").value = vars_
    fit.query_one("#fit-opts").value = opts
    done = seen.count(FitDone)
    fit.focus()
    await pilot.press("enter")
    await wait_for(pilot, lambda: seen.count(FitDone) > done, 60)
    await pilot.pause(0.1)


@run_async
async def test_fit_panel_numbers_equal_the_cli(synthetic: Path, presets_dir: Path, console_errors):
    store = RunStore(synthetic)
    # one censored run (finished without a plateau) and one failed run with a plateau: the CLI excludes the failed
    # one and counts the censored one; the panel must do the same
    toy = [r for r in store.runs(preset="toy-sweep")]
    slow = max(toy, key=lambda r: r.params["task.d"] * r.params["task.T"])
    store.con.execute("UPDATE runs SET plateau_step=NULL WHERE run_id=?", (slow.run_id,))
    other = next(r for r in toy if r.run_id != slow.run_id and r.params["task.d"] != 4)
    store.con.execute("UPDATE runs SET status='failed' WHERE run_id=?", (other.run_id,))
    store.con.commit()
    app = make(synthetic, presets_dir)
    seen = Seen()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        await wait_for(pilot, lambda: seen.tables >= 1)
        await pilot.press("2")
        await pilot.pause(0.2)
        await pilot.press("down", "down")  # a toy-sweep run: the panel fits its preset (--preset toy-sweep)
        await pilot.press("5")
        fit = app.query_one(FitPanel)
        await wait_for(pilot, lambda: fit.query_one("#fit-vars").value == "d T", 5)

        cases = [
            ("", "d T", "--tie d:0.5,T:1 --bootstrap 40 --seed 3"),
            ("", "d T", ""),
            ("toy", "d, T", "boot=30 --where task.d!=4 --target plateau_time --paper none"),
        ]
        for runs, vars_, opts in cases:
            await _fit(pilot, seen, fit, runs, vars_, opts)
            done = fit.result
            assert done is not None and done.report is not None, str(fit.query_one("#fit-table").render())
            argv = done.request.argv()
            if not runs:
                assert argv[:2] == ["--preset", "toy-sweep"]
            else:  # filter words: the matching runs by id
                assert set(argv[: len(done.request.run_ids)]) == {r.run_id for r in toy}
            cli = cli_fit_json(synthetic, argv)
            panel = json.loads(json.dumps(done.report.to_dict()))
            assert panel == cli, (opts, argv)
            assert cli["selection"]["skipped"] == {"failed": 1}
            assert cli["fit"]["n_censored"] == 1 and "censored = 1" in str(fit.query_one("#fit-table").render())
            table = str(fit.query_one("#fit-table").render())
            for v in cli["fit"]["variables"]:
                assert f"{cli['fit']['exponents'][v]:+.2f}" in table
            assert f"R² = {fmt_r2(cli['fit']['r2'])}" in table
            assert "skipped 1 failed" in table and "sparse-tui fit" in table
            if "--bootstrap" in opts or "boot=" in opts:
                assert cli["fit"]["boot_ci"] and "bootstrap" in table
            if "--tie" in opts:
                assert cli["fit"]["tie_scale"] is not None and f"tied s = {cli['fit']['tie_scale']:.3f}" in table
        # the same arguments, different seeds: different bootstrap intervals (the seed reaches the fit)
        b1 = done.report.result.boot_ci
        await _fit(pilot, seen, fit, "toy", "d T",
                   "boot=30 --seed 7 --where task.d!=4 --target plateau_time --paper none")
        assert fit.result.report.result.boot_ci != b1
        # --threshold: plateaus re-read from the stored curves, the same numbers as the CLI, the threshold named
        await _fit(pilot, seen, fit, "", "d T", "--threshold 0.25")
        done = fit.result
        assert done.request.argv()[-2:] == ["--threshold", "0.25"]
        cli = cli_fit_json(synthetic, done.request.argv())
        assert json.loads(json.dumps(done.report.to_dict())) == cli and cli["threshold"]["value"] == 0.25
        assert "re-read from the stored curves at test/loss <= 0.25" in str(fit.query_one("#fit-table").render())
        await _fit(pilot, seen, fit, "", "d T", "--threshold -1")
        assert fit.result is None and "--threshold: must be a positive number" in str(
            fit.query_one("#fit-table").render())
        # a bad option line is one red line in the panel, not a crash
        await _fit(pilot, seen, fit, "", "d T", "--tie d")
        assert fit.result is None and "VAR:RATIO" in str(fit.query_one("#fit-table").render())
        await _fit(pilot, seen, fit, "", "d T", "--frobnicate 3")
        assert "unknown '--frobnicate'" in str(fit.query_one("#fit-table").render())
    assert console_errors == []


def test_the_fitted_law_is_a_line_only_when_it_is_a_function_of_the_forecast(tmp_path):
    """The Fit panel plots the plateau against the theory forecast Πxᵢ^forecastᵢ. Over variables that all have a
    forecast (d, T, B, f) the fitted law is a curve of it; over one that has none (model.n_layers here) runs at one
    x have different fitted values, and the line zigzagged between them (seen in tmux on Fig. 3's embed_scale runs):
    it is drawn as a point per run instead."""
    from sparse_tui.presets.loading import expand, load_preset
    from sparse_tui.reports.fitreport import fit_store
    from sparse_tui.tui.render.fit import fit_plot
    from sparse_tui.tui.widgets.fit_panel import fit_spec

    preset = Path(__file__).resolve().parents[2] / "presets" / "paper_fig13_cpu.toml"
    store = RunStore(tmp_path)
    _, ids = store.create_runs(expand(load_preset(preset, [
        "seeds=[0]", 'sweep={"task.T"=[16,32,64],"model.n_layers"=[1,2,4],"model.n_heads"=[4]}'])))
    for rid in ids:
        c = store.get(rid).config
        store.finish(rid, "finished", plateau_step=10.0 * c["task"]["T"] ** 0.7 * c["model"]["n_layers"] ** 0.1,
                     step=100)
    both = fit_plot(fit_store(store, "T,model.n_layers"))
    assert both["curve"] is False and len(both["x"]) == 9
    assert len({x for x in both["x"]}) == 3  # three T, three fitted values at each
    law = fit_spec(type("R", (), {"plot": both, "info": ""})()).series[0]
    assert (law.kind, law.label) == ("points", "fitted law per run")
    one = fit_plot(fit_store(store, "T", where=["model.n_layers=2"]))
    assert one["curve"] is True
    assert fit_spec(type("R", (), {"plot": one, "info": ""})()).series[0].kind == "line"


def test_without_a_theory_exponent_the_x_axis_is_the_fitted_law(tmp_path):
    """Issue 43 defect 2: a fit over keys no theory speaks of (blog_n80's train_size and lr) put every run at
    x = 1.00 on the "theory forecast" axis. The axis is then the fitted law itself: measured against fitted, the
    law the line y = x, and the axis says so."""
    from sparse_tui.presets.loading import expand, load_preset
    from sparse_tui.reports.fitreport import fit_store
    from sparse_tui.tui.render.fit import FORECAST_AXIS, fit_plot
    from sparse_tui.tui.widgets.fit_panel import fit_spec

    preset = Path(__file__).resolve().parents[2] / "presets" / "blog_n80.toml"
    store = RunStore(tmp_path)
    _, ids = store.create_runs(expand(load_preset(preset, ["seeds=[0,1]"])))
    for k, rid in enumerate(ids):
        c = store.get(rid).config
        plateau = 3.0 * c["task"]["train_size"] ** 0.3 * c["train"]["lr"] ** -0.2 * (1.1 if k % 2 else 0.9)
        store.finish(rid, "finished", plateau_step=plateau, step=100)
    d = fit_plot(fit_store(store, "train_size,lr"))
    assert len(d["x"]) == 8 and len(set(d["x"])) == 4  # four fitted values, not one x = 1.00
    assert d["x"] == d["fit"] and d["curve"] is True and d["xlabel"].startswith("fitted law")
    spec = fit_spec(type("R", (), {"plot": d, "info": ""})())
    assert spec.xlabel == d["xlabel"] and spec.series[0].kind == "line"
    assert d["xlabel"] != FORECAST_AXIS
