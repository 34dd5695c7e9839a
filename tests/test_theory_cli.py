"""``sparse-tui theory`` and ``sparse-tui fit`` as a user drives them, the shared ``fitreport`` core, light imports,
and the theory presets (paper Fig. 1c, 2, 9)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import stored_preset
from typer.testing import CliRunner

from sparse_tui.cli import app
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.reports import selection
from sparse_tui.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}


def invoke(*args: str):
    r = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return r


def one_line_error(r) -> str:
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


# ---------------------------------------------------------------------------------------------------------------
# light imports
# ---------------------------------------------------------------------------------------------------------------


def test_theory_fit_and_ode_import_without_torch():
    """Importing the ode model, theory, fitting and the CLI, and running ``theory``, never loads torch or textual."""
    code = ("import sys, sparse_tui.models.ode, sparse_tui.science.fitting, sparse_tui.science.theory, "
            "sparse_tui.reports.fitreport; "
            "heavy = [m for m in ('torch', 'textual') if m in sys.modules]; assert not heavy, heavy; "
            "from typer.testing import CliRunner; from sparse_tui.cli import app; "
            "r = CliRunner().invoke(app, ['theory', '--d', '16', '--T', '64']); assert r.exit_code == 0, r.output; "
            "heavy = [m for m in ('torch', 'textual') if m in sys.modules]; assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV, timeout=60)


# ---------------------------------------------------------------------------------------------------------------
# theory
# ---------------------------------------------------------------------------------------------------------------


def test_theory_single_point():
    r = invoke("theory", "--d", "64", "--T", "512", "--B", "1", "--p", "0")
    assert r.exit_code == 0, r.output
    assert "integrated plateau" in r.stdout and "arcsinh" in r.stdout and "log" in r.stdout
    r = invoke("theory", "--d", "64", "--T", "512", "--json")
    pt = json.loads(r.stdout)
    # integrated plateau ~1.3 sqrt(d) T (docs/THEORY.md); closed form longer by a log factor
    assert pt["scale"] == pytest.approx(8 * 512)
    assert 1.2 < pt["ratio_scale"] < 1.6
    assert pt["ratio_arcsinh"] == pytest.approx(pt["closed_arcsinh"] / pt["plateau"])
    assert 2.0 < pt["ratio_arcsinh"] < 5.0
    assert pt["closed_log"] == pytest.approx(pt["closed_arcsinh"], rel=1e-3)


def test_theory_threshold_and_repetition_shorten_plateau():
    base = json.loads(invoke("theory", "--d", "64", "--T", "512", "--json").stdout)["plateau"]
    b4 = json.loads(invoke("theory", "--d", "64", "--T", "512", "--B", "4", "--json").stdout)["plateau"]
    p = json.loads(invoke("theory", "--d", "64", "--T", "512", "--p", "0.2", "--json").stdout)
    early = json.loads(invoke("theory", "--d", "64", "--T", "512", "--threshold", "0.9", "--json").stdout)
    assert b4 < base / 3
    assert p["plateau"] < base and p["f"] == pytest.approx(math.sqrt(0.04 * 64 + 0.64))
    assert early["plateau"] < base


def test_theory_grid_fit_matches_paper_fig2():
    """The acceptance grid: d exponent and T exponent within 0.05 of the paper's Fig. 2 fit (0.49, 0.99)."""
    r = invoke("theory", "--grid", "d=16,32,64,128,256", "T=64,256,1024,4096", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert len(out["rows"]) == 20
    ex = out["fit"]["exponents"]
    assert abs(ex["d"] - 0.49) <= 0.05 and abs(ex["T"] - 0.99) <= 0.05
    assert out["paper"]["key"] == "fig2_left"
    cmp = {c["variable"]: c for c in out["comparison"]}
    assert cmp["d"]["forecast"] == 0.5 and cmp["T"]["forecast"] == 1.0
    assert cmp["T"]["paper"] == 0.99
    lo, hi = out["ranges"]["ratio_arcsinh"]
    assert 1.5 < lo < hi < 6


def test_theory_grid_table_with_B():
    r = invoke("theory", "--grid", "d=16,32,64", "T=64,256,1024", "B=1,2,4")
    assert r.exit_code == 0, r.output
    assert "power-law fit" in r.stdout and "Fig. 2 left" in r.stdout
    b = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("B ")]
    assert b and "-1.000" in b[0]  # forecast column


