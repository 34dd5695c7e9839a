"""The analysis scripts docs/REPRODUCTION.md quotes (benchmarks/plateau_grid.py, benchmarks/entry_report.py), run
as a reader runs them, on stores whose plateaus follow a known law: the numbers they print are the law's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.store import RunStore

ROOT = Path(__file__).resolve().parents[1]


def _store(path: Path, preset: str, sets: list[str], plateau) -> None:
    store = RunStore(path)
    _, ids = store.create_runs(expand(load_preset(ROOT / "presets" / preset, sets)))
    for rid in ids:
        r = store.get(rid)
        store.finish(rid, "finished", plateau_step=plateau(r.config), step=100)
    store.close()


def _script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args], capture_output=True, text=True,
                          timeout=120)


def test_plateau_grid_reads_model_keys_and_filters(tmp_path):
    """Fig. 13's depth grid: T and model.n_layers, the 1-head runs left out by --where."""
    def law(c):  # the 1-head runs off the law: --where must drop them
        heads = c["model"]["n_heads"]
        return 10.0 * c["task"]["T"] ** 0.7 * c["model"]["n_layers"] ** 0.1 * (1.0 if heads == 4 else 5.0)

    _store(tmp_path, "paper_fig13_cpu.toml",
           ["seeds=[0]", 'sweep={"task.T"=[16,32,64],"model.n_layers"=[1,2,4],"model.n_heads"=[1,4]}'], law)
    out = _script("plateau_grid.py", "--runs-dir", str(tmp_path), "--vars", "T,model.n_layers",
                  "--where", "model.n_heads=4")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("9 runs;")
    assert "fit, every lr pooled: task.T +0.70 [+0.70, +0.70], model.n_layers +0.10 [+0.10, +0.10]" in out.stdout
    assert "local task.T slopes at model.n_layers = 2: +0.70 / +0.70  (16 → 32 → 64)" in out.stdout
    none = _script("plateau_grid.py", "--runs-dir", str(tmp_path), "--vars", "T", "--where", "model.n_heads=2")
    assert none.returncode == 1 and none.stdout == ""
    assert none.stderr.strip().splitlines() == [f"--runs-dir: no run of {tmp_path} matches model.n_heads=2"]


def test_entry_report_reads_the_runs_where_selects(tmp_path):
    """Fig. 15 left's report and rule over the runs --where keeps: the paper's own law gives 'reproduced'; the
    runs left out (on another law) would have spoiled it."""
    def law(c):
        d, T = c["task"]["d"], c["task"]["T"]
        return 6.42 * d ** 1.44 * T ** 1.07 * (1.0 if c["train"]["lr"] == 5e-3 else T)

    _store(tmp_path, "paper_fig15_sgd_cpu.toml", ["seeds=[0]"], law)
    _store(tmp_path, "paper_fig15_sgd_cpu.toml", ["seeds=[0]", "train.lr=1e-2"], law)
    out = _script("entry_report.py", "--runs-dir", str(tmp_path), "--entry", "fig15_sgd", "--where", "train.lr=0.005")
    assert out.returncode == 0, out.stderr
    assert "runs: 9 matching" in out.stdout
    verdict = [ln.strip() for ln in out.stdout.splitlines() if ln.strip().startswith("verdict:")]
    assert verdict and verdict[-1].startswith("verdict: reproduced")  # (firmness and environment lines follow it)
    both = _script("entry_report.py", "--runs-dir", str(tmp_path), "--entry", "fig15_sgd")
    assert "runs: 18 matching" in both.stdout and "verdict: reproduced" not in both.stdout


