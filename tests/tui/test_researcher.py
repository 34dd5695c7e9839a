"""Issue 21, the researcher's console: what was wrong or misleading (each test failed on the code before it) and the
new views (hyperparameter columns, groups over seeds, the curve grid, compare with numbers, figures, notes and
tags, live resources), driven by Pilot on the synthetic store."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from textual import events

from sparse_tui.store import RunStore
from sparse_tui.tui.widgets.run_table import RunsPanel

from .conftest import Seen, make, opened, run_async, tiny_text, wait_for

TOY = [f"{i:08x}" for i in range(2, 11)]  # toy-sweep: task.d in (4, 16, 64) x task.T in (8, 16, 32)
FINISHED, FAILED = "0000000c", "0000000d"  # recall-lr: lr 0.01 (finished), lr 0.001 (failed at step 140)


def _texts(app) -> list[str]:
    return [n.message for n in app._notifications]


async def _runs(pilot) -> RunsPanel:
    await pilot.press("2")
    await pilot.pause(0.2)
    return pilot.app.query_one(RunsPanel)


async def _cursor(pilot, key: str) -> None:
    panel = pilot.app.query_one(RunsPanel)
    panel.table.move_cursor(row=panel.shown.index(key), animate=False)
    await pilot.pause(0.1)


async def _filter(pilot, text: str) -> None:
    await pilot.press("slash", *text, "enter")
    await pilot.pause(0.3)


class Requests:
    """A message hook keeping the requests the panels post."""

    def __init__(self, *kinds) -> None:
        self.kinds, self.seen = kinds, []
        self.inner = Seen()

    def __call__(self, message) -> None:
        self.inner(message)
        if isinstance(message, self.kinds):
            self.seen.append(message)


# -- wrong ------------------------------------------------------------------------------------------------------


@run_async
async def test_keys_typed_in_a_burst_after_a_refused_launch_keep_their_order(runs_dir, presets_dir, console_errors):
    """lr -1, ctrl+l (refused), then Backspace Backspace 3e-3 arriving together (typed while the app was busy):
    the field ends 3e-3, not -13e (the field applied printable keys before the bubbled Backspaces)."""
    async with opened(runs_dir, presets_dir, size=(100, 32)) as (app, pilot, seen):
        await wait_for(pilot, lambda: app.query("#f-train--lr"))
        field = app.query_one("#f-train--lr")
        field.focus()
        await pilot.pause()
        await pilot.press("end", *["backspace"] * 8, "minus", "1")
        await pilot.pause(0.3)
        await pilot.press("ctrl+l")
        assert any("fix the invalid values first" in t for t in _texts(app))
        for key, char in [("backspace", None), ("backspace", None), ("3", "3"), ("e", "e"), ("minus", "-"),
                          ("3", "3")]:
            app.post_message(events.Key(key, char))  # a burst: no pause between the keys
        await pilot.pause(0.5)
        assert field.value == "3e-3"
    assert console_errors == []


@run_async
async def test_a_burst_after_slash_goes_into_the_filter(synthetic: Path, presets_dir: Path, console_errors):
    """/ then "toy-sweep" in one burst (found in the tmux walk on a loaded machine): every key lands in the filter,
    none in the table (o, g, e there would open dialogs or group the runs)."""
    async with opened(synthetic, presets_dir) as (app, pilot, seen):
        panel = await _runs(pilot)
        for key, char in [("slash", "/"), *[(c if c != "-" else "minus", c) for c in "toy-sweep"]]:
            app.post_message(events.Key(key, char))
        await pilot.pause(0.5)
        assert panel.query_one("#run-filter").value == "toy-sweep"
        assert panel.group_keys == [] and type(app.screen).__name__ == "MainScreen"
    assert console_errors == []


def test_a_lone_cpu_run_gets_the_idle_cores_not_torch_default():
    from sparse_tui.presets.loading import RunSpec
    from sparse_tui.presets.schema import RunConfig
    from sparse_tui.training import scheduler as sch

    raw = {"task": {"kind": "recall", "n_tokens": 8, "n_pairs": 2}, "model": {"kind": "transformer"},
           "train": {"device": "cpu", "steps": 10}}
    one = [RunSpec("p", "p.toml", RunConfig.model_validate(raw), {})]
    assert sch.plan(one, "auto", device="cpu", cores=2, idle=0).threads == 1  # busy machine: one thread
    assert sch.plan(one, "auto", device="cpu", cores=4, idle=3).threads == 3
    toy = {"task": {"kind": "linreg", "d": 4, "T": 8}, "model": {"kind": "toy"}, "train": {"device": "cpu"}}
    assert sch.plan([RunSpec("p", "p.toml", RunConfig.model_validate(toy), {})], "auto", device="cpu", cores=4,
                    idle=4).threads == 1


@run_async
async def test_marks_hidden_by_the_filter_do_not_count(synthetic: Path, presets_dir: Path, console_errors):
    from sparse_tui.tui.messages import ResumeRequested

    hook = Requests(ResumeRequested)
    app = make(synthetic, presets_dir)
    async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
        await wait_for(pilot, lambda: hook.inner.tables >= 1)
        panel = await _runs(pilot)
        for rid in TOY[:2]:
            await _cursor(pilot, rid)
            await pilot.press("space")
        assert panel.marked == TOY[:2]
        await _filter(pilot, "status:failed")
        assert panel.shown == [FAILED]
        assert "2 marked" not in str(panel.query_one("#runs-summary").render())
        assert "(2 hidden by the filter: not used)" in str(panel.query_one("#runs-summary").render())
        assert app.main.marked == []  # the app's marked runs (curves, fit, compare) are the visible ones
        # (asked before `u`: the resume reveals the resumed run, which clears a filter that hides it, and the marks
        # count again; asked after, the test raced the resume worker and failed when it won, on a loaded machine)
        await pilot.press("u")
        await wait_for(pilot, lambda: hook.seen, 5)
        assert hook.seen[-1].run_ids == [FAILED]
    assert console_errors == []


# -- misleading -------------------------------------------------------------------------------------------------


@run_async
async def test_delete_question_names_the_runs(synthetic: Path, presets_dir: Path, console_errors):
    async with opened(synthetic, presets_dir) as (app, pilot, seen):
        await _runs(pilot)
        await _cursor(pilot, FINISHED)
        await pilot.press("d")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", 5)
        q = app.screen.question
        assert "Delete this run" in q and f"{FINISHED} recall-lr lr=0.01 seed=0 (finished)" in q
        await pilot.press("n")
        await pilot.pause(0.2)
        assert RunStore(synthetic).get(FINISHED)
    assert console_errors == []


@run_async
async def test_ctrl_l_asks_before_it_launches(runs_dir: Path, presets_dir: Path, console_errors):
    (presets_dir / "tiny.toml").write_text(tiny_text(steps=16000), encoding="utf-8")
    async with opened(runs_dir, presets_dir) as (app, pilot, seen):
        await wait_for(pilot, lambda: app.query("#f-train--lr"))
        await pilot.press("ctrl+l")  # the preset shown at start-up, nothing opened by the user
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", 5)
        assert "Launch tiny: 1 run(s), 16,000 training steps in all, on this machine?" in app.screen.question
        await pilot.press("n")
        await pilot.pause(0.5)
        assert RunStore(runs_dir).runs() == []
    assert console_errors == []


@run_async
async def test_sorting_says_its_direction_sorts_numbers_by_value_and_by_a_clicked_header(
        synthetic: Path, presets_dir: Path, console_errors):
    from textual.widgets import DataTable
    from textual.widgets.data_table import ColumnKey

    async with opened(synthetic, presets_dir) as (app, pilot, seen):
        panel = await _runs(pilot)
        await _filter(pilot, "toy-sweep")
        summary = lambda: str(panel.query_one("#runs-summary").render())  # noqa: E731
        assert "sort age ↓ newest first" in summary()
        await pilot.press("s")  # name: natural order, d=4 before d=16 before d=64
        assert panel.sort == "name" and "↑ A→Z" in summary()
        names = [panel._records[k].label for k in panel.shown]
        assert names[0].startswith("d=4 T=8") and names[3].startswith("d=16 T=8") and names[-1] == "d=64 T=32 seed=0"
        while panel.sort != "acc":
            await pilot.press("s")
        assert panel.descending and "sort acc ↓ high→low" in summary()  # ↓ is high to low: the best first
        # a hyperparameter column, sorted by value when its header is clicked; a second click reverses
        assert "hp:task.T" in [k for k, _, _ in panel._cols]
        panel.table.post_message(DataTable.HeaderSelected(panel.table, ColumnKey("hp:task.T"), 0, "T"))
        await pilot.pause(0.3)
        ts = [panel._records[k].params["task.T"] for k in panel.shown]
        assert ts == sorted(ts) and panel.sort == "hp:task.T"
        panel.table.post_message(DataTable.HeaderSelected(panel.table, ColumnKey("hp:task.T"), 0, "T"))
        await pilot.pause(0.3)
        assert [panel._records[k].params["task.T"] for k in panel.shown] == sorted(ts, reverse=True)
    assert console_errors == []


def test_natural_and_value_order():
    from sparse_tui.tui.render.runs import natural, value_key

    assert sorted(["d_model=60", "d_model=8", "d_model=128"], key=natural) == ["d_model=8", "d_model=60",
                                                                               "d_model=128"]
    assert sorted([1e-2, 3e-4, "auto", None, 5], key=value_key) == [3e-4, 1e-2, 5, "auto", None]


@run_async
async def test_phase_says_one_run_per_cell_and_keeps_plateau_when_none_emerged(synthetic, presets_dir,
                                                                                console_errors):
    from sparse_tui.tui.widgets.phase_diagram import PhasePanel

    store = RunStore(synthetic)
    store.con.execute("UPDATE runs SET plateau_step=NULL WHERE preset='toy-sweep'")
    store.close()
    async with opened(synthetic, presets_dir, size=(100, 30)) as (app, pilot, seen):
        await _runs(pilot)
        await _cursor(pilot, TOY[0])
        await pilot.press("6")
        phase = app.query_one(PhasePanel)
        await wait_for(pilot, lambda: phase.keys, 5)
        await pilot.pause(0.3)
        info = str(phase.query_one("#phase-info").render())
        assert phase.value == "plateau"
        assert "no run left the plateau" in info.splitlines()[0]
        assert "one run per cell" in info and "mean over seeds" not in info
    assert console_errors == []


def test_failed_run_shows_its_stored_values(synthetic: Path):
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "runs", "--runs-dir", str(synthetic)],
                       capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, timeout=120)
    line = next(ln for ln in r.stdout.splitlines() if FAILED in ln)
    store = RunStore(synthetic)
    last = store.last_metrics(FAILED)
    assert f"{last['test/loss']:.4g}" in line and f"{last['test/acc']:.3f}" in line


def test_ticks_have_one_format_per_axis_and_r2_is_not_rounded_up():
    from sparse_tui.base.plotting import fmt_r2, nice_ticks, tick_labels
    from sparse_tui.tui.plot import PlotSpec, Series, draw

    assert tick_labels(nice_ticks(1e-6, 1e-2, 5, log=True)) == ["1e-6", "1e-5", "1e-4", "1e-3", "1e-2"]
    assert tick_labels([360, 700, 1050]) == ["360", "700", "1050"]
    assert tick_labels(nice_ticks(0, 83273.7, 5)) == ["0", "20000", "40000", "60000", "80000"]
    assert tick_labels([0, 0.25, 0.5]) == ["0.00", "0.25", "0.50"]
    assert fmt_r2(0.99987) == "0.9999" and fmt_r2(0.9) == "0.900" and fmt_r2(1.0) == "1.000"
    text = draw(PlotSpec(series=[Series([1, 2, 3, 4], [1e-6, 1e-4, 1e-3, 0.5])], log_y=True), 60, 16).plain
    assert "0.000001" not in text and "1e-6" in text


def test_fit_figure_title_is_the_fitted_law(synthetic: Path, tmp_path: Path):
    pytest.importorskip("matplotlib")
    from sparse_tui.reports.figures import fit_figure
    from sparse_tui.reports.fitreport import fit_store

    rep = fit_store(RunStore(synthetic), "d,T", preset="toy-sweep")
    svg = fit_figure(rep, tmp_path / "fit.svg").read_text()
    assert "runs: " not in svg and "toy-sweep: " in svg


@run_async
async def test_opening_another_preset_clears_the_field_help(presets_dir: Path, runs_dir: Path, console_errors):
    (presets_dir / "other.toml").write_text(tiny_text().replace('name = "tiny"', 'name = "other"'))
    async with opened(runs_dir, presets_dir) as (app, pilot, seen):
        from sparse_tui.tui.widgets.presets_panel import PresetsPanel

        await wait_for(pilot, lambda: app.query("#f-train--lr"))
        app.query_one("#f-train--lr").focus()
        helpw = app.query_one("#field-help")
        await wait_for(pilot, lambda: "train.lr" in str(helpw.render()), 10)
        panel = app.query_one(PresetsPanel)
        app.query_one("#preset-list").focus()  # back to the file list, then the other preset
        await wait_for(pilot, lambda: app.focused is app.query_one("#preset-list"), 10)
        await panel.open_path(next(p for p in panel.files if p.stem != panel.draft.path.stem))
        await pilot.pause(0.2)
        assert "train.lr" not in str(helpw.render())
    assert console_errors == []


def test_help_summaries_are_whole():
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "--help"], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "100"}, timeout=60)
    assert "Fit a power law to the plateau lengths of finished runs" in r.stdout
    assert "Plateau length of the reduced dynamics against the closed-form" in r.stdout
    assert "(App." not in r.stdout and "(paper Eqs." not in r.stdout
    assert not any(ln.rstrip().endswith("...") for ln in r.stdout.splitlines() if not ln.startswith("Usage"))


@run_async
async def test_a_new_store_is_asked_for_and_exports_go_to_the_runs_dir(tmp_path: Path, presets_dir: Path,
                                                                         console_errors):
    runs = tmp_path / "here" / "runs"
    app = make(runs, presets_dir, create_store=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", 10)
        assert str((runs / "runs.db").resolve()) in app.screen.question
        await pilot.press("n")
        await pilot.pause(0.3)
        assert not runs.exists()  # nothing created without a yes
        await pilot.press("1")
        await pilot.press("enter")
        await pilot.pause(0.2)
        await pilot.press("ctrl+l")  # a launch asks for the store again
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", 10)
        assert "No run store" in app.screen.question
        await pilot.press("y")
        await wait_for(pilot, lambda: (runs / "runs.db").exists() and app.store is not None, 10)
        assert app.main.export_folder() == str((runs / "exports").resolve())
    assert console_errors == []


# -- new views --------------------------------------------------------------------------------------------------


@run_async
async def test_groups_over_seeds_show_mean_std_and_expand(synthetic: Path, presets_dir: Path, console_errors):
    from sparse_tui.tui.render.groups import Stat

    async with opened(synthetic, presets_dir) as (app, pilot, seen):
        panel = await _runs(pilot)
        await _filter(pilot, "toy-sweep")
        await pilot.press("g")  # by the swept values: d x T, one run each
        assert panel.group_keys == ["task.d", "task.T"] and len(panel.groups) == 9
        await pilot.press("g")  # by task.d alone: 3 groups of 3
        assert panel.group_keys == ["task.d"] and len(panel.shown) == 3
        store = RunStore(synthetic)
        g16 = panel.groups["g:d=16"]
        plateaus = [store.get(r).plateau_step for r in g16.run_ids]
        expect = Stat.of(plateaus)
        assert g16.n == 3 and math.isclose(g16.plateau.mean, sum(plateaus) / 3)
        assert math.isclose(g16.plateau.std, expect.std) and g16.plateau.std > 0
        cells = [str(panel.table.get_cell("g:d=16", "plateau"))]
        assert "±" in cells[0]
        assert app.query_one("CurvesPanel").group_keys == ["task.d"]
        await _cursor(pilot, "g:d=16")
        await pilot.press("enter")  # expand: its runs under it
        await pilot.pause(0.2)
        i = panel.shown.index("g:d=16")
        assert set(panel.shown[i + 1:i + 4]) == set(g16.run_ids)
        # sort by plateau: groups by their mean
        while panel.sort != "plateau":
            await pilot.press("s")
        means = [panel.groups[k].plateau.mean for k in panel.shown if k in panel.groups]
        assert means == sorted(means)
        await pilot.press("x")  # compare two groups: the metrics as mean ± std
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CompareScreen", 5)
        from rich.console import Console

        con = Console(width=160, record=True, file=open(os.devnull, "w"))
        con.print(app.screen.body)
        text = con.export_text()
        assert "plateau step" in text and "(n=3)" in text and "task.d" in text
    assert console_errors == []


@run_async
async def test_compare_two_runs_shows_final_metrics_and_config_diff(synthetic: Path, presets_dir: Path,
                                                                    console_errors):
    async with opened(synthetic, presets_dir) as (app, pilot, seen):
        await _runs(pilot)
        await _cursor(pilot, FINISHED)
        await pilot.press("space")
        await _cursor(pilot, FAILED)
        await pilot.press("space", "x")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CompareScreen", 5)
        from rich.console import Console

        con = Console(width=160, record=True, file=open(os.devnull, "w"))
        con.print(app.screen.body)
        text = con.export_text()
        store = RunStore(synthetic)
        assert "final test/acc" in text and f"{store.get(FINISHED).final['test/acc']:.4g}" in text
        assert "train.lr" in text and "0.001" in text
    assert console_errors == []


@run_async
async def test_hyperparameter_columns_fit_and_can_be_picked(synthetic: Path, presets_dir: Path, console_errors):
    async with opened(synthetic, presets_dir, size=(80, 24)) as (app, pilot, seen):
        panel = await _runs(pilot)
        await _filter(pilot, "toy-sweep")
        shown = [k for k, _, _ in panel._cols if k.startswith("hp:")]
        name_w = next(w for k, _, w in panel._cols if k == "name")
        assert not shown or name_w >= 20  # at 80 columns the name keeps its room: hp columns only as they fit
        await pilot.press("o")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ColumnsScreen", 5)
        await pilot.press("space")  # toggle the first (task.d)
        await pilot.press("enter")
        await pilot.pause(0.3)
        now = [k for k, _, _ in panel._cols if k.startswith("hp:")]
        assert ("hp:task.d" in now) != ("hp:task.d" in shown)
    assert console_errors == []


@run_async
async def test_curve_grid_draws_one_chart_per_group(synthetic: Path, presets_dir: Path, console_errors):
    from sparse_tui.tui.widgets.curves import CurvesPanel
    from sparse_tui.tui.widgets.plot_view import PlotView

    async with opened(synthetic, presets_dir, size=(200, 50)) as (app, pilot, seen):
        await _runs(pilot)
        await _filter(pilot, "toy-sweep")
        await pilot.press("g", "g")  # group by task.d
        await pilot.press("3")
        curves = app.query_one(CurvesPanel)
        await pilot.pause(0.3)
        await pilot.press("g")
        await wait_for(pilot, lambda: curves.data is not None and len(curves.data.run_ids) == 9, 10)
        plot = curves.query_one(PlotView)
        await wait_for(pilot, lambda: plot.grid is not None and len(plot.grid) == 3, 10)
        assert [s.title for s in plot.grid] == ["d=4 (n=3)", "d=16 (n=3)", "d=64 (n=3)"]
        labels = [s.label for s in plot.grid[0].series if s.kind == "line" and s.color != "gray"]
        assert labels == ["test/loss (n=3)"]  # grouped: the group's mean ± std (issue 34)
        await pilot.press("b")  # one line per run
        await wait_for(pilot, lambda: len(plot.grid[0].series) > 2, 10)
        labels = [s.label for s in plot.grid[0].series if s.kind == "line" and s.color != "gray"]
        assert labels == ["T=8", "T=16", "T=32"]  # only the keys that differ, in their order
        assert "grid of 3" in curves.border_title
        await pilot.press("l", "plus")  # log y and smoothing apply to every chart
        await pilot.pause(0.2)
        assert not plot.grid[0].log_y
        await pilot.press("p")  # the figure of what is shown
        await wait_for(pilot, lambda: any("wrote" in t for t in _texts(app)), 30)
        figs = list((synthetic / "figures").glob("curves-*.png"))
        assert len(figs) == 1 and figs[0].stat().st_size > 1000
        assert str(figs[0].resolve()) in next(t for t in _texts(app) if "wrote" in t)
    assert console_errors == []


@run_async
async def test_phase_and_fit_figures_from_the_console(synthetic: Path, presets_dir: Path, console_errors):
    pytest.importorskip("matplotlib")
    async with opened(synthetic, presets_dir) as (app, pilot, seen):
        await _runs(pilot)
        await _cursor(pilot, TOY[0])
        await pilot.press("6")
        await wait_for(pilot, lambda: app.query_one("PhasePanel").figure_data is not None, 10)
        await pilot.press("p")
        await wait_for(pilot, lambda: list((synthetic / "figures").glob("phase-*.png")), 30)
        await pilot.press("5", "enter")
        await wait_for(pilot, lambda: app.query_one("FitPanel").result is not None, 30)
        await pilot.press("P")
        await wait_for(pilot, lambda: list((synthetic / "figures").glob("fit-*.svg")), 30)
        svg = next((synthetic / "figures").glob("fit-*.svg")).read_text()
        assert "toy-sweep: plateau_step" in svg
    assert console_errors == []


@run_async
async def test_note_and_tags_from_the_console(synthetic: Path, presets_dir: Path, console_errors):
    async with opened(synthetic, presets_dir) as (app, pilot, seen):
        await _runs(pilot)
        await _cursor(pilot, FINISHED)
        await pilot.press("n")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "PromptScreen", 5)
        await pilot.press(*"copy head at 140", "enter")
        await wait_for(pilot, lambda: RunStore(synthetic).get(FINISHED).note == "copy head at 140", 10)
        await pilot.press("T")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "PromptScreen", 5)
        await pilot.press(*"baseline v2", "enter")
        await wait_for(pilot, lambda: RunStore(synthetic).get(FINISHED).tags == ["baseline", "v2"], 10)
        panel = app.query_one(RunsPanel)
        await wait_for(pilot, lambda: "note: copy head at 140" in str(panel.query_one("#run-detail").render()), 10)
        await pilot.press("T")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "PromptScreen", 5)
        await pilot.press("ctrl+u", *"bad tag!", "enter")
        await wait_for(pilot, lambda: any("tag 'tag!'" in t for t in _texts(app)), 10)
        assert RunStore(synthetic).get(FINISHED).tags == ["baseline", "v2"]
        await _filter(pilot, "baseline")
        assert panel.shown == [FINISHED]
    assert console_errors == []  # a refused tag is the user's input, said in a notification


@run_async
async def test_archive_hides_runs_until_the_filter_asks(synthetic: Path, presets_dir: Path, console_errors):
    async with opened(synthetic, presets_dir) as (app, pilot, seen):
        panel = await _runs(pilot)
        await _cursor(pilot, FINISHED)
        await pilot.press("A")
        await wait_for(pilot, lambda: FINISHED not in panel.shown, 10)
        assert RunStore(synthetic).get(FINISHED).archived
        await _filter(pilot, "is:archived")
        assert panel.shown == [FINISHED]
    assert console_errors == []


def test_nvml_reads_gpu_use_and_degrades_without_it(monkeypatch):
    from sparse_tui.base.sysmetrics import Nvml
    from sparse_tui.tui.sysinfo import host_summary

    class Err(Exception):
        pass

    fake = types.SimpleNamespace(
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda i: ("h", i), nvmlDeviceGetName=lambda h: b"NVIDIA H100 80GB HBM3",
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=37),
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=12.1 * 2**30, total=80 * 2**30))
    assert Nvml(fake).summary() == "GPU0 H100 37% 12.1/80G"

    def boom():
        raise Err("NVML Shared Library Not Found")

    assert Nvml(types.SimpleNamespace(nvmlInit=boom)).summary() is None
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: import fails
    assert Nvml().ok is False and Nvml().summary() is None
    assert host_summary().startswith("CPU ") and "RAM" in host_summary()


def test_speed_and_eta_of_runs_and_batches(synthetic: Path):
    from sparse_tui.tui.render.runs import batch_eta, eta, speed

    rec = RunStore(synthetic).get(FINISHED)
    rec.status, rec.step, rec.total_steps = "running", 100, 300
    rec.started_at, rec.heartbeat_at = 1000.0, 1010.0
    other = RunStore(synthetic).get(FAILED)
    other.status, other.step, other.total_steps, other.batch_id = "queued", 0, 300, rec.batch_id
    assert speed(rec) == 10.0 and eta(rec) == 20.0
    assert batch_eta([rec, other], rec.batch_id) == 50.0  # 200 + 300 steps left at 10 steps/s


def test_started_work_processes_are_reaped(synthetic: Path, presets_dir: Path):
    app = make(synthetic, presets_dir)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    app.children_started.add(proc.pid)
    proc.returncode = 0  # the app, not Popen, collects it (what happens to a detached `work` process)
    import time

    t0 = time.monotonic()
    while app.children_started and time.monotonic() - t0 < 20:
        app.reap_children()
        time.sleep(0.1)
    assert not app.children_started
    assert not Path(f"/proc/{proc.pid}").exists() or "Z" not in Path(f"/proc/{proc.pid}/stat").read_text().split()[2]


def test_attention_of_long_sequences_has_a_position_ruler():
    import numpy as np

    from sparse_tui.tui.render.attention import render_attention

    L = 65
    maps = {"L1": np.full((1, 1, L, L), 1.0 / L, dtype=np.float32)}
    body, info = render_attention(maps, {"relevant": [[0] * L]}, "L1", 0, 0, width=80)
    header = body.plain.splitlines()[0]
    assert "10" in header and "60" in header
    assert "head 1 of 1" in info and "example 1 of 1" in info and "0/0" not in info


@run_async
async def test_palette_lists_help_once_and_wide_screens_widen_the_preset_list(runs_dir, presets_dir, console_errors):
    long = presets_dir / "a_rather_long_preset_name_x.toml"
    long.write_text(tiny_text())
    async with opened(runs_dir, presets_dir, size=(200, 50)) as (app, pilot, seen):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert sum("help" in t.lower() or t == "Keys" for t in titles) == 1
        await pilot.pause(0.3)
        assert app.query_one("#preset-list").size.width >= len(long.stem) + 2
        await wait_for(pilot, lambda: app.query("#f-train--lr"))
        assert app.query_one("#f-train--lr").size.width <= 64
    assert console_errors == []
