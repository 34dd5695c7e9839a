"""``sparse-tui reproduce`` on the associative-recall half of arXiv 2505.17863 (§3, App. C): the reports of Figs. 4
left/middle and 16, and the bad input that names an entry the atlas cannot reproduce at a size."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from sparse_tui import atlas
from sparse_tui.reports.library import report


def fake_store(runs: dict[str, dict]) -> SimpleNamespace:
    """A read-only store of hand-written runs: ``{run_id: {"task": {...}, "seed": s, "series": {...}, ...}}``."""

    def get(rid: str) -> SimpleNamespace:
        r = runs[rid]
        return SimpleNamespace(run_id=rid, label=rid, seed=r["seed"], plateau_step=r.get("plateau"),
                               final=r.get("final", {}), config={"task": r["task"]}, swept=r.get("swept", {}),
                               preset="p")

    return SimpleNamespace(get=get, metrics=lambda rid: runs[rid]["series"])


def loss(*vals: float) -> dict:
    return {"train/loss": ([0, 100, 200, 300, 400], list(vals)), "test/acc": ([0, 400], [0.0, 0.5])}


def test_fig16_report_reads_the_training_loss_speed_up_over_the_same_seeds_baseline(tmp_path):
    """Fig. 16 (App. C.2): per run the first step with train/loss <= 1 and the speed-up over the B = 1 run of its
    seed; the verdict says whether every repeated run is faster. The variable comes from the configurations, not from
    a reused run's own sweep (the B = 1 run here was trained by the p sweep)."""
    runs = {
        "b1s0": {"task": {"B": 1.0, "p": 0.0}, "seed": 0, "series": loss(5, 4, 3, 2, 0.9), "swept": {"task.p": 0.0}},
        "b1s1": {"task": {"B": 1.0, "p": 0.0}, "seed": 1, "series": loss(5, 4, 3, 0.8, 0.5)},
        "b2s0": {"task": {"B": 2.0, "p": 0.0}, "seed": 0, "series": loss(5, 3, 1.0, 0.5, 0.4),
                 "final": {"test/acc": 0.3}, "plateau": 100.0},
        "b2s1": {"task": {"B": 2.0, "p": 0.0}, "seed": 1, "series": loss(5, 0.9, 0.5, 0.4, 0.3)},
    }
    store = fake_store(runs)
    rep = report(store, atlas.ENTRIES["fig16_left"], list(runs))
    rows = {r["run_id"]: r for r in rep.data.runs}
    assert {r["variable"] for r in rows.values()} == {"B"}
    assert rows["b1s0"]["train_cross"] == 400 and rows["b1s0"]["speedup"] == 1.0
    assert rows["b2s0"]["train_cross"] == 200 and rows["b2s0"]["speedup"] == pytest.approx(2.0)
    assert rows["b2s1"]["speedup"] == pytest.approx(3.0)  # 300 / 100: against seed 1's own baseline
    assert rows["b2s0"]["final_test_acc"] == 0.3 and rows["b2s0"]["plateau"] == 100.0
    assert rep.data.only_faster is True and "sooner than its seed's baseline: yes" in rep.text
    # a repeated run slower than its baseline is reported as such
    runs["b2s1"]["series"] = loss(5, 4, 3, 2, 2)
    rep = report(fake_store(runs), atlas.ENTRIES["fig16_left"], list(runs))
    assert rep.data.only_faster is False and ": NO" in rep.text
    assert {r["run_id"]: r["speedup"] for r in rep.data.runs}["b2s1"] is None
    pytest.importorskip("matplotlib")
    out = atlas.ENTRIES["fig16_left"].plot_fn()(store, list(runs), tmp_path / "fig16.png")
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_fig16_names_fig5s_presets_so_reproduce_reuses_fig5s_runs():
    for side in ("left", "right"):
        assert atlas.ENTRIES[f"fig16_{side}"].presets == atlas.ENTRIES[f"fig5_{side}"].presets
    assert [e.key for e in atlas.find("fig16")] == ["fig16_left", "fig16_right"]


def test_reproduce_an_entry_not_built_or_without_the_size_is_one_line(tmp_path, monkeypatch):
    """Bad input names the entry and what it lacks, exit 2, no store written. The entries are this test's own: the
    atlas's are built one by one."""
    from sparse_tui.cli import app

    monkeypatch.setitem(atlas.ENTRIES, "fig99_unbuilt", atlas.Entry(
        "fig99_unbuilt", "Fig. 99", "a test", "§0", "nothing", "curves", built="not built yet (a test)"))
    monkeypatch.setitem(atlas.ENTRIES, "fig99_gpuonly", atlas.Entry(
        "fig99_gpuonly", "Fig. 99", "a test", "§0", "nothing", "curves", {"gpu": "paper_fig5_B"}))
    runs = tmp_path / "runs"
    r = CliRunner().invoke(app, ["reproduce", "fig99_unbuilt", "--size", "cpu", "--runs-dir", str(runs)])
    assert r.exit_code == 2 and "fig99_unbuilt: not built yet (a test)" in r.stderr
    r = CliRunner().invoke(app, ["reproduce", "fig99_gpuonly", "--size", "cpu", "--runs-dir", str(runs)])
    assert r.exit_code == 2 and "fig99_gpuonly: no cpu-sized preset (sizes: gpu)" in r.stderr
    assert "Traceback" not in r.stderr and r.exception is None or isinstance(r.exception, SystemExit)
    assert not runs.exists(), "nothing is written for bad input"
    r = CliRunner().invoke(app, ["reproduce", "--list", "--runs-dir", str(runs)])
    assert r.exit_code == 0 and "not built yet (a test)" in r.output  # --list is honest about what is missing


