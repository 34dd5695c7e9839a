"""Issue 43, 'charts a researcher reads': a log step axis (x; chosen when the plateaus span a decade), zoom at the
run under the cursor's plateau, Home to reset, y zoom and pan in full screen, tiles (one chart per metric), a legend
in the order of the values on one line when one colour key explains the runs, the theory curve only on runs it
describes (not on ODE runs, which are the theory), and the snapshots the issue asks for at 80x24."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from .conftest import BASE_TIME, _specs, make, opened, pin_times, run_async, tiny_text, wait_for

D, T = (16, 32, 64, 128, 256), (256, 512, 1024, 2048)


def fill_fig1c(runs_dir: Path):
    """fig1c's 20 ODE runs (d × T, plateau ≈ √d·T / 4: 256 to 16k) with fixed ids and times."""
    import sparse_tui.store.claims as store_mod
    from sparse_tui.store import RunStore

    counter = itertools.count(1)
    orig = store_mod.new_id
    store_mod.new_id = lambda nbytes=4: f"{next(counter):0{2 * nbytes}x}"
    try:
        store = RunStore(runs_dir)
        raw = {"name": "paper_fig1c_theory", "seeds": [0], "task": {"kind": "linreg", "d": 16, "T": 256},
               "model": {"kind": "ode"}, "train": {"optimizer": "sgd", "lr": 1.0, "steps": 20000, "device": "cpu"},
               "eval": {"every": 100}, "sweep": {"task.d": list(D), "task.T": list(T)}}
        _, ids = store.create_runs(_specs(raw))
        steps = [0] + [round(10 ** (1 + 0.05 * i)) for i in range(67)]  # 10 .. 20k, even in log
        for i, rid in enumerate(ids):
            r = store.get(rid)
            plateau = math.sqrt(r.params["task.d"]) * r.params["task.T"] / 4
            loss = [0.5 / (1 + math.exp(min(50.0, (s - plateau) / (0.15 * plateau)))) + 1e-3 for s in steps]
            store.log_metrics_many(rid, steps, {"test/loss": loss}, [BASE_TIME + i + 60 * s / 20000 for s in steps])
            store.finish(rid, "finished", plateau_step=plateau, step=steps[-1],
                         summary={"final": {"test/loss": loss[-1]}})
            pin_times(store.con, rid, BASE_TIME + i, 60)
        store.con.commit()
        return store
    finally:
        store_mod.new_id = orig


@pytest.fixture(scope="module")
def fig1c_dirs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("fig1c")
    fill_fig1c(root / "runs").close()
    (root / "presets").mkdir()
    (root / "presets" / "tiny.toml").write_text(tiny_text(), encoding="utf-8")
    return root / "runs", root / "presets"


def _ready(app, n):
    panel = app.query_one("CurvesPanel")
    d = panel.data
    return d is not None and len(d.run_ids) == n and all(r in panel.theory_curves for r in d.run_ids)


def test_log_x_is_chosen_when_plateaus_span_a_decade_and_the_legend_is_one_line_in_order(fig1c_dirs):
    from sparse_tui.store import RunStore
    from sparse_tui.tui.messages import CurvesData
    from sparse_tui.tui.plot import legend
    from sparse_tui.tui.widgets.curves import curves_spec

    store = RunStore(fig1c_dirs[0], create=False)
    recs = store.runs()
    series = {r.run_id: {k: tuple(v) for k, v in store.metrics(r.run_id, ["test/loss"]).items()} for r in recs}
    data = CurvesData([r.run_id for r in reversed(recs)], series, {r.run_id: r.plateau_step for r in recs},
                      {r.run_id: r.label for r in recs}, {r.run_id: r.params for r in recs})
    ode = {r.run_id: ([0.0, 100.0], [0.5, 0.4]) for r in recs}  # a theory curve offered for each ODE run
    spec = curves_spec(data, "loss", curves=ode)
    assert spec.log_x  # plateaus 256 .. 16k: a log step axis (was linear, the runs squeezed at its left)
    assert not any(s.label == "theory (ODE)" for s in spec.series)  # ODE runs are the theory: no twin drawn
    assert spec.legend_head == "20 runs · colour = d (T also varies):"  # the key of most values colours
    assert len(legend(spec, 78).plain.splitlines()) == 1  # one line at 80 columns (was 4, ending '+3 more')
    few = curves_spec(data, "loss", run_ids=[r.run_id for r in recs if r.params["task.d"] == 16])
    assert [s.label for s in few.series if s.label and s.kind != "points"] == [f"T={t}" for t in T]  # in order
    assert not curves_spec(data, "loss", log_x=False).log_x  # x: the user's choice wins
    store.close()