def test_theory_grid_with_p_fits_f():
    out = json.loads(invoke("theory", "--grid", "d=16,64,256", "T=1024", "p=0,0.1,0.3", "--json").stdout)
    assert out["variables"] == ["d", "f"]
    assert out["paper"]["key"] == "fig2_right"
    assert out["fit"]["exponents"]["f"] < -0.7


def test_theory_bad_input_exit_2():
    assert "--d" in one_line_error(invoke("theory", "--d", "0", "--T", "64"))
    assert "--grid" in one_line_error(invoke("theory", "--grid", "x=1,2"))
    one_line_error(invoke("theory"))
    assert "B must be <= T" in one_line_error(invoke("theory", "--grid", "d=16", "T=4,8", "B=8"))
    assert "threshold" in one_line_error(invoke("theory", "--d", "16", "--T", "64", "--threshold", "1.5"))


# ---------------------------------------------------------------------------------------------------------------
# fit over a synthetic store
# ---------------------------------------------------------------------------------------------------------------

SYNTH = """\
name = "synth"
seeds = [0, 1]
[task]
kind = "linreg"
d = 16
T = 64
[model]
kind = "ode"
[train]
optimizer = "sgd"
lr = 0.5
steps = 100000
[sweep]
"task.d" = [16, 32, 64, 128]
"task.T" = [64, 256, 1024]
"task.B" = [1, 2]
"""


@pytest.fixture
def synth_store(tmp_path: Path) -> Path:
    """Runs with plateau = 1.4 sqrt(d) T / B (x small seed noise); d = 128, T = 1024 never emerge (censored); two
    extra runs failed / diverged."""
    preset, runs, store, specs, ids = stored_preset(tmp_path, SYNTH)
    for spec, rid in zip(specs, ids):
        t = spec.config.task
        pl = 1.4 * math.sqrt(t.d) * t.T / t.B * (1.0 + 0.01 * (spec.seed - 0.5))
        never = t.d == 128 and t.T == 1024
        store.finish(rid, "finished", plateau_step=None if never else pl, step=spec.config.train.steps,
                     summary={"final": {"test/loss": 0.5 if never else 0.01}})
    extra = expand(load_preset(preset, ["sweep={}"]))
    _, bad = store.create_runs(extra + extra)
    store.finish(bad[0], "failed", reason="boom")
    store.finish(bad[1], "diverged", reason="nan", plateau_step=123.0)
    store.close()
    return runs


def test_fit_recovers_exponents_and_reports_censored(synth_store):
    r = invoke("fit", "--runs-dir", str(synth_store), "--preset", "synth", "--vars", "d,T,B")
    assert r.exit_code == 0, r.output
    text = r.stdout
    assert "censored" in text and "skipped 1 diverged, 1 failed, 2 queued" in text
    assert "d <- params.task.d" in text
    # the law comes from the atlas entry of the runs' preset (issue 18): 'synth' is in none, so none is guessed
    assert "Fig. 2 left" not in text and "no paper law: preset synth is not in the figure atlas" in text
    r = invoke("fit", "--runs-dir", str(synth_store), "--preset", "synth", "--vars", "d,T,B", "--json",
               "--paper", "fig2_left")
    out = json.loads(r.stdout)
    fit = out["fit"]
    assert fit["n"] == 44 and fit["n_censored"] == 4  # 48 finished, 4 never emerged
    assert out["selection"]["skipped"] == {"failed": 1, "diverged": 1, "queued": 2}
    assert fit["exponents"]["d"] == pytest.approx(0.5, abs=1e-3)
    assert fit["exponents"]["T"] == pytest.approx(1.0, abs=1e-3)
    assert fit["exponents"]["B"] == pytest.approx(-1.0, abs=1e-3)
    cens = fit["censored"]
    assert len(cens) == 4 and all(c["lower_bound"] == 100000 for c in cens)
    assert all(c["run_id"] for c in cens)
    cmp = {c["variable"]: c for c in out["comparison"]}
    assert cmp["B"]["forecast"] == -1.0 and cmp["B"]["paper"] == -0.99


