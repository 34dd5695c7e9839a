"""``sparse-tui fit --threshold X``: each run's plateau re-read from its stored curve at an absolute threshold, with
the training loop's rule (the first logged evaluation at or below X), then fitted as usual; runs that never reach X
are censored at their last evaluation; the report names X beside the preset's threshold and the paper's."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import stored_preset
from typer.testing import CliRunner

from sparse_tui.cli import app
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.reports import fitreport, selection
from sparse_tui.science.fitting import FitError
from sparse_tui.store import RunStore

PRESET = """\
name = "{name}"
seeds = [0]
[task]
kind = "linreg"
d = 4
T = 8
[model]
kind = "ode"
[train]
optimizer = "sgd"
lr = 0.5
steps = 5000
[plateau]
metric = "test/loss"
mode = "below"
value = 0.1
stop_after = 200
[sweep]
"task.d" = [4, 16, 64]
"task.T" = [8, 16, 32]
"""


def leave(d: int, T: int) -> int:
    """When a run's hand-written curve leaves its plateau (test loss exactly 0.4): sqrt(d)·T steps."""
    return int(math.sqrt(d)) * T


def curve(d: int, T: int) -> tuple[list[int], list[float]]:
    """Flat at 0.5, exactly 0.4 at ``leave`` (at or below 0.4 counts), then a drop of 200 steps to 0.1 whatever d
    and T (the preset's 0.1 plateau is leave + 200, not a power law), stopping at 0.05 (the run's end)."""
    P = leave(d, T)
    return [0, P // 2, P - 1, P, P + 100, P + 200, P + 300], [0.5, 0.45, 0.41, 0.4, 0.2, 0.1, 0.05]


def make_store(tmp_path: Path, name: str = "synth-thr") -> Path:
    """Nine finished runs with the curves above (stored plateau: the 0.1 crossing, leave + 200) and one finished
    run that never left its plateau (d = 64, T = 32 again, seed 1: flat at 0.5 up to step 1000 of its 5000)."""
    preset, runs, store, specs, ids = stored_preset(tmp_path, PRESET.format(name=name), name)
    for spec, rid in zip(specs, ids):
        t = spec.config.task
        steps, loss = curve(t.d, t.T)
        store.log_metrics_many(rid, steps, {"test/loss": loss})
        store.finish(rid, "finished", plateau_step=leave(t.d, t.T) + 200, step=steps[-1])
    _, (never,) = store.create_runs(expand(load_preset(preset, ["sweep={}", "task.d=64", "task.T=32", "seeds=[1]"])))
    store.log_metrics_many(never, [0, 500, 1000], {"test/loss": [0.5, 0.5, 0.5]})
    store.finish(never, "finished", plateau_step=None, step=1000)
    store.close()
    return runs


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})


def one_line_error(r) -> str:
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_reread_plateau_is_the_first_evaluation_at_or_below_the_threshold(tmp_path):
    store = RunStore(make_store(tmp_path), create=False)
    sel = selection.select_runs(store, preset="synth-thr")
    assert len(sel.rows) == 10
    at = {}
    for x in (0.4, 0.2, 0.1, 0.45):
        new, info = fitreport.reread_plateaus(store, sel, x)
        at[x] = {r["run_id"]: r["plateau_step"] for r in new.rows}
        assert info.runs == 10 and info.used == [f"test/loss <= {x:g}"]
    for r in sel.rows:
        d, T = r["params.task.d"], r["params.task.T"]
        if r["plateau_step"] is None:  # the run that never left its plateau stays censored
            assert all(at[x][r["run_id"]] is None for x in at)
            continue
        P = leave(d, T)
        assert at[0.4][r["run_id"]] == P  # exactly 0.4 counts (at or below)
        assert at[0.2][r["run_id"]] == P + 100
        assert at[0.1][r["run_id"]] == P + 200 == r["plateau_step"]  # the preset's own threshold: the stored value
        assert at[0.45][r["run_id"]] == P // 2
    # the stored plateaus are untouched: re-reading changes the report, never the store
    assert sorted(r.plateau_step or 0 for r in store.runs()) == sorted(r["plateau_step"] or 0 for r in sel.rows)


