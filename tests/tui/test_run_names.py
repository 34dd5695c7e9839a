"""Issue 34: run names at 80 columns keep whole key=value pairs (a 20-run sweep shows its swept values)."""

from __future__ import annotations

from pathlib import Path

from .conftest import run_async


def test_names_keep_whole_pairs_and_drop_what_every_run_shares():
    """At 80 columns a 20-run sweep showed `…28 T=64 seed=0`: the swept value cut. Now whole key=value pairs, the
    words every shown run shares (the preset of one sweep, seed=0) left out first, a preset cut alike for all its
    runs, the last pairs dropped and counted (…+N) only when the pairs alone do not fit (issue 43: no value cut)."""
    from sparse_tui.tui.render.names import fit_label, fit_names

    sweep = [f"paper_fig1c_theory d={d} T={T} seed=0" for d in (16, 32, 64, 128, 256) for T in (64, 256, 1024, 4096)]
    fitted = fit_names(sweep, 17)
    assert fitted["paper_fig1c_theory d=128 T=64 seed=0"] == "d=128 T=64"
    assert fitted["paper_fig1c_theory d=16 T=1024 seed=0"] == "d=16 T=1024"
    assert len(set(fitted.values())) == 20  # every run told apart
    assert fit_names(sweep, 40) == {n: n for n in sweep}  # room: the whole names
    mixed = [f"toy-sweep d={d} T=8 seed=0" for d in (4, 64)] + ["recall-lr lr=0.01 seed=0", "recall-lr lr=0.001 seed=0"]
    fitted = fit_names(mixed, 17)
    assert [fitted[n] for n in mixed] == ["toy-swe… d=4 T=8", "toy-swe… d=64 T=8", "recall-… lr=0.01",
                                          "recall-… lr=0.001"]  # each preset cut alike, seed=0 (shared) left out
    assert fit_label("d=128 T=64 seed=1", 14) == "d=128 T=64 …+1"
    assert fit_label("d=128 T=64 seed=1", 12) == "d=128 …+2"
    assert fit_label("d_model=128", 6) == "d…=128"  # one pair wider than the column: its key gives way, not 128


@run_async
async def test_sweep_names_and_group_rows_show_the_swept_values_at_80_columns(tmp_path: Path, presets_dir: Path,
                                                                             console_errors):
    from .conftest import fill_sweep, opened

    fill_sweep(tmp_path / "sweep").close()
    async with opened(tmp_path / "sweep", presets_dir, size=(80, 24)) as (app, pilot, seen):
        await pilot.press("2")
        await pilot.pause(0.3)
        panel = app.query_one("RunsPanel")
        names = [str(panel.table.get_cell(k, "name")) for k in panel.shown]
        assert len(names) == 20 and len(set(names)) == 20, names
        assert "d=128 T=64" in names and "d=16 T=1024" in names
        await pilot.press("g")  # by d and T: one group per run
        await pilot.pause(0.3)
        names = [str(panel.table.get_cell(k, "name")) for k in panel.shown]
        assert "▸ d=16 T=256 (n=1)" in names and "▸ d=16 T=1024 n=1" in names, names  # the count always (issue 43)
    assert console_errors == []


@run_async
async def test_column_picker_says_what_fits_and_makes_room(tmp_path: Path, presets_dir: Path, console_errors):
    """`o` took task.d and task.B at 80 columns, closed and showed nothing (the columns landed past the right edge)
    and said nothing. Now the dialog says what fits as columns are toggled, fixed columns make room, and what cannot
    fit is left out and named."""
    from .conftest import fill_sweep, opened

    fill_sweep(tmp_path / "sweep").close()
    async with opened(tmp_path / "sweep", presets_dir, size=(80, 24)) as (app, pilot, seen):
        await pilot.press("2")
        await pilot.pause(0.3)
        panel = app.query_one("RunsPanel")
        assert not [k for k, _, _ in panel._cols if k.startswith("hp:")]  # none fit beside a 20-column name
        await pilot.press("o")
        await pilot.pause(0.3)
        fits = app.screen.query_one("#fits")
        assert str(fits.render()) == "no column shown"
        await pilot.press("space", "down", "space")
        await pilot.pause(0.3)
        assert str(fits.render()) == "d, T shown · step hidden to make room"
        await pilot.press("enter")
        await pilot.pause(0.3)
        keys = [k for k, _, _ in panel._cols]
        assert keys[-2:] == ["hp:task.d", "hp:task.T"] and "step" not in keys
        table = panel.table
        assert sum(c.get_render_width(table) for c in table.columns.values()) <= 78  # all on screen
        assert list(app._notifications)[-1].message == "d, T shown · step hidden to make room"
        assert str(table.get_cell(panel.shown[0], "hp:task.d")) == "256"
    assert console_errors == []
    # too narrow for both even without the fixed columns: one is left out, and named
    from sparse_tui.tui.render.table import RunTable

    t = RunTable()
    t.__dict__.update(panel.model.__dict__)  # the state of the panel's table above, without Textual
    assert t.column_layout(36, ["task.d", "task.T"])[1] == (
        "d shown · step, loss, acc, plateau, status hidden to make room · no room at 36 columns for T: pick fewer or "
        "widen the terminal")


