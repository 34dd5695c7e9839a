"""``tui.plot.draw``: a fresh plotext figure per draw, so nothing depends on what was drawn before, and no spec or
size makes it raise (random specs with NaN, inf, zeros and negatives on log axes, one point, equal x, empty, tiny
and large areas)."""

from __future__ import annotations

import math
import random

from sparse_tui.tui.plot import PlotSpec, Series, clean, draw, ema, integer_ticks


def test_redraw_is_identical_and_log_is_taken_once():
    spec = PlotSpec([Series([0, 100, 200, 300], [2.0, 1.0, 0.1, 0.01], label="loss")], log_y=True,
                    integer_x=True, xlabel="step")
    a = draw(spec, 60, 16).plain
    b = draw(spec, 60, 16).plain  # plotext would take the log of the logs here
    assert a == b
    draw(spec, 120, 40)
    assert draw(spec, 60, 16).plain == a  # a resize and back draws the same
    assert "loss" in a.splitlines()[-1]  # the legend line


def test_integer_step_ticks():
    t = integer_ticks(0, 1188, 60)
    assert all(isinstance(x, int) for x in t) and t[0] == 0 and t[-1] <= 1188 and len(t) >= 3
    spec = PlotSpec([Series([0, 400, 800, 1188], [1, 2, 3, 4])], integer_x=True)
    assert "118.8" not in draw(spec, 60, 12).plain


def test_accuracy_axis_is_fixed_and_legend_below():
    spec = PlotSpec([Series([0, 10, 20], [0.055, 0.2, 0.215], label="test/acc")], ylim=(0.0, 1.0))
    text = draw(spec, 60, 14).plain
    lines = text.splitlines()
    assert any(line.strip().startswith("1") for line in lines) and any(line.strip().startswith("0") for line in lines)
    assert "test/acc" in lines[-1] and all("test/acc" not in line for line in lines[:-1])


def test_log_axis_drops_what_it_cannot_show():
    assert clean([0, 1, 2, 3], [0.0, -1.0, math.nan, 2.0], log_y=True) == ([3.0], [2.0])
    assert "no data" in draw(PlotSpec([Series([0, 1], [0.0, -2.0])], log_y=True), 60, 12).plain
    assert "too small" in draw(PlotSpec([Series([0, 1], [1, 2])]), 30, 3).plain


def test_ema():
    assert ema([1.0, 1.0, 1.0], 0.9) == [1.0, 1.0, 1.0]  # debiased: a constant stays constant
    s = ema([0.0, 10.0, 0.0, 10.0], 0.5)
    assert s[0] == 0.0 and 0 < s[1] < 10 and math.isnan(ema([math.nan], 0.5)[0])
    assert ema([3.0, 4.0], 0.0) == [3.0, 4.0]


def test_random_specs_never_raise():
    rng = random.Random(0)
    odd = [0.0, -1.0, 1e-300, 1e300, math.nan, math.inf, -math.inf, 1.0, 1e-5]
    for _ in range(300):
        series = []
        for _ in range(rng.randint(0, 3)):
            n = rng.choice([0, 1, 2, 3, 10, 200])
            same_x = rng.random() < 0.2
            xs = [0.0 if same_x else (rng.random() * 1000 if rng.random() < 0.5 else float(k)) for k in range(n)]
            ys = [rng.choice(odd) if rng.random() < 0.2 else rng.random() * rng.choice([1, 1e-6, 1e6])
                  for _ in range(n)]
            series.append(Series(xs, ys, label=rng.choice(["", "a", "loss" * 10]),
                                 kind=rng.choice(["line", "points", "band"]),
                                 ys2=[y + rng.choice([0.0, 1.0, -1.0, math.nan]) for y in ys]))
        spec = PlotSpec(series, vlines=[(rng.choice([0, 50, math.nan, -5]), "red")] if rng.random() < 0.5 else [],
                        title=rng.choice(["", "t"]), log_x=rng.random() < 0.3, log_y=rng.random() < 0.5,
                        xlim=rng.choice([None, (0, 100), (5, 5), (10, 1)]), ylim=rng.choice([None, (0, 1)]),
                        integer_x=rng.random() < 0.5)
        draw(spec, rng.randint(0, 200), rng.randint(0, 60))