def test_reproduce_fig16_trains_a_shared_run_once(tmp_path):
    """Fig. 16 right's p = 0 run is Fig. 16 left's B = 1 run (the same configuration): ``reproduce fig16`` plans each
    entry after the previous one trained, so it is trained once and reused."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from sparse_tui.store import RunStore

    root = Path(__file__).resolve().parent.parent
    presets = tmp_path / "presets"
    presets.mkdir()
    for name, old, new in (("paper_fig5_B_cpu", '"task.B" = [1.0, 2.0, 4.0, 6.0]', '"task.B" = [1.0, 2.0]'),
                           ("paper_fig5_p_cpu", '"task.p" = [0.0, 0.25, 0.5, 0.9]', '"task.p" = [0.0, 0.5]')):
        text = (root / "presets" / f"{name}.toml").read_text()
        assert old in text
        text = text.replace(old, new).replace("steps = 2400", "steps = 40").replace("seeds = [0, 1]", "seeds = [0]")
        (presets / f"{name}.toml").write_text(text)
    runs = tmp_path / "runs"
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "reproduce", "fig16", "--size", "cpu", "--runs-dir",
                        str(runs), "--presets-dir", str(presets)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "fig16_left (Fig. 16 left): preset paper_fig5_B_cpu (cpu), 2 run(s): 0 already in the store" in r.stderr
    assert "fig16_right (Fig. 16 right): preset paper_fig5_p_cpu (cpu), 2 run(s): 1 already in the store" in r.stderr
    assert len(RunStore(runs, create=False).runs()) == 3
    assert "fig16_right — Fig. 16 right" in r.stdout and "sooner than its seed's baseline" in r.stdout


def acc(*vals: float) -> dict:
    return {"test/acc": ([0, 100, 200, 300, 400][: len(vals)], list(vals))}


def test_fig4_left_report_says_when_recall_emerges_per_pair_count():
    """Fig. 4 left/middle (§3.2): per run the 5% plateau and the first 60% evaluation; per N_pairs the geometric
    mean beside Fig. 4 right's law at that point; the log-log slope in N_pairs; 'later for more pairs' per seed."""
    runs = {
        "n4s0": {"task": {"n_pairs": 4, "n_tokens": 256}, "seed": 0, "plateau": 100.0, "series": acc(0, .1, .7, .9)},
        "n4s1": {"task": {"n_pairs": 4, "n_tokens": 256}, "seed": 1, "plateau": 100.0, "series": acc(0, .1, .5, .7)},
        "n8s0": {"task": {"n_pairs": 8, "n_tokens": 256}, "seed": 0, "plateau": 400.0,
                 "series": acc(0, 0, 0, .01, .06)},
        "n8s1": {"task": {"n_pairs": 8, "n_tokens": 256}, "seed": 1, "plateau": 400.0,
                 "series": acc(0, 0, 0, .01, .65)},
    }
    rep = report(fake_store(runs), atlas.ENTRIES["fig4_left"], list(runs))
    rows = {r["run_id"]: r for r in rep.data.runs}
    assert rows["n4s0"]["recall"] == 200 and rows["n4s0"]["rise"] == pytest.approx(1.0)
    assert rows["n4s1"]["recall"] == 300 and rows["n8s0"]["recall"] is None and rows["n8s1"]["recall"] == 400
    pts = {pt["n_pairs"]: pt for pt in rep.data.points}
    assert pts[4]["plateau"] == pytest.approx(100.0) and pts[8]["never"] == 1
    assert pts[4]["recall"] == pytest.approx((200 * 300) ** 0.5)
    assert pts[8]["paper"] == pytest.approx(0.55 * 256 ** 0.79 * 8 ** 2.25)
    assert rep.data.n_pairs_slope == pytest.approx(2.0)  # 100 -> 400 over a doubling
    assert rep.data.later_with_pairs is True and "in every seed: yes" in rep.text
    runs["n8s1"]["plateau"] = 50.0  # one seed emerges sooner with more pairs
    rep = report(fake_store(runs), atlas.ENTRIES["fig4_left"], list(runs))
    assert rep.data.later_with_pairs is False and "in every seed: NO" in rep.text


def test_fig5_report_sets_each_accuracy_crossing_beside_the_same_seeds_baseline():
    """Fig. 5 (§3.2): the first test accuracy >= 5%, 30%, 60% per run, the speed-up at each over the B = 1, p = 0 run
    of its seed, and the final accuracy's deficit against it (the overfitting of large repetition)."""
    runs = {
        "p0": {"task": {"B": 1.0, "p": 0.0}, "seed": 0, "series": acc(0, 0.06, 0.4, 0.7, 0.9)},
        "p5": {"task": {"B": 1.0, "p": 0.5}, "seed": 0, "series": acc(0.1, 0.35, 0.5, 0.65, 0.8)},
        "p9": {"task": {"B": 1.0, "p": 0.9}, "seed": 0, "series": acc(0.06, 0.2, 0.2, 0.3, 0.3)},
    }
    rep = report(fake_store(runs), atlas.ENTRIES["fig5_right"], list(runs))
    rows = {r["run_id"]: r for r in rep.data.runs}
    assert rows["p0"]["cross"] == [100, 200, 300] and rows["p0"]["speedup"] == [1.0, 1.0, 1.0]
    assert rows["p5"]["cross"] == [0, 100, 300]
    assert rows["p5"]["speedup"] == [None, 2.0, 1.0]  # crossed at step 0: no finite speed-up
    assert rows["p9"]["cross"] == [0, 300, None] and rows["p9"]["speedup"][1] == pytest.approx(200 / 300)
    assert rows["p9"]["final_vs_baseline"] == pytest.approx(-0.6) and rows["p9"]["best"] == 0.3
    assert {r["variable"] for r in rows.values()} == {"p"} and "vs base" in rep.text