@run_async
async def test_x_toggles_log_z_zooms_at_the_cursors_plateau_home_resets(fig1c_dirs, console_errors):
    runs, presets = fig1c_dirs
    async with opened(runs, presets, size=(120, 40)) as (app, pilot, _):
        await pilot.press("2", "down")  # the run under the cursor
        await pilot.press("a", "3")  # all 20 marked, Curves
        panel = app.query_one("CurvesPanel")
        await wait_for(pilot, lambda: _ready(app, 20), 30)
        assert panel.shows_log_x() and "log x" in panel.border_title
        cur = app.main.current
        ps = panel.data.plateau[cur]
        await pilot.press("z")
        await pilot.pause(0.2)
        lo, hi = panel.chart_spec(100, zoom=0.5, center=panel.center).xlim
        assert lo < ps < hi and panel.center != 0.5  # at the cursor's run's plateau, not the middle
        await pilot.press("home")
        await pilot.pause(0.2)
        assert panel.zoom == 0 and panel.center == 0.5
        await pilot.press("x")
        await pilot.pause(0.2)
        assert panel.log_x is False and "log x" not in panel.border_title
        await pilot.press("f")  # full screen: y zoom and pan, Home resets both
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ChartScreen", 10)
        screen = app.screen
        await pilot.press("y", "y", "k")
        await pilot.pause(0.2)
        assert screen.y_zoom == 2 and screen.y_center > 0.5 and screen._y_window() is not None
        await pilot.press("n", "z")  # focus a run: z zooms at its plateau
        await pilot.pause(0.2)
        assert screen.center != 0.5
        await pilot.press("home")
        await pilot.pause(0.2)
        assert (screen.zoom, screen.y_zoom, screen.center, screen.y_center) == (0, 0, 0.5, 0.5)
    assert console_errors == []


@run_async
async def test_tiles_draw_one_chart_per_metric(runs_dir: Path, presets_dir: Path, console_errors):
    from .conftest import fill_store

    fill_store(runs_dir).close()
    async with opened(runs_dir, presets_dir, size=(80, 24)) as (app, pilot, _):
        await pilot.press("2", "down", "enter")
        panel = app.query_one("CurvesPanel")
        await wait_for(pilot, lambda: panel.data is not None and panel.data.run_ids, 20)
        await pilot.press("t")
        await pilot.pause(0.3)
        assert panel.tiles and "tiles of" in panel.border_title
        from sparse_tui.tui.widgets.curves import available_groups
        n = len(available_groups(panel.data))
        assert n >= 2 and f"tiles of {n}" in panel.border_title
        await pilot.press("g")  # the grid replaces the tiles
        await pilot.pause(0.2)
        assert panel.grid and not panel.tiles
    assert console_errors == []


# -- the snapshots the issue asks for, at 80x24 ---------------------------------------------------------------------

async def _until(pilot, cond):
    for _ in range(300):
        if cond(pilot.app):
            return
        await pilot.pause(0.05)
    raise AssertionError("snapshot data never arrived")


def test_snapshot_log_x_overlay_of_20_fig1c_runs(snap_compare, fig1c_dirs):
    async def run_before(pilot):
        await _until(pilot, lambda a: a.query("RunsPanel") and a.query_one("RunsPanel").rows and a.held_keys is None)
        await pilot.press("2", "a", "v")
        await _until(pilot, lambda a: _ready(a, 20))
        pilot.app.clear_notifications()
        await pilot.pause(0.3)

    assert snap_compare(make(*fig1c_dirs), terminal_size=(80, 24), run_before=run_before)


def test_snapshot_tiles(snap_compare, tmp_path):
    from .conftest import fill_store

    fill_store(tmp_path / "runs").close()
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "tiny.toml").write_text(tiny_text(), encoding="utf-8")

    async def run_before(pilot):
        await _until(pilot, lambda a: a.query("RunsPanel") and a.query_one("RunsPanel").rows and a.held_keys is None)
        await pilot.press("2", "down", "enter")
        await _until(pilot, lambda a: a.query_one("CurvesPanel").data is not None
                     and a.query_one("CurvesPanel").data.run_ids
                     and all(r in a.query_one("CurvesPanel").theory_curves
                             for r in a.query_one("CurvesPanel").data.run_ids))
        await pilot.press("t")
        await pilot.pause(0.3)

    assert snap_compare(make(tmp_path / "runs", tmp_path / "presets"), terminal_size=(80, 24), run_before=run_before)


def test_snapshot_quit_question(snap_compare, tmp_path):
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "tiny.toml").write_text(tiny_text(), encoding="utf-8")

    async def run_before(pilot):
        await _until(pilot, lambda a: a.query("FieldRow") and a.held_keys is None)
        w = pilot.app.query_one("#f-train--lr")
        w.focus()
        await pilot.pause()
        await pilot.press("end", *["backspace"] * 8, *"3e-2")
        await _until(pilot, lambda a: a.query_one("PresetsPanel").draft.dirty)
        await pilot.press("escape", "escape", "q")
        await _until(pilot, lambda a: type(a.screen).__name__ == "UnsavedScreen")
        await pilot.pause(0.3)

    assert snap_compare(make(tmp_path / "runs", tmp_path / "presets"), terminal_size=(80, 24), run_before=run_before)


def test_a_zoomed_log_axis_still_draws_its_data():
    """plotext takes a log axis's limits as log10 values: a zoom (or a y pan) on a log axis drew an empty box."""
    from sparse_tui.tui.plot import PlotSpec, Series, draw

    xs = [10 * 1.2 ** i for i in range(60)]
    ys = [1.0 / (1 + x / 100) for x in xs]
    for spec in (PlotSpec([Series(xs, ys, label="a")], log_x=True, xlim=(500.0, 20000.0)),
                 PlotSpec([Series(xs, ys, label="a")], log_x=True, log_y=True, ylim=(0.01, 0.1))):
        body = draw(spec, 60, 14).plain
        assert sum(ch in body for ch in "⠁⠂⠄⡀⠈⠐⠠⢀⠉⠒⠤⣀⠑⠢⢄⡠") >= 3, body  # braille: the curve is there
