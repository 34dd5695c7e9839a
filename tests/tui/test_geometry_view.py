"""The console's Attention panel shows a run's final token embedding under its map (blog 3's geometry view), drawn
from the stored snapshot; a run without one shows the map alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sparse_tui.store import RunStore
from sparse_tui.tui.render.geometry import render_geometry

from .conftest import Seen, make, run_async, to_run, wait_for
from .test_stale_state import _started


def test_render_places_each_token_by_its_coordinates():
    E = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    text = render_geometry(E, width=20, height=4).plain
    head, *rows = text.split("\n")
    assert "n_embd 2, drawn itself" in head and "rho" in head
    assert len(rows) == 4
    assert rows[0].startswith("2") and rows[0].rstrip().endswith("3")  # y = 1: the top row
    assert rows[3].startswith("0") and rows[3].rstrip().endswith("1")
    assert not "".join(rows[1:3]).strip()


@run_async
async def test_attention_panel_shows_the_stored_embedding(synthetic: Path, presets_dir: Path, console_errors):
    store = RunStore(synthetic)
    rid = next(r.run_id for r in store.runs() if r.preset == "recall-lr" and r.status == "finished")
    store.log_array(rid, "embed", np.column_stack([np.arange(8.0), np.zeros(8)]))  # 8 tokens on a line
    store.close()
    app = make(synthetic, presets_dir)
    seen = Seen()
    async with app.run_test(size=(100, 50), message_hook=seen) as pilot:
        await _started(pilot, seen)
        await to_run(pilot, "recall-lr", "finished")
        await pilot.press("t")
        ap = app.query_one("AttentionPanel")
        await wait_for(pilot, lambda: ap.steps, 10)
        body = app.query_one("#attn-map")
        await wait_for(pilot, lambda: "final token embedding" in str(body.content), 10)
        shown = str(body.content)
        assert "n_embd 2, drawn itself: rho 1.00" in shown and "100% of tokens nearest a numerical neighbour" in shown
        assert "0" in shown.split("final token embedding")[1] and "7" in shown.split("final token embedding")[1]
        await to_run(pilot, "recall-lr", "failed")  # no embedding stored: the map alone
        await pilot.press("t")
        await pilot.pause(0.5)
        assert "final token embedding" not in str(body.content)
    assert console_errors == []
