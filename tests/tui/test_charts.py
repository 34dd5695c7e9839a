"""Issue 34's charts: a 20-run overlay that leaves the chart most of the panel at 80x24 (a compact legend, one
entry for the runs' theory twins), mean ± std bands per group of seeds, a grid sized to the terminal, and charts
that survive redraws, resizes and panel switches."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sparse_tui.base.plotting import mean_band
from sparse_tui.tui.plot import PlotSpec, Series, draw, draw_grid, grid_shape, legend

from .conftest import fill_linreg_sweep, opened, run_async, wait_for


def test_mean_band_interpolates_each_run_and_never_extrapolates():
    xs, mean, sd, n = mean_band([([0, 10, 20], [1.0, 2.0, 3.0]), ([0, 20], [3.0, 5.0]), ([0, 10], [2.0, math.nan])])
    assert xs == [0.0, 10.0, 20.0] and n == [3, 2, 2]  # the third run has no finite value past step 0
    assert mean == pytest.approx([2.0, 3.0, 4.0])  # run 2 at step 10: 4.0 (halfway)
    assert sd == pytest.approx([1.0, math.sqrt(2), math.sqrt(2)])  # sample std
    assert mean_band([([0, 1], [5.0, 6.0])])[2] == [0.0, 0.0]


def test_legend_is_one_entry_per_label_and_capped():
    runs = [Series([0, 1], [1.0, 0.5], label=f"d={d} T={t}", color=c)
            for c, (d, t) in enumerate((d, t) for d in range(5) for t in range(4))]
    odes = [Series([0, 1], [1.0, 0.4], label="theory (ODE)", color="gray") for _ in runs]
    spec = PlotSpec(odes + runs, vlines=[(0.5, "red")] * 20)
    text = legend(spec, 80, 2).plain
    assert len(text.splitlines()) == 2 and text.count("theory (ODE)") <= 1 and text.count("plateau step") <= 1
    assert "more" in text.splitlines()[-1]  # what did not fit is counted
    assert "theory (ODE)" in text and "plateau step" in text  # the runs give way, the reference entries stay
    full = legend(spec, 80).plain
    assert full.count("theory (ODE)") == 1 and full.count("plateau step") == 1
    assert full.index("d=4 T=3") < full.index("theory (ODE)")  # grey reference lines last
    # drawn: the legend takes at most a quarter of the height
    out = draw(spec, 80, 12).plain.splitlines()
    assert len(out) == 12 and "more" in out[-1] and "━" in out[-3] and "━" not in out[-4]


def test_band_is_shaded_between_its_edges_on_a_log_axis():
    xs = list(range(0, 100, 5))
    mean = [1.0 / (1 + x) for x in xs]
    spec = PlotSpec([Series(xs, [m / 3 for m in mean], ys2=[m * 3 for m in mean], kind="band", color="cyan"),
                     Series(xs, mean, label="mean", color="cyan")], log_y=True)
    assert "░" in draw(spec, 60, 20).plain
    spec.series[0].ys = [m - 1 for m in mean]  # a lower edge <= 0 on a log axis: shaded down to the axis, no error
    assert "░" in draw(spec, 60, 20).plain


def test_grid_fits_several_charts_at_80x24_and_all_20_at_200x50():
    assert grid_shape(20, 78, 15)[0] * grid_shape(20, 78, 15)[1] >= 3
    c, r = grid_shape(20, 198, 42)
    assert c * r >= 20
    specs = [PlotSpec([Series([0, 100, 200], [1.0, 0.1, 0.01], label="test/loss")], title=f"T={t}", log_y=True,
                      integer_x=True, xlabel="step") for t in range(20)]
    out = draw_grid(specs, 198, 43).plain.splitlines()
    assert out[-1].startswith("━ test/loss")  # one legend under the grid, whole
    assert sum(line.count("T=") for line in out) == 20
    assert sum(line.count("200") for line in out) >= 20  # every chart keeps its x tick labels


def _chart_rows(app) -> tuple[int, int, str]:
    panel = app.query_one("CurvesPanel")
    plot = panel.query_one("PlotView")
    w, h = plot.size
    leg = legend(plot.spec, w, max(1, min(h // 4, h - 5))).plain
    return h - len(leg.splitlines()), panel.content_size.height, leg


@run_async
async def test_twenty_runs_overlaid_at_80x24_keep_the_chart(tmp_path: Path, presets_dir: Path, console_errors):
    fill_linreg_sweep(tmp_path / "sweep").close()
    async with opened(tmp_path / "sweep", presets_dir, size=(80, 24)) as (app, pilot, seen):
        await pilot.press("2", "a", "v")
        panel = app.query_one("CurvesPanel")
        await wait_for(pilot, lambda: panel.data is not None and len(panel.data.run_ids) == 20
                       and len(panel.theory_curves) == 20, 60)
        await pilot.pause(0.3)
        rows, height, leg = _chart_rows(app)
        assert rows >= height / 2, (rows, height, leg)
        assert leg.startswith("20 runs · colour = T:") and leg.count("theory (ODE)") == 1
        assert len(leg.splitlines()) == 1
        assert console_errors == []


@run_async
async def test_charts_survive_redraws_resizes_and_switches(tmp_path: Path, presets_dir: Path, console_errors):
    fill_linreg_sweep(tmp_path / "seeds", key="task.d", values=(4, 16, 64), seeds=(0, 1, 2)).close()
    async with opened(tmp_path / "seeds", presets_dir, size=(80, 24)) as (app, pilot, seen):
        await pilot.press("2", "g", "3")
        panel = app.query_one("CurvesPanel")
        await wait_for(pilot, lambda: panel.data is not None and len(panel.data.run_ids) == 9, 60)
        plot = panel.query_one("PlotView")
        for keys, size in ((("l",), (200, 50)), (("l", "b"), (60, 20)), (("g",), (80, 24)), (("z", "left"), (120, 40)),
                           (("2", "3", "b"), (40, 12)), (("g", "m", "6", "3"), (80, 24))):
            await pilot.press(*keys)
            await pilot.resize_terminal(*size)
            await pilot.pause(0.3)
            assert "plot error" not in plot.render().plain
        assert console_errors == []


def test_scatter_points_leave_out_and_count_what_has_no_value(tmp_path: Path):
    from sparse_tui.store import RunStore
    from sparse_tui.tui.widgets.scatter import PLATEAU, choices, scatter_data

    fill_linreg_sweep(tmp_path / "s", key="task.d", values=(4, 16, 64, 256), seeds=(0, 1)).close()
    store = RunStore(tmp_path / "s")
    recs = store.runs(reap=False)
    store.close()
    xs, ys = choices(recs)
    assert xs == ["task.d", "seed"] and ys[0] == PLATEAU and "test/loss" in ys
    d = scatter_data(recs, {}, "task.d", PLATEAU)
    assert len(d.points) + d.censored == 8 and d.log_x  # d spans 4 ... 256: a log axis
    by_d = {}
    for x, y, rid in d.points:
        by_d.setdefault(x, []).append(y)
        assert y == next(r.plateau_step for r in recs if r.run_id == rid)
    assert sorted(by_d) == [4.0, 16.0, 64.0, 256.0][: len(by_d)]
    recs[0].plateau_step = None  # never left the plateau: censored, counted
    assert scatter_data(recs, {}, "task.d", PLATEAU).censored == d.censored + 1
    lin = scatter_data(recs, {}, "task.d", "test/loss", log=(False, False))
    assert not lin.log_x and len(lin.points) == 8


@run_async
async def test_scatter_panel_and_full_screen_chart(tmp_path: Path, presets_dir: Path, console_errors):
    fill_linreg_sweep(tmp_path / "seeds", key="task.d", values=(4, 16, 64), seeds=(0, 1, 2)).close()
    async with opened(tmp_path / "seeds", presets_dir, size=(80, 24)) as (app, pilot, seen):
        await pilot.press("7")
        panel = app.query_one("ScatterPanel")
        await wait_for(pilot, lambda: panel.data is not None and len(panel.data.points) == 9, 20)
        assert panel.data.x == "task.d" and panel.data.y == "plateau step" and panel.data.log_x
        await pilot.press("y")
        await wait_for(pilot, lambda: panel.data.y == "test/loss", 10)
        await pilot.press("x")
        await wait_for(pilot, lambda: panel.data.x == "seed", 10)
        # the full-screen chart of the Curves panel: focus one group, time axis, zoom, back
        await pilot.press("2", "g", "3")
        curves = app.query_one("CurvesPanel")
        await wait_for(pilot, lambda: curves.data is not None and len(curves.data.run_ids) == 9, 60)
        await pilot.press("f")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ChartScreen", 10)
        chart = app.screen
        plot = chart.query_one("PlotView")
        await pilot.press("n")
        await pilot.pause(0.3)
        labelled = [s.label for s in plot.spec.series if s.label and s.kind == "line" and s.color != "gray"]
        assert labelled == ["d=4 (n=3)"] and "focus: d=4 (n=3)" in str(chart.query_one("#chart-info").content)
        await pilot.press("t", "z", "z", "right")
        await pilot.pause(0.3)
        assert plot.spec.xlabel == "minutes since start"  # the times the store logged (issue 43)
        lines = [s for s in plot.spec.series if s.kind == "line" and s.color != "gray"]
        assert max(max(s.xs) for s in lines) == pytest.approx(1.0)  # 60 s from start to end in the store
        assert plot.spec.xlim is not None and plot.spec.xlim[1] - plot.spec.xlim[0] == pytest.approx(0.25, rel=0.05)
        await pilot.resize_terminal(200, 50)
        await pilot.pause(0.3)
        assert "plot error" not in plot.render().plain
        await pilot.press("escape")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "MainScreen", 10)
        # w: the figure of the bands, to a file and size typed in the prompt
        pytest.importorskip("matplotlib")
        await pilot.press("w")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "PromptScreen", 10)
        app.screen.query_one("Input").value = "bands.svg 5x3"
        await pilot.press("enter")
        out = tmp_path / "seeds" / "figures" / "bands.svg"
        await wait_for(pilot, out.exists, 60)
        text = out.read_text()
        assert "d=4 (n=3)" in text and "mean ± std" in text
        assert console_errors == []


def test_figures_of_many_runs_groups_and_the_scatter(tmp_path: Path):
    """The multi-run figure a paper can use: 20 runs on one swept key get a colour bar (no 20-entry legend), a log
    step axis (their plateaus span a decade), one plateau marker per run and no dotted lines; groups of seeds get
    a mean line and a ± std band each, and the size asked for; the scatter figure has a point per run."""
    pytest.importorskip("matplotlib")
    from sparse_tui.reports.curves import curves_figure
    from sparse_tui.reports.figures import FigureError
    from sparse_tui.reports.panels import scatter_figure
    from sparse_tui.store import RunStore
    from sparse_tui.tui.widgets.scatter import PLATEAU, scatter_data

    fill_linreg_sweep(tmp_path / "a").close()
    store = RunStore(tmp_path / "a")
    recs = store.runs(reap=False)
    fig = curves_figure.__wrapped__(store, [r.run_id for r in recs])
    ax, bar = fig.axes
    assert ax.get_xscale() == "log" and bar.get_ylabel() == "T"
    assert len([ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]) == 20
    assert not [ln for ln in ax.get_lines() if ln.get_linestyle() == ":"]  # no dotted plateau lines
    markers = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
    assert len(markers) == sum(r.plateau_step is not None for r in recs)
    assert ax.get_legend() is not None and not fig.legends  # the legend inside the axes
    assert "plateau step" in [t.get_text() for t in ax.get_legend().get_texts()]
    out = scatter_figure(scatter_data(recs, {}, "task.T", PLATEAU), tmp_path / "scatter.svg")
    assert out.exists() and "plateau step" in out.read_text()
    store.close()

    fill_linreg_sweep(tmp_path / "b", key="task.d", values=(4, 16, 64), seeds=(0, 1, 2)).close()
    store = RunStore(tmp_path / "b")
    ids = [r.run_id for r in store.runs(reap=False)]
    fig = curves_figure.__wrapped__(store, ids, groups=["task.d"], size=(5.0, 3.0))
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:3] == ["d=4 (n=3)", "d=16 (n=3)", "d=64 (n=3)"] and len(ax.collections) >= 3  # bands
    assert tuple(fig.get_size_inches()) == (5.0, 3.0)
    with pytest.raises(FigureError, match="--mean-by task.q: no run has this key"):
        curves_figure.__wrapped__(store, ids, groups=["task.q"])
    store.close()


def test_charts_leave_out_the_runs_hidden_from_them():
    """The runs hidden in the charts (h in Runs, HiddenChanged) reaches the charts through the view: Curves
    reads no series of a hidden run, marked or in the grid."""
    from sparse_tui.tui.widgets.curves import CurvesPanel
    from sparse_tui.tui.widgets.panel import StoreView

    panel = CurvesPanel()
    view = StoreView([], {}, "a", ["a", "b", "c"], 0.0, ["a", "b", "c", "d"], [], frozenset({"b"}))
    assert panel.selection_changed(view) == ["a", "c"]
    panel.grid = True
    assert panel.selection_changed(StoreView([], {}, "a", [], 0.0, ["a", "b", "c", "d"], [],
                                             frozenset({"b", "d"}))) == ["a", "c"]


def test_figure_prompt_reads_a_file_and_a_size(tmp_path: Path):
    from sparse_tui.tui.actions import figure_target

    assert figure_target("curves.pdf 7x4", tmp_path) == (tmp_path / "curves.pdf", (7.0, 4.0))
    assert figure_target(f"{tmp_path}/a b.svg", tmp_path / "figures") == (tmp_path / "a b.svg", None)
    assert figure_target("   ", tmp_path) == (None, None)
    for bad, words in (("x.jpg", "must end in"), ("x.png 100x4", "between 0.5 and 40"),
                       (f"{tmp_path}/nope/x.png", "does not exist")):
        with pytest.raises(ValueError, match=words):
            figure_target(bad, tmp_path)
