"""Issue 43, 'pooling only like with like': the Phase diagram, the run table's groups and the Fit panel's guess
never pool or propose what is not alike (runs trained for another number of steps, a training-length key)."""

from __future__ import annotations

import math
from pathlib import Path

from sparse_tui.presets.loading import expand, validate_preset_data
from sparse_tui.science.phase import cell_note, differing_keys, phase_grid, phase_slice
from sparse_tui.store import RunStore


def _store(tmp_path: Path, raw: dict, results) -> list:
    """Runs of ``raw`` in a store, each finished with ``results(params) -> (acc, plateau)``."""
    store = RunStore(tmp_path / "runs")
    _, ids = store.create_runs(expand(validate_preset_data(raw, "t.toml", path=Path("t.toml"))))
    for rid in ids:
        acc, plateau = results(store.get(rid).params)
        store.finish(rid, "finished", plateau_step=plateau, step=10, summary={"final": {"test/acc": acc}})
    recs = [store.get(r) for r in ids]
    store.close()
    return recs


BLOG = {"name": "blog", "task": {"kind": "recall", "n_tokens": 8, "n_pairs": 2},
        "model": {"kind": "transformer", "n_layers": 1, "d_model": 8}, "train": {"steps": 200, "device": "cpu"},
        "seeds": [0, 1], "sweep": {"train.lr": [0.001, 0.01], "task.train_size": [1000, 100000]}}


def test_phase_cells_pool_only_runs_that_agree_but_in_the_seed(tmp_path):
    """The issue's case: 8 runs at 200 steps (accuracy 0.02) and one at 2,000 steps (0.996) in the cell lr = 0.001 ×
    1e5. The old grid showed their mean, 0.346; the cell now holds the two 200-step seeds, and the line says the
    runs also differ in steps."""
    short = _store(tmp_path / "a", BLOG, lambda p: (0.02, None))
    long = _store(tmp_path / "b", {**BLOG, "train": {"steps": 2000, "device": "cpu"}, "seeds": [0],
                                   "sweep": {"train.lr": [0.001], "task.train_size": [100000]}},
                  lambda p: (0.996, 300.0))
    recs = short + long
    assert differing_keys(recs, ("train.lr", "task.train_size")) == ["train.steps"]
    pooled, note = phase_slice(recs, "train.lr", "task.train_size")
    assert len(pooled) == 8 and all(r.params["train.steps"] == 200 for r in pooled)
    assert "differ in steps" in note and "showing steps=200 (8 run(s))" in note and "steps=2000 (1)" in note
    xs, ys, grid, counts = phase_grid(pooled, "train.lr", "task.train_size", "acc")
    assert grid[ys.index(100000)][xs.index(0.001)] == 0.02 and counts[1][0] == 2
    assert cell_note(counts) == "mean over the 2 runs of a cell"
    other, _ = phase_slice(recs, "train.lr", "task.train_size", index=1)  # s: the next set
    assert [r.params["train.steps"] for r in other] == [2000]
    xs, ys, grid, _ = phase_grid(other, "train.lr", "task.train_size", "acc")
    assert math.isclose(grid[0][0], 0.996)
    mine, _ = phase_slice(recs, "train.lr", "task.train_size", current=long[0].run_id)  # the current run's set
    assert mine == long
    # bookkeeping keys (the device, how often it evaluates) split nothing
    assert phase_slice(short, "train.lr", "task.train_size") == (short, "")


def test_groups_split_runs_that_differ_in_other_keys_and_say_so(tmp_path):
    from sparse_tui.tui.render.groups import group_runs
    from sparse_tui.tui.render.table import RunTable

    recs = _store(tmp_path / "a", {**BLOG, "sweep": {"model.d_model": [32, 64]}}, lambda p: (0.5, 100.0))
    recs += _store(tmp_path / "b", {**BLOG, "train": {"steps": 3000, "device": "cpu"}, "sweep": {"model.d_model": [32]},
                                    "seeds": [0, 1, 2]}, lambda p: (0.9, 50.0))
    groups = group_runs(recs, ["model.d_model"])
    assert [(g.label, g.n) for g in groups] == [("d_model=32 steps=200", 2), ("d_model=32 steps=3000", 3),
                                                ("d_model=64 steps=200", 2)]
    assert [g.acc.mean for g in groups] == [0.5, 0.9, 0.5]
    table = RunTable()
    table.set_store(recs, {}, 0.0, {})
    table.group_keys = ["model.d_model"]
    table.items()
    assert table.chart_groups() == ["model.d_model", "train.steps"]  # the charts' bands split alike
    # at 20 columns the rows are told apart by every value, with their counts (was: '▸ d_model=32 …' twice, no
    # count; then '▸ d_model=32 …+1' twice, told apart only by n): the keys give way, never a value
    names = [table._name_cell(type("R", (), {"run_id": k})(), "group", 20) for k in table.groups]
    assert names == ["▸ d…=32 s…=200 n=2", "▸ d…=32 s…=3000 n=3", "▸ d…=64 s…=200 n=2"], names


def test_fit_guess_never_proposes_training_length_and_prefers_theory(tmp_path):
    from sparse_tui.tui.selection import guess_fit_variables

    recs = _store(tmp_path / "a", {**BLOG, "sweep": {"model.d_model": [16, 32, 64]}, "seeds": [0]},
                  lambda p: (0.5, 100.0))
    recs += _store(tmp_path / "b", {**BLOG, "train": {"steps": 3000, "device": "cpu"}, "seeds": [0],
                                    "sweep": {"model.d_model": [16]}}, lambda p: (0.9, 50.0))
    ids = [r.run_id for r in recs]
    chosen, note = guess_fit_variables(recs, ids, None, "")
    assert chosen == ["d_model"]  # was: d_model steps
    assert "left out steps (training length" in note and "no swept key has a theory exponent" in note
    recs2 = _store(tmp_path / "c", {**BLOG, "sweep": {"model.d_model": [16, 32], "task.n_tokens": [8, 16]}},
                   lambda p: (0.5, 100.0))
    chosen, note = guess_fit_variables(recs2, [r.run_id for r in recs2], None, "")
    assert chosen == ["n_tokens"] and "with a theory exponent" in note and "d_model (no theory exponent)" in note
