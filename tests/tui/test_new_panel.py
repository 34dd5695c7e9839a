"""A new console panel is one module plus one line in ``panels.PANELS`` (issue 23; docs/ARCHITECTURE.md, "A new
console panel"): the worked example of the docs, registered here, gets its tab, its key (the next digit), its
palette entry and the store's reads through its hooks, with no other change to the console."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from textual.widgets import Static, TabbedContent

from sparse_tui.store import RunStore
from sparse_tui.tui import panels
from sparse_tui.tui.panels import PanelSpec
from sparse_tui.tui.widgets.panel import ConsolePanel, StoreView

from .conftest import opened, run_async, wait_for


# -- the worked example of docs/ARCHITECTURE.md, as written there ------------------------------------------------------
class StatusPanel(ConsolePanel, Static, can_focus=True):
    """How many runs the store holds in each status."""

    def store_changed(self, view: StoreView) -> None:
        counts = Counter(r.status for r in view.records)
        self.update(" · ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no runs")

    panel_shown = store_changed  # drawn when switched to, then kept fresh while shown
# ----------------------------------------------------------------------------------------------------------------------


def _counts(runs_dir: Path) -> str:
    store = RunStore(runs_dir)
    try:
        counts = Counter(r.status for r in store.runs(reap=False))
    finally:
        store.close()
    return " · ".join(f"{n} {status}" for status, n in sorted(counts.items()))


@run_async
async def test_a_registered_panel_gets_the_next_key_and_reads_the_store(synthetic: Path, presets_dir: Path,
                                                                        console_errors, monkeypatch):
    monkeypatch.setattr(panels, "PANELS", [*panels.PANELS, PanelSpec("status", "Status", StatusPanel)])
    key = str(len(panels.PANELS))  # 7: the keys are generated from the registry
    async with opened(synthetic, presets_dir) as (app, pilot, seen):
        tabs = app.main.query_one("#panels", TabbedContent)
        assert tabs.active == "tab-presets"
        await pilot.press(key)
        panel = app.main.query_one(StatusPanel)
        await wait_for(pilot, lambda: tabs.active == "tab-status" and app.focused is panel, 10)
        want = _counts(synthetic)
        assert "failed" in want and "finished" in want
        await wait_for(pilot, lambda: str(panel.content) == want, 10)

        # the store changes: the panel shown follows the poller's next read
        store = RunStore(synthetic)
        failed = [r.run_id for r in store.runs(reap=False) if r.status == "failed"]
        store.delete(failed)
        store.close()
        await wait_for(pilot, lambda: str(panel.content) == _counts(synthetic) != want, 10)
        assert "failed" not in str(panel.content)

        # the palette lists it with its key; the help lists its key among the keys everywhere
        titles = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert titles["Panel: Status"] == f"switch to the Status panel (key {key})"
        from sparse_tui.tui.commands import help_groups

        everywhere = dict(help_groups(app))["everywhere"]
        assert [(b.key, b.action) for b in everywhere if b.key == key] == [(key, "panel('status')")]

        await pilot.press("2")  # and the built-in keys still switch
        await wait_for(pilot, lambda: tabs.active == "tab-runs", 10)
    assert console_errors == []


def test_the_architecture_doc_shows_the_example_as_it_is():
    """docs/ARCHITECTURE.md's "A new console panel" shows the panel above verbatim, so the worked example is tested."""
    import inspect
    import re

    doc = (Path(__file__).resolve().parents[2] / "docs" / "ARCHITECTURE.md").read_text()
    section = doc.split("### A new console panel", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert any(inspect.getsource(StatusPanel) in b for b in blocks)
