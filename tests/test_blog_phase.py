"""Blog 6's suggested phase diagram (N × lr): the swept axes of a set of runs, the report's grid of plateau step and
final accuracy (mean over seeds), and the entry's figure; one grid owner shared with the console's Phase panel."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparse_tui import atlas
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.reports import library
from sparse_tui.science.phase import phase_grid, sweep_axes
from sparse_tui.store import RunStore

ROOT = Path(__file__).resolve().parent.parent


def _planted(tmp_path: Path, seeds: str = "seeds=[0]") -> tuple[RunStore, list[str]]:
    """blog6_phase's runs, ended with a planted plateau step and accuracy: learns at N = 40 (faster at larger lr),
    at N = 80 only at the smallest lr, never at N = 16; two seeds differ by 100 steps."""
    specs = expand(load_preset(ROOT / "presets" / "blog6_phase.toml", [seeds]))
    store = RunStore(tmp_path / "runs")
    _, ids = store.create_runs(specs)
    for spec, rid in zip(specs, ids):
        N, lr = spec.config.model.d_model, spec.config.train.lr
        plateau = {40: 900 if lr == 1e-2 else 1800, 80: 1500 if lr == 1e-3 else None}.get(N)
        if plateau is not None:
            plateau += 100 * spec.config.seed
        acc = 0.9 if plateau is not None else 0.05
        store.finish(rid, "finished", plateau_step=plateau, step=2000,
                     summary={"final": {"test/acc": acc + 0.02 * spec.config.seed, "test/loss": 1.0}})
    return store, ids


def test_sweep_axes_are_the_presets_two_swept_keys(tmp_path: Path):
    store, ids = _planted(tmp_path)
    recs = [store.get(r) for r in ids]
    assert sweep_axes(recs) == ("model.d_model", "train.lr")
    one = [store.get(r) for r in store.create_runs(expand(load_preset(ROOT / "presets" / "blog3_geometry.toml")))[1]]
    with pytest.raises(ValueError, match=r"two parameters, these sweep \['model.d_model'\]"):
        sweep_axes(one)


def test_phase_report_tabulates_plateau_and_accuracy_over_N_and_lr(tmp_path: Path):
    store, ids = _planted(tmp_path, "seeds=[0, 1]")
    rep = library.report(store, atlas.ENTRIES["blog6_phase"], ids)
    assert rep.data.x == "model.d_model" and rep.data.y == "train.lr"
    cells = {(c["model.d_model"], c["train.lr"]): c for c in rep.data.cells}
    assert len(cells) == 6 and all(c["n"] == 2 for c in cells.values())
    assert cells[(16, 1e-2)]["plateau"] is None and cells[(16, 1e-2)]["acc"] == pytest.approx(0.06)
    assert cells[(80, 1e-3)]["plateau"] == pytest.approx(1550) and cells[(80, 1e-2)]["plateau"] is None
    assert cells[(40, 1e-2)]["plateau"] < cells[(40, 1e-3)]["plateau"]
    assert "mean over the 2 runs of a cell" in rep.text and "1550 / 0.910" in rep.text
    xs, ys, grid, _ = phase_grid([store.get(r) for r in ids], "model.d_model", "train.lr", "acc")
    assert xs == [16, 40, 80] and ys == [1e-3, 1e-2] and grid[0][2] == pytest.approx(0.91)


def test_phase_entry_figure_is_the_entrys_figure(tmp_path: Path):
    pytest.importorskip("matplotlib")
    from sparse_tui.reports.entries import blog6_phase

    store, ids = _planted(tmp_path)
    assert atlas.ENTRIES["blog6_phase"].plot_fn() is blog6_phase.phase_entry_figure
    png = blog6_phase.phase_entry_figure(store, ids, tmp_path / "phase.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
