"""Issue 43, 'bands inside the data': a band over runs never leaves the data's range, on screen (the Curves panel's
plotted arrays) and in the figures (matplotlib's plotted arrays): accuracy in [0, 1], a loss band positive (log
space: geometric mean × / ÷ geometric std), and runs without a plateau counted in n."""

from __future__ import annotations

import math

import pytest

from sparse_tui.base.plotting import band, band_scale

# three seeds near the ceiling (accuracy) and a loss that spans decades: mean ± std leaves both ranges
ACC = [([0, 100, 200], [0.1, 0.99, 1.0]), ([0, 100, 200], [0.1, 0.5, 1.0]), ([0, 100, 200], [0.1, 0.98, 0.97])]
LOSS = [([0, 100, 200], [1.0, 1e-1, 1e-4]), ([0, 100, 200], [1.0, 1e-3, 1e-1]), ([0, 100, 200], [1.1, 2e-3, 1e-4])]


def test_linear_mean_std_leaves_the_range_the_band_does_not():
    from sparse_tui.base.plotting import mean_band

    _, m, sd, _ = mean_band(ACC)
    assert max(a + b for a, b in zip(m, sd)) > 1.0  # the old band: above 1
    _, m, sd, _ = mean_band(LOSS)
    assert min(a - b for a, b in zip(m, sd)) < 0  # the old band: below 0 (a log axis drops it)
    xs, centre, lo, hi, n = band(ACC, "test/acc")
    assert n == [3, 3, 3] and max(hi) == 1.0 and min(lo) >= 0.0 and all(a <= c <= b for a, c, b in zip(lo, centre, hi))
    xs, centre, lo, hi, n = band(LOSS, "test/loss")
    assert min(lo) > 0 and all(a < c < b or a == c == b for a, c, b in zip(lo, centre, hi))
    assert centre[2] == pytest.approx((1e-4 * 1e-1 * 1e-4) ** (1 / 3))  # the geometric mean
    logs = [math.log(v) for v in (1e-4, 1e-1, 1e-4)]
    mu = sum(logs) / 3
    gsd = math.exp(math.sqrt(sum((v - mu) ** 2 for v in logs) / 2))
    assert lo[2] == pytest.approx(centre[2] / gsd) and hi[2] == pytest.approx(centre[2] * gsd)
    assert band_scale("train/loss")[0] == "log" and band_scale("toy/w") == ("linear", (None, None))


def _data(groups: dict[int, list]):
    from sparse_tui.tui.messages import CurvesData

    series, params, plateau = {}, {}, {}
    for d, runs in groups.items():
        for i, (acc, loss, ps) in enumerate(runs):
            rid = f"r{d}-{i}"
            series[rid] = {"test/acc": acc, "test/loss": loss}
            params[rid] = {"task.d": d, "seed": i}
            plateau[rid] = ps
    return CurvesData(list(series), series, plateau, {r: r for r in series}, params)


def test_curves_panel_bands_stay_inside_the_data_and_count_censored_runs():
    from sparse_tui.tui.widgets.curves import curves_spec

    data = _data({4: [(a, lo, p) for a, lo, p in zip(ACC, LOSS, (120.0, None, 90.0))],
                  16: [(a, lo, 50.0) for a, lo in zip(ACC, LOSS)]})
    acc = curves_spec(data, "accuracy", group_keys=["task.d"])
    bands = [s for s in acc.series if s.kind == "band"]
    assert len(bands) == 2 and all(0.0 <= v <= 1.0 for s in bands for v in (*s.ys, *s.ys2))
    loss = curves_spec(data, "loss", group_keys=["task.d"])
    bands = [s for s in loss.series if s.kind == "band"]
    assert len(bands) == 2 and all(v > 0 for s in bands for v in s.ys)
    labels = [s.label for s in loss.series if s.label]
    assert any("(n=3, 1 no plateau)" in lab for lab in labels) and any(lab.endswith("(n=3)") for lab in labels)


def test_the_figures_bands_stay_inside_the_data_and_say_censored_runs(tmp_path):
    """`show --plot --mean-by` (the console's p): the plotted arrays of the accuracy band stay in [0, 1] (was: up to
    1.2, the axis to 1.2), the loss band's lower edge stays positive (was: dropped where mean − std ≤ 0, down to
    1e-4), and a group with a run that never left the plateau says so in its n and marks it."""
    pytest.importorskip("matplotlib")
    from pathlib import Path

    from matplotlib.collections import PolyCollection

    from sparse_tui.presets.loading import expand, validate_preset_data
    from sparse_tui.reports.curves import curves_figure
    from sparse_tui.store import RunStore

    raw = {"name": "b", "task": {"kind": "recall", "n_tokens": 8, "n_pairs": 2}, "seeds": [0, 1, 2],
           "model": {"kind": "transformer", "n_layers": 1, "d_model": 8}, "train": {"steps": 200, "device": "cpu"},
           "sweep": {"model.d_model": [8, 16]}}
    store = RunStore(tmp_path / "runs")
    _, ids = store.create_runs(expand(validate_preset_data(raw, "b.toml", path=Path("b.toml"))))
    for i, rid in enumerate(ids):
        acc, loss = ACC[i % 3], LOSS[i % 3]
        store.log_metrics_many(rid, acc[0], {"test/acc": acc[1], "test/loss": loss[1]})
        store.finish(rid, "finished", plateau_step=None if i == 1 else 100.0, step=200)
    fig = curves_figure.__wrapped__(store, ids, groups=["model.d_model"])  # the Figure the writer saves
    axes = {ax.get_ylabel(): ax for ax in fig.axes}
    for metric, ok in (("test/acc", lambda v: 0.0 <= v <= 1.0), ("test/loss", lambda v: v > 0)):
        polys = [c for c in axes[metric].collections if isinstance(c, PolyCollection)]
        assert len(polys) == 2
        ys = [y for p in polys for path in p.get_paths() for _, y in path.vertices]
        assert ys and all(ok(y) for y in ys), (metric, min(ys), max(ys))
    assert axes["test/acc"].get_ylim()[1] <= 1.1
    texts = [t.get_text() for ax in fig.axes for leg in [ax.get_legend()] if leg for t in leg.get_texts()]
    texts += [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert any("(n=3, 1 censored)" in t for t in texts) and any("censored" in t and "no plateau" in t for t in texts)
    store.close()