BLOG_N80 = [f"blog_n80 train_size={n} lr={lr} seed={s}"
            for n in (10000, 100000) for lr in (0.01, 0.001) for s in (0, 1)]


def _values(text: str) -> list[str]:
    """The values a shortened name shows: what follows each ``=`` up to a space or the end (a cut one ends in …)."""
    import re

    return re.findall(r"=(\S+)", text)


def test_a_name_is_never_cut_inside_a_value():
    """Issue 43 defect 5: a blog_n80 run read `train_size=100…` for 100000 (and `train_size=10000…` for both sizes
    at 80 columns). At every width the names keep whole values, drop whole pairs and say how many (…+N), stay within
    the width, and tell the two training-set sizes apart wherever a value is shown at all."""
    from sparse_tui.tui.render.names import fit_label, fit_names

    real = {v for n in BLOG_N80 for v in _values(n)}
    for width in range(4, 45):
        fitted = fit_names(BLOG_N80, width)
        for name, text in fitted.items():
            assert len(text) <= width, (width, text)
            assert set(_values(text)) <= real, (width, text)  # whole values only: never 100…, 1000…
            shown = _values(text)
            if shown:  # the first pair's value is the run's own
                assert shown[0] == _values(name)[0], (width, name, text)
            dropped = len(_values(name)) - len(shown)
            if dropped and "…+" in text:
                assert text.endswith(f"…+{dropped}"), (width, text)  # how many pairs gave way
    assert fit_names(BLOG_N80, 17)["blog_n80 train_size=100000 lr=0.001 seed=1"] == "train…=100000 …+2"
    # where every value fits with the keys cut (alike for the column), the keys give way, not the pairs: the runs
    # stay told apart (a run named whole beside them keeps its whole keys)
    at24 = fit_names(BLOG_N80, 24)
    assert at24["blog_n80 train_size=100000 lr=0.001 seed=1"] == "t…=100000 lr=0.001 s…=1"
    assert len(set(at24.values())) == len(BLOG_N80)
    groups = ["train_size=10000 lr=0.01", "train_size=10000 lr=0.001", "train_size=100000 lr=0.01",
              "train_size=100000 lr=0.001"]  # the group rows of `g` by both keys (were `▸ …=10000 …+1` twice)
    assert list(fit_names(groups, 18).values()) == ["t…=10000 lr=0.01", "t…=10000 lr=0.001", "t…=100000 lr=0.01",
                                                    "t…=100000 lr=0.001"]
    assert fit_label("blog_n80 train_size=100000", 14) == "train_…=100000"  # the key gives way, never the value
    assert fit_label("d=16 T=1024 (n=3)", 14) == "d=16 …+1 (n=3)"  # a group's count stays