def test_fit_threshold_recovers_the_law_of_leaving_the_plateau(tmp_path):
    runs = str(make_store(tmp_path))
    base = json.loads(invoke("fit", "--runs-dir", runs, "--vars", "d,T", "--json").stdout)
    assert base["threshold"] is None
    assert base["fit"]["exponents"]["T"] < 0.9  # the constant 200-step drop flattens the slopes at 0.1
    r = invoke("fit", "--runs-dir", runs, "--vars", "d,T", "--threshold", "0.4", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    fit = out["fit"]
    assert fit["exponents"]["d"] == pytest.approx(0.5, abs=1e-9)
    assert fit["exponents"]["T"] == pytest.approx(1.0, abs=1e-9)
    assert fit["C"] == pytest.approx(1.0, rel=1e-9) and fit["n"] == 9
    assert out["threshold"]["notes"] == ["ode runs: the stored plateaus are the flow's exact crossings, the re-read "
                                         "ones lie on the evaluation grid (every 50 steps)"]
    del out["threshold"]["notes"]
    assert out["threshold"] == {"value": 0.4, "used": ["test/loss <= 0.4"], "preset": ["test/loss <= 0.1"],
                                "paper": [], "changed": 9, "runs": 10}


def test_censored_at_the_threshold_lower_bound_is_the_last_evaluation(tmp_path):
    runs = str(make_store(tmp_path))
    out = json.loads(invoke("fit", "--runs-dir", runs, "--vars", "d,T", "--threshold", "0.4", "--json").stdout)
    (never,) = out["fit"]["censored"]
    assert never["lower_bound"] == 1000  # its last evaluation, not its 5000-step budget
    # a threshold stricter than where the runs stopped: every run is censored, at its last evaluation
    store = RunStore(Path(runs), create=False)
    new, info = fitreport.reread_plateaus(store, selection.select_runs(store), 0.01)
    assert all(r["plateau_step"] is None for r in new.rows)
    ends = [leave(d, T) + 300 for d in (4, 16, 64) for T in (8, 16, 32)] + [1000]
    assert sorted(r["last_step"] for r in new.rows) == sorted(ends)
    msg = one_line_error(invoke("fit", "--runs-dir", runs, "--vars", "d,T", "--threshold", "0.01"))
    assert "too few runs" in msg


def test_report_names_the_threshold_the_presets_and_the_papers(tmp_path):
    runs = str(make_store(tmp_path))
    r = invoke("fit", "--runs-dir", runs, "--vars", "d,T", "--threshold", "0.4")
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("threshold:"))
    assert line.startswith("threshold: plateaus re-read from the stored curves at test/loss <= 0.4 (--threshold "
                           "0.4), not the preset's (test/loss <= 0.1)")
    assert "not in the figure atlas" in line and "9 of 10 plateau(s) differ" in line
    r = invoke("fit", "--runs-dir", runs, "--vars", "d,T", "--threshold", "0.1")
    assert "the same as the preset's (test/loss <= 0.1)" in r.stdout and "0 of 10 plateau(s) differ" in r.stdout
    assert "re-read" not in invoke("fit", "--runs-dir", runs, "--vars", "d,T").stdout


def test_paper_threshold_comes_from_the_figure_atlas(tmp_path):
    """Runs of a preset the atlas names (here Fig. 15 right's CPU preset): the paper's threshold is App. D.1's
    absolute 0.1, read from the atlas entry, and its law is compared."""
    runs = str(make_store(tmp_path, name="paper_fig15_adam_cpu"))
    r = invoke("fit", "--runs-dir", runs, "--vars", "d,T", "--threshold", "0.4")
    assert r.exit_code == 0, r.output
    assert "not the paper's (test/loss <= 0.1, App. D.1)" in r.stdout and "Fig. 15 right" in r.stdout
    out = json.loads(invoke("fit", "--runs-dir", runs, "--vars", "d,T", "--threshold", "0.1", "--json").stdout)
    assert out["threshold"]["paper"] == ["test/loss <= 0.1"]


def test_rising_metric_rule_rereads_at_or_above(tmp_path):
    """A preset whose rule watches a rising metric (``above``: accuracy; here the toy model's alpha) is re-read at or
    above X."""
    preset = tmp_path / "up.toml"
    preset.write_text(PRESET.format(name="up").replace('metric = "test/loss"', 'metric = "toy/alpha"')
                      .replace('mode = "below"', 'mode = "above"').replace("value = 0.1", "value = 0.05"))
    specs = expand(load_preset(preset, ["sweep={}"]))
    store = RunStore(tmp_path / "runs")
    _, (rid,) = store.create_runs(specs)
    store.log_metrics_many(rid, [0, 10, 20, 30], {"toy/alpha": [0.0, 0.06, 0.5, 0.9], "test/loss": [1, 1, 1, 1]})
    store.finish(rid, "finished", plateau_step=10, step=30)
    new, info = fitreport.reread_plateaus(store, selection.select_runs(store), 0.5)
    assert new.rows[0]["plateau_step"] == 20
    assert info.used == ["toy/alpha >= 0.5"] and info.preset_rules == ["toy/alpha >= 0.05"]


def test_run_without_its_curve_is_skipped_and_counted(tmp_path):
    runs = make_store(tmp_path)
    store = RunStore(runs)
    victim = store.runs(preset="synth-thr")[0].run_id
    store.con.execute("DELETE FROM metrics WHERE run_id=?", (victim,))
    store.con.commit()
    new, info = fitreport.reread_plateaus(store, selection.select_runs(store), 0.4)
    assert info.runs == 9 and new.skipped == {"no stored test/loss curve": 1}
    assert "skipped 1 no stored test/loss curve" in new.describe()


@pytest.mark.parametrize("bad, says", [("abc", "'abc' is not a number"), ("0", "must be a positive number"),
                                       ("-0.4", "must be a positive number"), ("nan", "must be a positive number")])
def test_bad_threshold_is_one_line_exit_2(tmp_path, bad, says):
    runs = str(make_store(tmp_path))
    msg = one_line_error(invoke("fit", "--runs-dir", runs, "--vars", "d,T", "--threshold", bad))
    assert msg.startswith("error: --threshold: ") and says in msg
    with pytest.raises(FitError, match="--threshold"):
        fitreport.fit_store(RunStore(Path(runs), create=False), "d,T", threshold=bad)


def test_fit_figure_names_the_reread_threshold(tmp_path):
    pytest.importorskip("matplotlib")
    from sparse_tui.reports.figures import fit_figure

    store = RunStore(make_store(tmp_path), create=False)
    svg = fit_figure(fitreport.fit_store(store, "d,T", threshold=0.4), tmp_path / "fit.svg").read_text()
    assert "plateau at test/loss &lt;= 0.4 (re-read)" in svg
    assert "re-read" not in fit_figure(fitreport.fit_store(store, "d,T"), tmp_path / "fit0.svg").read_text()