def test_fit_where_tie_bootstrap_and_time_target(synth_store):
    out = json.loads(invoke("fit", "--runs-dir", str(synth_store), "--where", "task.B=2", "--where", "d<=64",
                            "--vars", "d,T", "--json").stdout)
    assert out["fit"]["n"] == 18 and out["fit"]["n_censored"] == 0
    out = json.loads(invoke("fit", "--runs-dir", str(synth_store), "--vars", "T/B,d", "--tie", "d:0.5,T/B:1",
                            "--bootstrap", "50", "--json").stdout)
    assert out["fit"]["tie_scale"] == pytest.approx(1.0, abs=1e-3)
    assert out["fit"]["boot_ci"]["scale"][0] <= 1.0 + 1e-3
    a = json.loads(invoke("fit", "--runs-dir", str(synth_store), "--vars", "d,T", "--where", "B=1",
                          "--target", "plateau_time", "--json").stdout)
    assert a["fit"]["C"] == pytest.approx(0.7, rel=0.02)  # 1.4 sqrt(d) T steps x lr 0.5


def test_fit_run_ids_and_batch(synth_store):
    store = RunStore(synth_store, create=False)
    recs = [r for r in store.runs(status="finished") if r.params["task.B"] == 1 and r.params["task.d"] <= 64]
    ids = [r.run_id for r in recs]
    out = json.loads(invoke("fit", *ids, "--runs-dir", str(synth_store), "--vars", "d,T", "--json").stdout)
    assert out["fit"]["n"] == len(ids) == 18
    batch = recs[0].batch_id
    out = json.loads(invoke("fit", "--runs-dir", str(synth_store), "--batch", batch[:4], "--vars", "d,T,B",
                            "--json").stdout)
    assert out["selection"]["matched"] == 48


def test_fit_errors_exit_2(synth_store, tmp_path):
    rd = str(synth_store)
    msg = one_line_error(invoke("fit", "--runs-dir", rd, "--vars", "d,bogus"))
    assert "unknown variable 'bogus'" in msg and "task.d" in msg
    msg = one_line_error(invoke("fit", "--runs-dir", rd, "--where", "task.d=16", "--where", "task.T=64",
                                "--where", "task.B=1", "--vars", "d,T"))
    assert "too few runs" in msg
    assert "no runs match" in one_line_error(invoke("fit", "--runs-dir", rd, "--preset", "nope"))
    assert "no run store" in one_line_error(invoke("fit", "--runs-dir", str(tmp_path / "none")))
    assert "--where" in one_line_error(invoke("fit", "--runs-dir", rd, "--where", "task.B"))
    assert "no column" in one_line_error(invoke("fit", "--runs-dir", rd, "--where", "task.zzz=1"))
    assert "--tie" in one_line_error(invoke("fit", "--runs-dir", rd, "--tie", "d"))
    assert "no run" in one_line_error(invoke("fit", "deadbeefdead", "--runs-dir", rd))
    assert "target" in one_line_error(invoke("fit", "--runs-dir", rd, "--target", "nothing"))


