"""The console under hostile input (issue 45): the runs filter raised OverflowError on an integer parameter above
1e308, and ``matches(row, text)`` parsed the text again for every row (7.5 s for 38 rows on a 20,000-condition
filter); a FIFO or a link to /dev/zero in ./presets blanked the console."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparse_tui.store import RunStore
from sparse_tui.tui.render import filters
from sparse_tui.tui.render.filters import matches, parse
from sparse_tui.tui.render.runs import table_row

from .conftest import opened, run_async, wait_for


@pytest.fixture
def rows(synthetic: Path):
    return [table_row(r, None, 0.0) for r in RunStore(synthetic).runs(reap=False)]


def test_an_integer_parameter_above_1e308_compares_without_overflow(rows):
    r = rows[1]
    r.params["task.d"] = 10**400  # a JSON/TOML integer has no size limit
    q = parse("d>5", set(r.params))
    assert q.errors == []
    assert matches(r, q) is False and matches(r, "d>5") is False  # not a finite number: never matches
    assert matches(r, "d=" + "1" + "0" * 400) is True  # by its text, as any non-number
    assert matches(r, f"d>{'9' * 5000}") is False  # a long value is one refused condition, not a hang


def test_a_text_filter_is_parsed_once_for_all_rows(rows, monkeypatch):
    calls = []
    real = filters.parse
    monkeypatch.setattr(filters, "parse", lambda text, params: calls.append(text) or real(text, params))
    if hasattr(filters, "_parsed"):
        filters._parsed.cache_clear()
    text = " ".join(f"step>={-i}" for i in range(2000))
    toy = [r for r in rows if "task.d" in r.params]  # one set of parameter keys
    assert [matches(r, text) for r in toy] == [True] * len(toy)
    assert len(calls) == 1


@run_async
async def test_the_console_lists_presets_beside_a_fifo_and_a_link_to_dev_zero(presets_dir: Path, runs_dir: Path,
                                                                             console_errors):
    """Issue 45: a FIFO or a link to /dev/zero in ./presets blanked the console for 45 s (timing.timing opened
    every file); they are left out of the list, which shows the real presets."""
    import os

    from textual.widgets import ListView

    from sparse_tui.tui.widgets.presets_panel import PresetsPanel

    os.mkfifo(presets_dir / "pipe.toml")
    (presets_dir / "zero.toml").symlink_to("/dev/zero")
    async with opened(runs_dir, presets_dir, size=(80, 24)) as (app, pilot, seen):
        panel = app.query_one(PresetsPanel)
        await wait_for(pilot, lambda: panel.draft is not None, 20)
        labels = [str(item.query_one("Label").render()) for item in panel.query_one("#preset-list", ListView).children]
        assert labels[:3] == ["─ your own", "tiny", "─ checks"]
        assert "pipe" not in labels and "zero" not in labels
    assert console_errors == []
