"""Moving through the preset form: keys, the panel highlight, and what one Tab may cost (restyle / re-layout)."""

from __future__ import annotations

from pathlib import Path

from sparse_tui.tui.widgets.field_row import FieldRow, FieldSelect
from sparse_tui.tui.widgets.presets_panel import PresetsPanel

from .conftest import make, run_async, wait_for


async def _form_ready(pilot):
    app = pilot.app
    await wait_for(pilot, lambda: app.query(FieldRow) and app.query_one(PresetsPanel).draft is not None, 20)
    app.query_one(PresetsPanel).focus_form(first_field=True)
    await pilot.pause(0.2)


def lit(app, panel) -> bool:
    """The panel is the highlighted one: the app's active panel, drawn with the accent border (inline style)."""
    return app.active_panel is panel and panel.styles.inline.has_rule("border_title_color")


def _row_of(widget) -> FieldRow | None:
    return next((a for a in widget.ancestors if isinstance(a, FieldRow)), None)


@run_async
async def test_up_down_move_between_fields_also_from_a_closed_select(presets_dir: Path, runs_dir: Path, console_errors):
    app = make(runs_dir, presets_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await _form_ready(pilot)
        form_rows = app.query_one(PresetsPanel).query_one("#preset-form").rows()
        keys = [r.spec.key for r in form_rows]
        sel = app.query_one("#f-task--kind", FieldSelect)
        i = keys.index("task.kind")
        sel.focus()
        await pilot.pause()
        await pilot.press("down")  # a closed drop-down: Down goes to the next field, it does not open
        assert not sel.expanded
        assert _row_of(app.focused).spec.key == keys[i + 1]
        await pilot.press("up")
        assert app.focused is sel and not sel.expanded
        await pilot.press("up")
        assert _row_of(app.focused).spec.key == keys[i - 1]
        await pilot.press("down")
        assert app.focused is sel
        await pilot.press("enter")  # Enter still opens it; inside the list ↑/↓ pick a choice
        await wait_for(pilot, lambda: sel.expanded, 5)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not sel.expanded, 5)
        assert sel.value == "recall"  # nothing picked
        await pilot.press("space")
        await wait_for(pilot, lambda: sel.expanded, 5)
        await pilot.press("escape")
    assert console_errors == []


@run_async
async def test_tab_through_the_form_is_cheap_highlighted_and_visible(presets_dir: Path, runs_dir: Path, console_errors):
    """One Tab restyles a handful of widgets (was: the whole form, ~340, three times) and re-lays out the screen
    only when the footer's keys change (was: every Tab). The focused field stays scrolled into view at 80x24."""
    app = make(runs_dir, presets_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await _form_ready(pilot)
        box, plist = app.query_one("#form-box"), app.query_one("#preset-list")
        await wait_for(pilot, lambda: lit(app, box) and not lit(app, plist), 10)
        form = app.query_one("#preset-form")

        restyled: list[int] = []
        sheet = app.stylesheet
        orig_update_nodes = sheet.update_nodes

        def counting(nodes, animate=False):
            nodes = list(nodes)
            restyled.append(len(nodes))
            return orig_update_nodes(nodes, animate=animate)

        sheet.update_nodes = counting
        footer = app.query_one("KeysFooter")
        recomposed: list[int] = []
        orig_recompose = footer.recompose

        async def counting_recompose():
            recomposed.append(1)
            await orig_recompose()

        footer.recompose = counting_recompose
        n = len(form.rows()) + 1
        seen = []
        try:
            for _ in range(n - 1):
                await pilot.press("tab")
                f = app.focused
                row = _row_of(f)
                seen.append(row.spec.key if row else f.id)
                # the focused field is on screen, inside the form's viewport (scroll_visible runs after the next
                # refresh: on a loaded machine that can come after press() returns)
                await wait_for(pilot, lambda: form.scrollable_content_region.contains_region(f.region), 5)
                assert lit(app, box) and not lit(app, plist)
        finally:
            sheet.update_nodes = orig_update_nodes
        assert seen[-1] == "add-sweep" and len(set(seen)) == len(seen)
        per_tab = sum(restyled) / len(seen)
        assert per_tab < 30, f"{per_tab:.0f} widgets restyled per Tab"
        # the footer changes only between an Input (q and ? are typed) and a drop-down (q and ? act): not per Tab
        n_selects = len(app.query(FieldSelect))
        assert len(recomposed) <= 2 * n_selects + 2, (len(recomposed), len(seen))
        # leaving the form moves the highlight to the preset list; help hints follow the focus
        plist.focus()  # (the highlight follows once the focus events are handled: a loaded machine needs > 0.1 s)
        await wait_for(pilot, lambda: lit(app, plist) and not lit(app, box), 5)
        await pilot.press("2")
        await wait_for(pilot, lambda: lit(app, app.query_one("#runs")) and not lit(app, plist), 5)
    assert console_errors == []


@run_async
async def test_escape_leaves_the_form_so_digits_switch_panels(presets_dir: Path, runs_dir: Path, console_errors):
    """In a text field a digit is typed; Esc leaves the field for the form, Esc again goes to the preset list; from
    either, 6 opens the Phase panel."""
    app = make(runs_dir, presets_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await _form_ready(pilot)
        panel = app.query_one(PresetsPanel)
        assert panel.query_one("#form-box") in app.focused.ancestors
        await pilot.press("escape")  # leaves the field for the form: digits switch panels from there
        await pilot.pause()
        assert app.focused is panel.query_one("#preset-form")
        await pilot.press("escape")  # the form -> the preset list
        await pilot.pause()
        assert app.focused is panel.query_one("#preset-list")
        await pilot.press("6")
        await wait_for(pilot, lambda: app.query_one("#panels").active == "tab-phase", 5)
    assert console_errors == []
