"""The phase diagram of a one-parameter sweep over seeds (e.g. blog_nembd: N x seed) shows one row per seed."""

from __future__ import annotations

from pathlib import Path

from sparse_tui.store import RunStore

from .conftest import Seen, _specs, make, run_async, wait_for


@run_async
async def test_one_parameter_sweep_uses_the_seed_as_rows(tmp_path: Path, presets_dir: Path, console_errors):
    from sparse_tui.tui.widgets.phase_diagram import PhasePanel

    runs = tmp_path / "runs"
    store = RunStore(runs)
    raw = {
        "name": "nsweep",
        "task": {"kind": "recall", "n_tokens": 8, "n_pairs": 2},
        "model": {"kind": "transformer", "n_layers": 2, "d_model": 8},
        "train": {"steps": 300, "device": "cpu"},
        "seeds": [0, 1],
        "sweep": {"model.d_model": [8, 16, 24]},
    }
    _, ids = store.create_runs(_specs(raw))
    for rid in ids:
        r = store.get(rid)
        d, seed = r.params["model.d_model"], r.params["seed"]
        plateau = None if d == 8 else float(10 * d + 7 * seed)  # N = 8 never emerges
        store.log_metrics(rid, 300, {"test/loss": 1.0, "test/acc": 0.5})
        store.finish(rid, "finished", plateau_step=plateau, step=300, summary={"final": {"test/acc": 0.5}})
    store.close()

    app = make(runs, presets_dir)
    seen = Seen()
    async with app.run_test(size=(100, 30), message_hook=seen) as pilot:
        await wait_for(pilot, lambda: seen.tables >= 1)
        await pilot.press("6")
        phase = app.query_one(PhasePanel)
        await wait_for(pilot, lambda: phase.keys == ["model.d_model", "seed"], 5)
        assert (phase.x, phase.y) == ("model.d_model", "seed")
        shown = str(phase.query_one("#phase-map").render())
        for v in ("160", "167", "240", "247"):  # one run per cell: d_model 16 / 24 x seed 0 / 1
            assert v in shown, (v, shown)
        assert "seed" in str(phase.query_one("#phase-info").render())
    assert console_errors == []
