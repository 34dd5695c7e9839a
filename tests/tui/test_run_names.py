"""Issue 34: run names at 80 columns keep whole key=value pairs (a 20-run sweep shows its swept values)."""

from __future__ import annotations

from pathlib import Path

from .conftest import run_async


def test_names_keep_whole_pairs_and_drop_what_every_run_shares():
    """At 80 columns a 20-run sweep showed `…28 T=64 seed=0`: the swept value cut. Now whole key=value pairs, the
    words every shown run shares (the preset of one sweep, seed=0) left out first, a preset cut alike for all its
    runs, the last pairs replaced by … only when the pairs alone do not fit."""
    from sparse_tui.tui.render.runs import fit_names, fit_pairs

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
    assert fit_pairs("d=128 T=64 seed=1", 12) == "d=128 T=64 …"
    assert fit_pairs("d=128 T=64 seed=1", 9) == "d=128 …"
    assert fit_pairs("d_model=128", 6) == "d_mod…"  # one pair wider than the column: cut at its end


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