def test_forecast_eval_scores_held_out_runs_on_a_known_law(tmp_path):
    """benchmarks/forecast_eval.py (issue 41) on Fig. 15 right's grid with plateaus exactly on the paper's law: every
    scenario's forecasts are within +-30 % (the exact law comes back), counted per scenario."""
    _store(tmp_path, "paper_fig15_adam_cpu.toml", [],
           lambda c: 1.45 * c["task"]["d"] ** 1.31 * c["task"]["T"] ** 0.57)
    out = _script("forecast_eval.py", "--store", f"fig15_adam={tmp_path}", "--json")
    assert out.returncode == 0, out.stderr
    import json

    res = json.loads(out.stdout)
    row = res["fig15_adam"]
    assert row["runs"] == 18
    assert row["loo"]["n"] == 18 and row["out-hi"]["n"] == 12 and row["out-lo"]["n"] == 12  # 6 per variable
    assert row["first3"]["n"] == 15 and row["first8"]["n"] == 10
    for s in ("loo", "out-hi", "out-lo", "first3", "first5", "first8"):
        assert row[s]["within_30"] == 1.0 and row[s]["median_abs_log"] < 0.01 and row[s]["nominal"] == 0.8
    bad = _script("forecast_eval.py", "--store", f"fig1ab={tmp_path}")
    assert bad.returncode == 2 and "ENTRY=RUNS_DIR" in bad.stderr


def test_forecast_eval_counts_a_plateau_at_step_0_and_does_not_score_it(tmp_path):
    """A run whose metric crossed its threshold at step 0 (Fig. 4 right at n_tokens = 32: test accuracy within noise
    of chance) has no plateau to forecast: counted, left out of every scenario (log 0 crashed the summary)."""
    _store(tmp_path, "paper_fig15_adam_cpu.toml", [],
           lambda c: 0.0 if (c["task"]["d"], c["task"]["T"], c["seed"]) == (64, 64, 1)
           else 1.45 * c["task"]["d"] ** 1.31 * c["task"]["T"] ** 0.57)
    out = _script("forecast_eval.py", "--store", f"fig15_adam={tmp_path}", "--json")
    assert out.returncode == 0, out.stderr
    import json

    row = json.loads(out.stdout)["fig15_adam"]
    assert row["plateau_not_positive"] == 1 and row["loo"]["n"] == 17
    assert row["out-hi"]["n"] == 10 and row["out-lo"]["n"] == 12  # it sat at d = 64 and T = 64
    assert row["loo"]["within_30"] == 1.0
    text = _script("forecast_eval.py", "--store", f"fig15_adam={tmp_path}")
    assert "fig15_adam   1 run(s) with a plateau at step 0 (not scored)" in text.stdout


def test_same_numbers_finds_one_moved_value_and_ignores_the_machines_readings(tmp_path):
    """benchmarks/same_numbers.py (the bit-stability record across torch versions): two stores of the same runs are
    the same numbers when only sys/* differs; one metric value moved in its last bit is found and named."""
    stores = []
    for name, last_loss, cpu in (("a", 0.25, 10.0), ("b", 0.25, 90.0), ("c", 0.25 + 2**-40, 10.0)):
        store = RunStore(tmp_path / name)
        _, ids = store.create_runs(expand(load_preset(ROOT / "presets" / "smoke.toml", ["seeds=[0,1]"])))
        for rid in ids:
            store.log_metrics_many(rid, [0, 10], {"train/loss": [1.0, last_loss], "sys/cpu_pct": [cpu, cpu]})
        store.close()
        stores.append(str(tmp_path / name))
    same = _script("same_numbers.py", stores[0], stores[1])
    assert same.returncode == 0, same.stderr
    assert "4 metric values: 4 identical, 0 differ" in same.stdout
    moved = _script("same_numbers.py", stores[0], stores[2])
    assert moved.returncode == 1
    assert "2 differ" in moved.stdout and "'train/loss': 2" in moved.stdout
    other = RunStore(tmp_path / "d")
    other.create_runs(expand(load_preset(ROOT / "presets" / "smoke.toml", ["seeds=[5]"])))
    other.close()
    assert _script("same_numbers.py", stores[0], str(tmp_path / "d")).returncode == 2