def test_fitreport_select_rows_filters():
    rows = [
        {"run_id": "a", "status": "finished", "plateau_step": 10, "params.task.d": 16, "params.model.kind": "ode"},
        {"run_id": "b", "status": "finished", "plateau_step": 20, "params.task.d": 32, "params.model.kind": "toy"},
        {"run_id": "c", "status": "running", "plateau_step": None, "params.task.d": 32, "params.model.kind": "toy"},
    ]
    sel = selection.select_rows(rows, where=["model.kind=toy"])
    assert [r["run_id"] for r in sel.rows] == ["b"] and sel.skipped == {"running": 1}
    sel = selection.select_rows(rows, where=["d>=32", "kind!=ode"])
    assert sel.matched == 2
    sel = selection.select_rows(rows, where=["task.d=16,32"])
    assert sel.matched == 3
    assert selection.parse_tie("d:0.5,T/B:1,f:-1") == [("d", 0.5), ("T/B", 1.0), ("f", -1.0)]
    assert selection.parse_vars("d, T/B ,f") == ["d", "T/B", "f"]


# ---------------------------------------------------------------------------------------------------------------
# presets
# ---------------------------------------------------------------------------------------------------------------

THEORY_PRESETS = ["paper_fig1c_theory", "paper_fig2_B", "paper_fig2_p", "paper_fig9_sgd"]


@pytest.mark.parametrize("name", THEORY_PRESETS)
def test_theory_presets_load_and_name_the_figure(name):
    path = ROOT / "presets" / f"{name}.toml"
    loaded = load_preset(path)
    assert loaded.name == name
    head = path.read_text().split("\n\n")[0]
    assert "Fig." in head and "Time:" in head and "GPU" in head
    specs = expand(loaded)
    assert all(s.config.task.kind == "linreg" for s in specs)


def test_fig2_presets_settings():
    b = expand(load_preset(ROOT / "presets" / "paper_fig2_B.toml"))
    assert {s.config.task.T for s in b} == {4096} and len({s.config.task.B for s in b}) > 2
    assert all(s.config.task.test_repetition for s in b) and all(s.config.model.kind == "ode" for s in b)
    p = expand(load_preset(ROOT / "presets" / "paper_fig2_p.toml"))
    assert {s.config.task.T for s in p} == {4096} and len({s.config.task.p for s in p}) > 2
    assert {s.config.model.kind for s in p} == {"ode"}


def test_fig9_preset_has_toy_and_ode_runs():
    specs = expand(load_preset(ROOT / "presets" / "paper_fig9_sgd.toml"))
    kinds = [s.config.model.kind for s in specs]
    assert kinds.count("toy") == 5 and kinds.count("ode") == 5
    toy = next(s.config for s in specs if s.config.model.kind == "toy")
    assert (toy.task.d, toy.task.T, toy.train.batch_size, toy.train.lr, toy.train.optimizer) == (256, 256, 32, 1.0,
                                                                                                "sgd")


def test_bare_fit_on_a_store_of_several_presets_names_them(synth_store, tmp_path):
    """Issue 12: `sparse-tui fit` with no arguments on a mixed store said "variable 'd' missing in row 0" with no
    hint; now the one-line error names the presets and the flag, and --preset still fits."""
    other = tmp_path / "recall.toml"
    other.write_text('name = "recall-mix"\n[task]\nkind = "recall"\nn_tokens = 8\nn_pairs = 2\n'
                     '[model]\nkind = "transformer"\nn_layers = 2\nd_model = 16\n[train]\nsteps = 100\n')
    store = RunStore(synth_store)
    _, ids = store.create_runs(expand(load_preset(other)))
    store.finish(ids[0], "finished", plateau_step=40.0, step=100, summary={"final": {"test/loss": 0.1}})
    store.close()
    msg = one_line_error(invoke("fit", "--runs-dir", str(synth_store)))
    assert "missing" in msg and "2 presets (recall-mix, synth)" in msg and "--preset NAME" in msg
    r = invoke("fit", "--runs-dir", str(synth_store), "--preset", "synth", "--vars", "d,T,B", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["fit"]["n"] == 44
    # one preset: the error stays as it was (no hint about presets)
    msg = one_line_error(invoke("fit", "--runs-dir", str(synth_store), "--preset", "recall-mix"))
    assert "presets" not in msg