def test_runs_command_at_80_columns_keeps_whole_values(tmp_path: Path, monkeypatch):
    """`sparse-tui runs` at 80 columns showed every blog_n80 run as `train_size=10000…`, 100000 included: now one
    line per run, each with its whole training-set size."""
    import io

    from rich.console import Console

    from sparse_tui.cli import common, runs
    from sparse_tui.store import RunStore

    from .conftest import _specs

    raw = {"name": "blog_n80", "task": {"kind": "recall", "n_tokens": 64, "n_pairs": 32, "train_size": 10000},
           "model": {"kind": "transformer", "d_model": 80},
           "train": {"optimizer": "adam", "lr": 1e-3, "steps": 4000, "device": "cpu"}, "seeds": [0, 1],
           "sweep": {"task.train_size": [10000, 100000], "train.lr": [1e-2, 1e-3]}}
    store = RunStore(tmp_path)
    _, ids = store.create_runs(_specs(raw))
    names = {r.run_id: r.name for r in store.runs(reap=False)}
    store.close()
    assert sorted(names.values()) == sorted(BLOG_N80)
    buf = io.StringIO()
    terminal = Console(width=80, file=buf, highlight=False, soft_wrap=True)
    monkeypatch.setattr(common, "out", terminal)
    monkeypatch.setattr(runs, "out", terminal)
    runs.runs(runs_dir=tmp_path, as_json=False, status=None, preset=None, limit=0)
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines[1:]) <= 80
    rows = {rid: [line for line in lines if rid in line] for rid in ids}
    assert all(len(r) == 1 for r in rows.values()), lines  # each id once
    assert len([line for line in lines[1:] if line.strip()]) == len(ids) + 1, lines  # a header, one line per run
    for rid, (line,) in rows.items():
        size = names[rid].split()[1].split("=")[1]  # 10000 or 100000
        assert f"={size} " in line, line  # the whole value, never train_size=100…


def _blog_n80_store(runs_dir: Path) -> dict[str, str]:
    """A store holding the 8 runs of blog_n80's sweep (train_size 10^4, 10^5 x lr x 2 seeds): run id -> name."""
    from sparse_tui.store import RunStore

    from .conftest import _specs

    raw = {"name": "blog_n80", "task": {"kind": "recall", "n_tokens": 64, "n_pairs": 32, "train_size": 10000},
           "model": {"kind": "transformer", "d_model": 80},
           "train": {"optimizer": "adam", "lr": 1e-3, "steps": 4000, "device": "cpu"}, "seeds": [0, 1],
           "sweep": {"task.train_size": [10000, 100000], "train.lr": [1e-2, 1e-3]}}
    store = RunStore(runs_dir)
    store.create_runs(_specs(raw))
    names = {r.run_id: r.name for r in store.runs(reap=False)}
    store.close()
    assert sorted(names.values()) == sorted(BLOG_N80)
    return names


@run_async
async def test_runs_panel_at_80x24_shows_whole_training_set_sizes(tmp_path: Path, presets_dir: Path, console_errors):
    """The newcomer's defect 5, in the console: at 80x24 every blog_n80 run read `train_size=10000…`, 100000
    included. Now each name cell shows its run's whole size, and the group rows (g) too."""
    from .conftest import opened

    names = _blog_n80_store(tmp_path / "store")
    async with opened(tmp_path / "store", presets_dir, size=(80, 24)) as (app, pilot, seen):
        await pilot.press("2")
        await pilot.pause(0.3)
        panel = app.query_one("RunsPanel")
        cells = {k: str(panel.table.get_cell(k, "name")) for k in panel.shown}
        assert set(cells) == set(names)
        for rid, cell in cells.items():
            assert _values(cell) == _values(names[rid]), (names[rid], cell)  # every value, whole
        assert len(set(cells.values())) == 8  # every run told apart: step/total gave its column to the names
        assert "step" not in [c.label.plain for c in panel.table.columns.values()]
        await pilot.press("g")  # groups over the seeds: train_size x lr
        await pilot.pause(0.3)
        groups = [str(panel.table.get_cell(k, "name")).split(" n=")[0].split(" (n=")[0] for k in panel.shown]
        assert len(groups) == 4 and all(set(_values(g)) <= {"10000", "100000", "0.01", "0.001"} for g in groups)
        assert sorted(_values(g)[0] for g in groups) == ["10000", "10000", "100000", "100000"], groups
        assert len(set(groups)) == 4 and all(len(_values(g)) == 2 for g in groups), groups  # lr shown, not …+1
        await pilot.press("g")  # by train_size alone: told apart without help, the status column stays
        await pilot.pause(0.3)
        assert "status" in [c.label.plain for c in panel.table.columns.values()]
    assert console_errors == []
