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

    data = _data({4: [(a, l, p) for a, l, p in zip(ACC, LOSS, (120.0, None, 90.0))],
                  16: [(a, l, 50.0) for a, l in zip(ACC, LOSS)]})
    acc = curves_spec(data, "accuracy", group_keys=["task.d"])
    bands = [s for s in acc.series if s.kind == "band"]
    assert len(bands) == 2 and all(0.0 <= v <= 1.0 for s in bands for v in (*s.ys, *s.ys2))
    loss = curves_spec(data, "loss", group_keys=["task.d"])
    bands = [s for s in loss.series if s.kind == "band"]
    assert len(bands) == 2 and all(v > 0 for s in bands for v in s.ys)
    labels = [s.label for s in loss.series if s.label]
    assert any("(n=3, 1 no plateau)" in lab for lab in labels) and any(lab.endswith("(n=3)") for lab in labels)
