"""``u`` in the Runs panel resumes the selected run through resume.resume_runs_detached (issue 11: "The console offers
the same" as ``sparse-tui resume``), and refuses runs that cannot be resumed."""

from __future__ import annotations

from pathlib import Path

from sparse_tui.lifecycle import resume, runner
from sparse_tui.store import RunStore
from sparse_tui.tui.widgets.run_table import RunsPanel

from .conftest import opened, run_async, wait_for


def _texts(app) -> list[str]:
    return [n.message for n in app._notifications]


async def _select(pilot, run_id: str) -> None:
    panel = pilot.app.query_one(RunsPanel)
    panel.table.move_cursor(row=panel.shown.index(run_id), animate=False)
    await pilot.pause(0.2)
    assert pilot.app.main.current == run_id


@run_async
async def test_u_resumes_a_failed_run_and_refuses_a_finished_one(synthetic: Path, presets_dir: Path, monkeypatch,
                                                                   console_errors):
    started: list[tuple[str, int]] = []

    def fake_detach(store, batch_id, *, workers=0, device=None, group=0, schedule="auto", executor=None):
        started.append((batch_id, workers))  # no training process in this test: the re-queue is what we check
        return 4242

    monkeypatch.setattr(runner, "detach", fake_detach)
    failed, finished = "0000000d", "0000000c"
    before = RunStore(synthetic).get(failed)
    assert before.status == "failed" and RunStore(synthetic).get(finished).status == "finished"
    async with opened(synthetic, presets_dir) as (app, pilot, seen):
        await pilot.press("2")
        await pilot.pause(0.2)
        # a finished run: refused, nothing re-queued, nothing started
        await _select(pilot, finished)
        await pilot.press("u")
        await pilot.pause(0.3)
        assert started == []
        assert any("cannot resume (finished)" in t for t in _texts(app)), _texts(app)
        assert RunStore(synthetic).get(finished).status == "finished"
        # the failed run: re-queued in its own batch and handed to a detached coordinator
        await _select(pilot, failed)
        await pilot.press("u")
        await wait_for(pilot, lambda: any(t.startswith("resuming 1 run(s)") for t in _texts(app)), 10)
        assert started == [(before.batch_id, 0)]
        assert any(f"batch {before.batch_id} pid 4242" in t for t in _texts(app))
        rec = RunStore(synthetic).get(failed)
        assert rec.status == "queued"
        await wait_for(pilot, lambda: any(r.run_id == failed and r.status == "queued" for r in app.main.records), 10)
        assert app.main.current == failed  # the resumed run stays under the cursor
    assert console_errors == []


def test_resume_runs_detached_groups_by_batch_and_refuses_finished(synthetic: Path, monkeypatch):
    calls = []
    monkeypatch.setattr(runner, "detach", lambda store, b, **kw: calls.append(b) or 7)
    store = RunStore(synthetic)
    import pytest

    from sparse_tui.store import StoreError

    with pytest.raises(StoreError, match="nothing to resume.*finished"):
        resume.resume_runs_detached(store, ["0000000c", "00000002"])
    assert calls == []
    out = resume.resume_runs_detached(store, ["0000000c", "0000000d"])  # the finished one is left alone
    assert [(ids, pid) for _, ids, pid in out] == [(["0000000d"], 7)]
    assert store.get("0000000c").status == "finished" and store.get("0000000d").status == "queued"
