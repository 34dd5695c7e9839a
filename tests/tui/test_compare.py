"""The compare view (issue 12: "a compare view shows two runs' config differences and overlays their curves,
labelled by name"): ``x`` in Runs and the palette's "Compare two runs"."""

from __future__ import annotations

from pathlib import Path

from sparse_tui.store import RunStore
from sparse_tui.tui.render.compare import compare_body
from sparse_tui.tui.widgets.curves import CurvesPanel
from sparse_tui.tui.widgets.run_table import RunsPanel

from .conftest import opened, run_async, wait_for


def _text(renderable) -> str:
    from rich.console import Console

    con = Console(width=160, record=True, file=open("/dev/null", "w"))
    con.print(renderable)
    return con.export_text()


def test_compare_lists_only_the_differing_keys(synthetic: Path):
    store = RunStore(synthetic)
    a, b = store.get("0000000c"), store.get("0000000d")  # recall-lr: lr 0.01 vs 0.001, same otherwise
    _, body = compare_body([(a.run_id, [a]), (b.run_id, [b])], {})
    text = _text(body).split("config differences")[1]
    keys = [ln.split()[0] for ln in text.splitlines() if ln.strip() and "│" in ln]
    assert keys == ["train.lr"] and "0.01" in text and "0.001" in text
    lin = store.get("00000002")  # another preset: the preset and the task differ
    _, body = compare_body([(a.run_id, [a]), (lin.run_id, [lin])], {})
    text = _text(body)
    assert "recall-lr" in text and "toy-sweep" in text and "task.kind" in text
    _, body = compare_body([(a.run_id, [a]), (a.run_id, [a])], {})
    assert "the two have the same config" in _text(body)


def test_compare_has_one_number_format_per_row(tmp_path: Path):
    """B − A was written `+2.056e+04` beside `24.58k` and `98.3k` (issue 34): now in the row's own format."""
    from .conftest import fill_sweep

    store = fill_sweep(tmp_path / "sweep")
    by = {(r.params["task.d"], r.params["task.T"]): r for r in store.runs(reap=False)}
    a, b = by[16, 4096], by[256, 4096]  # plateau 1.5 sqrt(d) T: 24576 and 98304
    _, body = compare_body([(a.run_id, [a]), (b.run_id, [b])], {})
    row = next(ln for ln in _text(body).splitlines() if ln.strip().startswith("plateau step"))
    assert [c.strip() for c in row.split("│")[1:]] == ["24.58k", "98.3k", "+73.73k"], row


@run_async
async def test_x_compares_two_marked_runs_then_overlays_their_curves(synthetic: Path, presets_dir: Path,
                                                                      console_errors):
    async with opened(synthetic, presets_dir) as (app, pilot, seen):
        await pilot.press("2")
        await pilot.pause(0.2)
        panel = app.query_one(RunsPanel)
        for rid in ("0000000c", "0000000d"):
            panel.table.move_cursor(row=panel.shown.index(rid), animate=False)
            await pilot.pause(0.1)
            await pilot.press("space")
        await pilot.pause(0.2)
        assert panel.marked == ["0000000c", "0000000d"]
        await pilot.press("x")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CompareScreen", 20)
        from rich.console import Console

        con = Console(width=160, record=True, file=open("/dev/null", "w"))
        con.print(app.screen.body)
        text = con.export_text()
        assert "train.lr" in text and "0.01" in text and "0.001" in text
        assert "recall-lr lr=0.01 seed=0" in text and "recall-lr lr=0.001 seed=0" in text
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.query_one("#panels").active == "tab-curves", 20)
        curves = app.query_one(CurvesPanel)
        await wait_for(pilot, lambda: set(app.main.view_ids()) == {"0000000c", "0000000d"}, 20)
        await wait_for(pilot, lambda: getattr(curves, "data", None) is not None
                       and set(curves.data.labels.values()) == {"recall-lr lr=0.01 seed=0",
                                                                 "recall-lr lr=0.001 seed=0"}, 20)
        # one run only (nothing marked, cursor on the last row): refused with a notification
        await pilot.press("2")
        await pilot.pause(0.2)
        await pilot.press("a")  # two marked: a unmarks them
        await pilot.pause(0.2)
        assert panel.marked == []
        panel.table.move_cursor(row=len(panel.shown) - 1, animate=False)
        await pilot.pause(0.2)
        await pilot.press("x")
        await pilot.pause(0.3)
        assert type(app.screen).__name__ != "CompareScreen"
        assert any("compare needs two runs" in n.message for n in app._notifications)
    assert console_errors == []


@run_async
async def test_palette_entry_points_to_a_real_action(synthetic: Path, presets_dir: Path, console_errors):
    """Every "panel action" of the command palette exists on its panel (none points to a missing action)."""
    async with opened(synthetic, presets_dir) as (app, pilot, seen):
        cmds = list(app.get_system_commands(app.screen))
        for c in cmds:
            cb = c.callback
            args = getattr(cb, "args", ())
            if getattr(cb, "func", None) == app.main.panel_action:
                pid, action = args
                panel = app.query_one(f"#{pid}")
                assert hasattr(panel, f"action_{action}"), (c.title, pid, action)
        assert any(c.title == "Compare two runs" for c in cmds)
    assert console_errors == []
