"""The runs filter's expressions (issue 34): conditions on results, fields and parameters beside the words, errors in
one line, completion of keys and values; and in the console."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparse_tui.store import RunStore
from sparse_tui.tui.render.filters import matches, parse, suggest
from sparse_tui.tui.render.runs import table_row

from .conftest import opened, run_async


@pytest.fixture
def rows(synthetic: Path):
    """The synthetic store's 11 runs (a 3x3 toy sweep d x T, two recall runs lr 0.01 / 0.001) by the last two
    characters of their ids."""
    return {r.run_id[-2:]: table_row(r, None, 0.0) for r in RunStore(synthetic).runs(reap=False)}


def _ids(rows, text):
    q = parse(text, {k for r in rows.values() for k in r.params})
    assert q.errors == []
    return sorted(k for k, r in rows.items() if matches(r, q))


def test_conditions_on_results_fields_and_parameters(rows):
    toy = ["02", "03", "04", "05", "06", "07", "08", "09", "0a"]
    assert _ids(rows, "acc>0.9") == ["0c"]  # the finished recall run (1.000); the failed one stopped at 0.592
    assert _ids(rows, "lr<1e-2") == ["0d"]  # 0.001 (the toy runs' lr 0.1 is not below)
    assert _ids(rows, "train.lr<=0.01") == ["0c", "0d"]  # a full key
    assert _ids(rows, "plateau>=195") == ["09", "0a"]  # 197.5 and 376; runs without a plateau never match
    assert _ids(rows, "d=16,64") == toy[3:]  # any of
    assert _ids(rows, "d=16.0") == toy[3:6]  # numbers by value
    assert _ids(rows, "d!=16") == toy[:3] + toy[6:]  # runs without d (recall) never match
    assert _ids(rows, "preset~TOY") == toy  # contains, any case
    assert _ids(rows, "preset~toy T=8 status:finished") == ["02", "05", "08"]  # all must hold
    assert _ids(rows, "status:failed") == ["0d"]
    assert _ids(rows, "recall lr=0.01") == ["0c"]  # a word beside a condition
    assert _ids(rows, "step<300") == ["0d"]
    assert _ids(rows, "id=0000000c") == ["0c"]


def test_a_bad_condition_is_said_in_one_line_and_left_out(rows):
    params = {k for r in rows.values() for k in r.params}
    q = parse("toy acx>0.9 acc>high d=", params)
    assert q.errors == [
        "filter 'acx>0.9': no key 'acx' (a result acc/loss/plateau/step, a field preset/status/name/tag/device/id "
        "or a parameter of the runs; → completes)",
        "filter 'acc>high': > needs a number, not 'high'",
        "filter 'd=': no value after =",
    ]
    assert q.words == ["toy"] and q.conds == []
    assert not matches(rows["02"], "acx>0.9")  # the Fit and Phase panels' fields: a bad filter matches nothing


def test_completion_of_keys_and_of_the_values_a_key_takes():
    keys = {"d": ["4", "16", "64"], "T": ["8", "16", "32"], "acc": [], "preset": ["recall-lr", "toy-sweep"]}
    assert suggest("pre", keys) == "preset"
    assert suggest("toy pre", keys) == "toy preset"
    assert suggest("preset~t", keys) == "preset~toy-sweep"
    assert suggest("d=1", keys) == "d=16"
    assert suggest("d=16,", keys) == "d=16,4"  # the values not taken yet
    assert suggest("acc>0.", keys) is None and suggest("", keys) is None and suggest("zz", keys) is None


@run_async
async def test_the_runs_filter_takes_expressions_says_errors_and_completes(synthetic: Path, presets_dir: Path,
                                                                          console_errors):
    async with opened(synthetic, presets_dir, size=(80, 24)) as (app, pilot, seen):
        await pilot.press("2", "slash", *"d=16,64", "space", *"T>8")
        await pilot.pause(0.3)
        panel = app.query_one("RunsPanel")
        assert sorted(panel.visible_ids) == ["00000006", "00000007", "00000009", "0000000a"]
        await pilot.press("space", *"acx>1")
        await pilot.pause(0.3)
        summary = str(panel.query_one("#runs-summary").render())
        assert summary.startswith("filter 'acx>1': no key 'acx'") and len(panel.visible_ids) == 4
        await pilot.press(*["backspace"] * 5, "p", "r")
        await pilot.pause(0.5)
        field = panel.query_one("#run-filter")
        assert field._suggestion == "d=16,64 T>8 preset"  # completion: → takes it
        await pilot.press("right", *"~rec")
        await pilot.pause(0.5)
        assert field._suggestion == "d=16,64 T>8 preset~recall-lr"
    assert console_errors == []
