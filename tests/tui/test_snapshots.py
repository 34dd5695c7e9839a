"""Snapshot tests of every panel at 80x24 and 120x40, and of the views of issue 21 (the grouped run table, the curve
grid, compare) at 80x24 and 200x50, on a deterministic store (fixed ids, times and clock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import fill_store, fill_sweep, make, tiny_text

SIZES = [(80, 24), (120, 40)]


# The bundled presets the snapshots show: one of each group (catalog.GROUPS), not presets/ itself, so that a preset
# added to or renamed in presets/ changes no snapshot.
BUNDLED = ("smoke", "paper_fig1c_theory", "paper_fig11_cpu", "paper_fig11", "blog_n80")


@pytest.fixture(scope="module")
def snap_dirs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("snap")
    fill_store(root / "runs").close()
    (root / "presets").mkdir()
    (root / "presets" / "tiny.toml").write_text(tiny_text(), encoding="utf-8")
    (root / "bundled").mkdir()
    for name in BUNDLED:
        (root / "bundled" / f"{name}.toml").write_text(tiny_text().replace('name = "tiny"', f'name = "{name}"'))
    return root / "runs", root / "presets"


@pytest.fixture(autouse=True)
def _bundled(snap_dirs, monkeypatch):
    monkeypatch.setattr("sparse_tui.presets.catalog.bundled_dir", lambda: (snap_dirs[1].parent / "bundled").resolve())


async def _ready(pilot) -> None:
    app = pilot.app
    for _ in range(300):
        if (app.query("RunsPanel") and app.query_one("RunsPanel").rows and app.query("FieldRow")
                and app.held_keys is None):  # (the console takes keys: the header no longer says 'starting')
            break
        await pilot.pause(0.05)


def _until(cond):
    async def wait(pilot):
        for _ in range(300):
            if cond(pilot.app):
                return
            await pilot.pause(0.05)
        raise AssertionError("snapshot data never arrived")

    return wait


def _steps(*actions):
    async def run_before(pilot):
        await _ready(pilot)
        for a in actions:
            if callable(a):
                await a(pilot)
            else:
                await pilot.press(a)
                await pilot.pause(0.1)
        await pilot.pause(0.3)

    return run_before


def _curves_ready(app):
    panel = app.query_one("CurvesPanel")
    d = panel.data
    return d is not None and d.run_ids and all(r in d.series and r in panel.theory_curves for r in d.run_ids)


PANELS = {
    "presets": _steps(),
    "presets_invalid": _steps(lambda p: _type(p, "f-train--lr", "-1"),
                              _until(lambda a: a.query_one("PresetsPanel").errors)),
    "runs": _steps("2"),
    "curves": _steps("2", "down", "enter", _until(_curves_ready)),
    "curves_overlay": _steps("2", "down", "down", "space", "space", "space", "v", _until(_curves_ready)),
    "attention": _steps("2", "down", "t", _until(lambda a: a.query_one("AttentionPanel").steps)),
    "fit": _steps("2", "down", "down", "5", "enter", _until(lambda a: a.query_one("FitPanel").result is not None)),
    "phase": _steps("6", "slash", *"toy", "enter"),
}
# issue 21's views: the toy sweep grouped by task.d (3 groups of 3), the first group expanded; its curve grid; two
# groups compared
_GROUPED = ("2", "slash", *"toy-sweep", "enter", "g", "g", "home")
VIEWS = {
    "runs_grouped": _steps(*_GROUPED, "enter"),
    "curve_grid": _steps(*_GROUPED, "3", "g",
                         _until(lambda a: _curves_ready(a) and len(a.query_one("CurvesPanel").data.run_ids) == 9)),
    "compare_groups": _steps(*_GROUPED, "x", _until(lambda a: type(a.screen).__name__ == "CompareScreen")),
}


async def _type(pilot, wid: str, text: str) -> None:
    w = pilot.app.query_one(f"#{wid}")
    if hasattr(w, "cursor_blink"):
        w.cursor_blink = False  # a blinking cursor makes the snapshot depend on timing
    w.focus()
    await pilot.pause()
    await pilot.press("end", *["backspace"] * 8, *text)
    await pilot.pause(0.3)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("panel", list(PANELS))
def test_panel_snapshot(snap_compare, snap_dirs, panel, size):
    runs, presets = snap_dirs
    app = make(runs, presets)
    assert snap_compare(app, terminal_size=size, run_before=PANELS[panel])


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("view", list(VIEWS))
def test_view_snapshot(snap_compare, snap_dirs, view, size):
    runs, presets = snap_dirs
    app = make(runs, presets)
    assert snap_compare(app, terminal_size=size, run_before=VIEWS[view])


@pytest.fixture(scope="module")
def sweep_dirs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("sweep")
    fill_sweep(root / "runs").close()
    (root / "presets").mkdir()
    (root / "presets" / "tiny.toml").write_text(tiny_text(), encoding="utf-8")
    return root / "runs", root / "presets"


# issue 34: a 20-run sweep (paper_fig1c_theory, d x T) at 80 columns: each name keeps its swept values whole
# (d=128 T=64, the preset and seed=0 that every run shares left out), in the table and grouped (g: by d and T)
SWEEP_VIEWS = {
    "sweep_names": _steps("2"),
    "sweep_grouped": _steps("2", "g"),
    # the column picker (o) says what fits and what makes room for the picked columns
    "sweep_picker": _steps("2", "o", "space", "down", "space"),
}


@pytest.mark.parametrize("view", list(SWEEP_VIEWS))
def test_sweep_snapshot(snap_compare, sweep_dirs, view):
    runs, presets = sweep_dirs
    assert snap_compare(make(runs, presets), terminal_size=(80, 24), run_before=SWEEP_VIEWS[view])


# issue 34: a 20-run overlay at 80x24 (one legend line, the chart most of the panel), the mean ± std per group of
# seeds (3 values of d x 3 seeds, grouped in Runs), and the grid of the 20 runs sized to the terminal
@pytest.fixture(scope="module")
def chart_dirs(tmp_path_factory) -> dict[str, Path]:
    from .conftest import fill_linreg_sweep

    root = tmp_path_factory.mktemp("sweep")
    fill_linreg_sweep(root / "sweep20").close()
    fill_linreg_sweep(root / "seeds", key="task.d", values=(4, 16, 64), seeds=(0, 1, 2)).close()
    (root / "presets").mkdir()
    return {"sweep20": root / "sweep20", "seeds": root / "seeds", "presets": root / "presets"}


def _n_curves(n):
    return _until(lambda a: _curves_ready(a) and len(a.query_one("CurvesPanel").data.run_ids) == n)


async def _no_toasts(pilot):
    """Clear the notifications (here: 'a' saying what it marked): a toast's life is a timer, not part of the view."""
    pilot.app.clear_notifications()
    await pilot.pause(0.1)


CHART_VIEWS = {
    "overlay20": ("sweep20", _steps("2", "a", "v", _n_curves(20), _no_toasts)),
    "grid20": ("sweep20", _steps("3", "g", _n_curves(20))),
    "band": ("seeds", _steps("2", "g", "3", _n_curves(9))),
    "band_grid": ("seeds", _steps("2", "g", "3", "g", _n_curves(9))),
    "scatter": ("sweep20", _steps("7", _until(lambda a: a.query_one("ScatterPanel").data is not None
                                              and len(a.query_one("ScatterPanel").data.points) == 20))),
}


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("view", list(CHART_VIEWS))
def test_chart_snapshot(snap_compare, chart_dirs, view, size):
    store, steps = CHART_VIEWS[view]
    app = make(chart_dirs[store], chart_dirs["presets"])
    assert snap_compare(app, terminal_size=size, run_before=steps)
