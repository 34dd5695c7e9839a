"""``sparse-tui reproduce``: trains what the store lacks through the runner, reuses runs of the same configuration,
fits with the atlas entry's law and prints the paper beside the measurement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparse_tui.store import RunStore

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def small_fig1c(tmp_path: Path) -> Path:
    """The Fig. 1c preset on a 2 x 2 grid (same name, so the atlas entry fig1c uses it)."""
    folder = tmp_path / "presets"
    folder.mkdir()
    text = (ROOT / "presets" / "paper_fig1c_theory.toml").read_text()
    text = text.replace('"task.d" = [16, 32, 64, 128, 256]', '"task.d" = [16, 64]')
    text = text.replace('"task.T" = [64, 256, 1024, 4096]', '"task.T" = [64, 256]')
    text = text.replace("steps = 100000", "steps = 6000")
    (folder / "paper_fig1c_theory.toml").write_text(text)
    return folder


def test_reproduce_trains_the_missing_runs_then_reuses_them(tmp_path):
    presets, runs, png = small_fig1c(tmp_path), tmp_path / "runs", tmp_path / "fig1c.png"
    r = cli("reproduce", "fig1c", "--size", "cpu", "--runs-dir", str(runs), "--presets-dir", str(presets),
            "--plot", str(png))
    assert r.returncode == 0, r.stderr
    assert "4 run(s): 0 already in the store, 4 to train" in r.stderr
    assert "paper (Fig. 2 left): T_plateau = 1.51" in r.stdout  # the entry's law (Fig. 1c gives none)
    assert "+0.49" in r.stdout and "within" in r.stdout
    assert png.read_bytes()[:4] == b"\x89PNG"
    store = RunStore(runs, create=False)
    assert len(store.runs()) == 4 and {x.status for x in store.runs()} == {"finished"}
    # a second call trains nothing: the four runs are reused, and the JSON report has the same fit
    r2 = cli("reproduce", "fig1c", "--size", "cpu", "--runs-dir", str(runs), "--presets-dir", str(presets), "--json")
    assert r2.returncode == 0, r2.stderr
    assert "4 run(s): 4 already in the store, 0 to train" in r2.stderr
    data = json.loads(r2.stdout)
    assert data[0]["entry"] == "fig1c" and data[0]["law"] == "fig2_left"
    rows = {row["variable"]: row for row in data[0]["rows"]}
    assert rows["d"]["paper"] == 0.49 and abs(rows["d"]["measured"] - 0.5) < 0.05
    assert len(RunStore(runs, create=False).runs()) == 4
    # --threshold X re-reads the stored curves (nothing trained) and says which threshold it used beside the paper's
    r3 = cli("reproduce", "fig1c", "--size", "cpu", "--runs-dir", str(runs), "--presets-dir", str(presets),
             "--threshold", "0.3")
    assert r3.returncode == 0, r3.stderr
    assert "4 run(s): 4 already in the store, 0 to train" in r3.stderr
    assert ("threshold: plateaus re-read from the stored curves at test/loss <= 0.3 (--threshold 0.3), not the "
            "preset's (test/loss <= 0.2 × its initial value); not the paper's (test/loss <= 0.2 × its initial value, "
            "App. D.1); 4 of 4 plateau(s) differ") in r3.stdout
    assert "ode runs: the stored plateaus are the flow's exact crossings" in r3.stdout
    # at the preset's own threshold (0.2 x 0.5 = 0.1): the same plateaus, on the evaluation grid (every 100 steps)
    r4 = cli("reproduce", "fig1c", "--size", "cpu", "--runs-dir", str(runs), "--presets-dir", str(presets),
             "--threshold", "0.1", "--json")
    data1 = json.loads(r4.stdout)[0]
    assert data1["fit"]["threshold"]["value"] == 0.1
    for grid, exact in zip(data1["points"], data[0]["points"]):
        assert grid["x"] == exact["x"] and 0 <= grid["measured"] - exact["measured"] < 100
    assert len(RunStore(runs, create=False).runs()) == 4


def test_reproduce_reuses_runs_of_the_same_config_from_another_preset_name(tmp_path):
    """What `run` trained under another preset name is reused when the configuration is the same."""
    presets, runs = small_fig1c(tmp_path), tmp_path / "runs"
    other = tmp_path / "mine.toml"
    other.write_text((presets / "paper_fig1c_theory.toml").read_text().replace('name = "paper_fig1c_theory"',
                                                                             'name = "mine"'))
    r = cli("run", str(other), "--headless", "--runs-dir", str(runs), "--set", 'sweep.task.T=[64]')
    assert r.returncode == 0, r.stderr
    r = cli("reproduce", "fig1c", "--size", "cpu", "--runs-dir", str(runs), "--presets-dir", str(presets))
    assert r.returncode == 0, r.stderr
    assert "4 run(s): 2 already in the store, 2 to train" in r.stderr


def test_reproduce_bad_input_is_one_line(tmp_path):
    runs = tmp_path / "runs"
    r = cli("reproduce", "fig99", "--runs-dir", str(runs))
    assert r.returncode == 2 and r.stderr.startswith("error: unknown figure 'fig99'") and "Traceback" not in r.stderr
    r = cli("reproduce", "fig1c", "--size", "tpu", "--runs-dir", str(runs))
    assert r.returncode == 2 and "--size: must be one of auto, cpu, gpu" in r.stderr
    r = cli("reproduce", "--runs-dir", str(runs))
    assert r.returncode == 2 and "name a figure" in r.stderr
    r = cli("reproduce", "fig1c", "--threshold", "abc", "--runs-dir", str(runs))
    assert r.returncode == 2 and r.stderr == "error: --threshold: 'abc' is not a number (an absolute value of the " \
        "plateau metric, e.g. --threshold 0.4)\n"
    r = cli("reproduce", "fig11", "--threshold", "0.4", "--runs-dir", str(runs))  # curves: nothing is fitted
    assert r.returncode == 2 and r.stderr.startswith("error: --threshold: fig11 has no panel with a fitted law")
    assert not runs.exists(), "nothing is written for bad input"


def test_reproduce_theory_figures_report_and_draw(tmp_path):
    """Figs. 8 and 10 from their shipped ode presets: the numbers the paper states qualitatively, and a PNG each."""
    runs = tmp_path / "runs"
    png = tmp_path / "f.png"
    r = cli("reproduce", "fig8", "--runs-dir", str(runs), "--plot", str(png), "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)[0]
    lam = data["lambda"]  # 1 / (sqrt(64) 512)
    assert data["eig_start"][0] < 0 < data["eig_start"][1]
    assert abs(data["eig_start"][0] + lam) < 0.1 * lam and abs(data["eig_start"][1] - lam) < 0.1 * lam
    assert 0.9 < data["t_eig_max_over_plateau"] < 1.1  # sharpest at the transition
    assert abs(data["eig_end"][1] - 1 / 64) < 0.1 / 64 and abs(data["eig_end"][0]) < 1e-4  # 1/d and ~0 late
    assert data["w_over_winf_plateau_max"] < 0.2 and data["w_over_winf_late_maxdev"] < 1e-3
    assert png.read_bytes()[:4] == b"\x89PNG"
    r = cli("reproduce", "fig10", "--runs-dir", str(runs), "--plot", str(png), "--json")
    assert r.returncode == 0, r.stderr
    rows = {row["p"]: row for row in json.loads(r.stdout)[0]["runs"]}
    assert rows[0.3]["speedup"] > rows[0.1]["speedup"] > 1.1  # repetition shortens the plateau, about as 1/f
    assert abs(rows[0.3]["speedup"] / rows[0.3]["f"] - 1) < 0.1
    assert rows[0.1]["t_w_tilde_half"] < rows[0.1]["t_w_half"]  # the repeated component leads


def test_nearest_report_sets_perplexity_beside_the_blogs_references(tmp_path):
    """Blog 3: the report reads each run's best and final test perplexity and sets them beside (C−2)/(C−1)·V and
    V/n_embd; the log-log slope over n_embd recovers a planted power law."""
    import pytest

    from sparse_tui.atlas import ENTRIES
    from sparse_tui.presets.loading import expand, load_preset
    from sparse_tui.reports import library

    specs = [s for s in expand(load_preset(ROOT / "presets" / "blog3_nembd.toml")) if s.seed == 0]
    store = RunStore(tmp_path / "runs")
    _, ids = store.create_runs(specs)
    for spec, rid in zip(specs, ids):
        n = spec.config.model.d_model
        best = 40.0 * n ** -1.5
        store.log_metrics_many(rid, [0, 500, 1000], {"test/ppl": [100.0, best, best * 1.1]})
        store.finish(rid, "finished", step=1000)
    rep = library.report(store, ENTRIES["blog3_nembd"], ids)
    rows = {r["n_embd"]: r for r in rep.data.runs}
    assert set(rows) == {1, 2, 4, 8, 16}
    assert rows[4]["best"] == pytest.approx(40.0 / 8) and rows[4]["best_step"] == 500
    assert rows[4]["final"] == pytest.approx(1.1 * 40.0 / 8)
    assert rows[4]["guess"] == pytest.approx(16.0) and rows[4]["v_over_n"] == pytest.approx(8.0)  # V = 32, C = 3
    assert rep.data.n_embd_slope == pytest.approx(-1.5)
    assert "n_embd^-1.50" in rep.text
    from sparse_tui.reports.entries.nearest import nearest_figure

    png = nearest_figure(store, ids, tmp_path / "nembd.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_fig17_report_reads_both_probes_before_at_and_after_the_plateau(tmp_path):
    """Fig. 17 (App. C.2): the report gives, per run, the copy probe of the layer that learns it and the selection
    probe of its layer at step 0, half the plateau, the plateau, 60% accuracy and the end."""
    from types import SimpleNamespace

    from sparse_tui import atlas
    from sparse_tui.reports.library import report

    steps = [0, 100, 200, 300, 400]
    series = {
        "test/acc": (steps, [0.0, 0.02, 0.06, 0.7, 0.9]),
        "attn/L1/copy": (steps, [0.2, 0.21, 0.3, 0.6, 0.8]),
        "attn/L1/select": (steps, [0.08, 0.08, 0.1, 0.12, 0.15]),
        "attn/L2/select": (steps, [0.08, 0.09, 0.2, 0.6, 0.9]),
        "attn/L1/H0/copy": (steps, [1.0] * 5),  # per-head series are not the layer's probe
    }
    store = SimpleNamespace(get=lambda rid: SimpleNamespace(run_id=rid, label="seed=0", seed=0, plateau_step=200.0),
                            metrics=lambda rid: series)
    rep = report(store, atlas.ENTRIES["fig17"], ["r0"])
    (row,) = rep.data.runs
    assert row["plateau"] == 200.0 and row["acc60"] == 300.0
    assert row["copy"] == {"metric": "attn/L1/copy", "start": 0.2, "half": 0.21, "plateau": 0.3, "acc60": 0.6,
                           "end": 0.8}
    assert row["select"] == {"metric": "attn/L2/select", "start": 0.08, "half": 0.09, "plateau": 0.2, "acc60": 0.6,
                             "end": 0.9}
    assert "attn/L2/select" in rep.text and "acc60 0.600" in rep.text
    pytest.importorskip("matplotlib")
    from sparse_tui.atlas import ENTRIES

    out = ENTRIES["fig17"].plot_fn()(store, ["r0"], tmp_path / "fig17.png")
    assert out.stat().st_size > 10_000


def test_reuse_survives_a_field_added_to_the_schema_since_the_run():
    """A run recorded before a config field existed (here linreg's task.x_tilde) trained with that field's default:
    reproduce still reuses it (its stored config is read through today's schema), and a run whose stored config
    differs in a real setting still does not match."""
    from types import SimpleNamespace

    from sparse_tui.presets.loading import expand, load_preset
    from sparse_tui.reports.planner import match_runs

    specs = expand(load_preset(ROOT / "presets" / "paper_fig3_p_cpu.toml"))[:2]
    old = [spec.config.model_dump(mode="json") for spec in specs]
    for c in old:
        del c["task"]["x_tilde"]  # as recorded before the field existed
    old[1]["train"]["lr"] = 0.5  # a different configuration
    recs = [SimpleNamespace(config=c, status="finished", created_at=float(i)) for i, c in enumerate(old)]
    store = SimpleNamespace(runs=lambda status=None: recs)
    found, missing = match_runs(store, specs)
    assert found == {0: recs[0]} and missing == [1]


def test_curves_report_names_each_run_by_its_sweep_point_and_seed(tmp_path):
    """A curves entry's report names a run as its figure does (sweep point, seed). Labels cut to a fixed width had
    printed blog6_warmup's 12 runs as 'snapshot_every=0 d_model=60' whatever their warm-up and seed."""
    from sparse_tui.atlas import ENTRIES
    from sparse_tui.presets.loading import expand, load_preset
    from sparse_tui.reports import library

    preset = load_preset(ROOT / "presets" / "blog6_warmup.toml", ["eval.snapshot_every=0"])
    specs = expand(preset)
    store = RunStore(tmp_path / "runs")
    _, ids = store.create_runs(specs)
    for rid in ids:
        store.log_metrics_many(rid, [0, 100], {"test/acc": [0.01, 0.02], "test/loss": [4.2, 4.1]})
        store.finish(rid, "finished", step=100)
    rep = library.report(store, ENTRIES["warmup"], ids)
    names = [row["name"] for row in rep.data.runs]
    assert len(set(names)) == len(ids) == 12
    assert "d_model=80, warmup_steps=500 seed=2" in names
    assert all(name in rep.text for name in names)


def test_every_report_ends_with_its_verdict_and_a_reread_never_sets_it(tmp_path):
    """The verdict (docs/REPRODUCTION.md, "The verdict rule") is computed from the stored runs: `reproduce KEY` ends
    with it, `--threshold X` prints its fit as a diagnosis and keeps the verdict at the preset's threshold, and
    `--list --json` carries the stored runs' verdict and wall time instead of the record's."""
    from sparse_tui.reports.verdict import WORDS

    presets, runs = small_fig1c(tmp_path), tmp_path / "runs"
    r = cli("reproduce", "fig1c", "--size", "cpu", "--runs-dir", str(runs), "--presets-dir", str(presets), "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)[0]
    word = data["verdict"]
    assert word in WORDS[:3] and data["verdict_detail"]["source"] == "runs"
    r = cli("reproduce", "fig1c", "--size", "cpu", "--runs-dir", str(runs), "--presets-dir", str(presets))
    verdict, firm, env = r.stdout.rstrip().splitlines()[-3:]  # the verdict, then how firm it is and what made it
    assert verdict.startswith(f"  verdict: {word} — ") and firm.startswith("  firmness: deterministic — ")
    assert env.startswith("  environment: torch ") and "threads 1, sequential" in env
    # a re-read far from the preset's threshold moves every plateau, not the verdict
    r = cli("reproduce", "fig1c", "--size", "cpu", "--runs-dir", str(runs), "--presets-dir", str(presets),
            "--threshold", "0.45")
    assert "fig1c (diagnosis: plateaus re-read at 0.45)" in r.stdout
    last = r.stdout.rstrip().splitlines()[-3]
    assert last.startswith(f"  verdict: {word} — ") and "the re-read at 0.45 above is a diagnosis" in last
    r = cli("reproduce", "--list", "--json", "--runs-dir", str(runs), "--presets-dir", str(presets))
    row = {d["key"]: d for d in json.loads(r.stdout)}["fig1c"]
    assert row["verdict"] == word and row["verdict_source"] == "runs" and row["cost"]["cpu_source"] == "store"
    assert row["stored"] == {"cpu": "4/4"} and 0 < row["cost"]["cpu_minutes"] < 5
    assert {d["key"]: d for d in json.loads(r.stdout)}["fig3"]["verdict_source"] == "record"


def test_list_shows_the_gpu_projection_of_each_gpu_preset():
    """``reproduce --list`` carries estimate.project's range for an entry's GPU preset on the lent card, named, and
    labelled as a projection; an entry without a GPU preset of its own (theory) has none."""
    import json
    import math

    from typer.testing import CliRunner

    from sparse_tui.atlas import ENTRIES
    from sparse_tui.cli import app
    from sparse_tui.lifecycle.estimate import LENT_CARD, project
    from sparse_tui.presets.catalog import bundled_dir

    r = CliRunner().invoke(app, ["reproduce", "--list", "--json"])
    assert r.exit_code == 0, r.output
    by_key = {e["key"]: e for e in json.loads(r.output)}
    want = project(bundled_dir() / f"{ENTRIES['fig15_adam'].preset('gpu')}.toml")
    cost = by_key["fig15_adam"]["cost"]
    assert cost["gpu_minutes_projected"] == round(want.seconds / 60, 1) > 0 and cost["gpu_card"] == LENT_CARD == "H200"
    assert cost["gpu_minutes_range"] == [round(want.low / 60, 1), round(want.high / 60, 1)]
    assert "H200: " in cost["gpu_projection"] and "not measured" in cost["gpu_projection"]
    assert by_key["fig1a"]["cost"]["gpu_minutes_projected"] is None
    text = CliRunner().invoke(app, ["reproduce", "--list"]).output
    head = next(line for line in text.splitlines() if line.startswith("key "))
    assert head.split()[4] == "H200" and "H200: projected minutes" in " ".join(text.split())
    row = next(line for line in text.splitlines() if line.startswith("fig15_adam "))
    assert f"{int(want.low / 60)}–{math.ceil(want.high / 60)}" in row
