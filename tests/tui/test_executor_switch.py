"""The console offers the executor choice (issue 13: "the console offers the same when Ray is reachable"): the
command palette's "Executor: the Ray cluster" switches the next launches to Ray once the cluster answers, refuses
(a warning, nothing changed) while none does, and "Executor: this machine" switches back. No Ray is started here:
a listening socket named in Ray's address file stands in for the head (the console's check does not import Ray)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from sparse_tui.executors import ExecutorOptions
from sparse_tui.lifecycle import runner
from sparse_tui.store import RunStore

from .conftest import launch, palette, run_async, tiny_text, wait_for

pytest.importorskip("ray")  # the palette offers Ray only where it is installed (CI: the dev extra has it)


def _texts(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


@run_async
async def test_palette_switches_launches_to_ray_and_back(tmp_path: Path, monkeypatch, console_errors):
    from sparse_tui.tui.app import SparseTuiApp

    ray_tmp = tmp_path / "raytmp"
    (ray_tmp / "ray").mkdir(parents=True)
    monkeypatch.setenv("RAY_TMPDIR", str(ray_tmp))
    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "tiny.toml").write_text(tiny_text(40))
    calls: list[dict] = []

    def fake_start(store, specs, **kw):  # record the runs, start no process
        calls.append(kw)
        batch_id, ids = store.create_runs(specs)
        return batch_id, ids, 0

    monkeypatch.setattr(runner, "start_detached", fake_start)
    RunStore(tmp_path / "runs").close()  # the console asks before it creates a store (issue 21)
    app = SparseTuiApp(tmp_path / "runs", presets, gpu=False, poll_interval=0.1)
    with socket.socket() as head:
        head.bind(("127.0.0.1", 0))
        head.listen()
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.3)
            assert app.executor.kind == "local" and "ray" not in app.sub_title
            # no cluster on this machine yet: refused with the reason, launches stay here
            await palette(pilot, "Executor: the Ray cluster")
            await wait_for(pilot, lambda: any("no Ray cluster runs on this machine" in t for t in _texts(app)), 10)
            assert any(t.startswith("launches stay on this machine") for t in _texts(app)), _texts(app)
            assert app.executor.kind == "local"
            # 'ray start --head' has run (its address file names a port that answers): switched
            (ray_tmp / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{head.getsockname()[1]}")
            await palette(pilot, "Executor: the Ray cluster")
            await wait_for(pilot, lambda: app.executor.kind == "ray", 10)
            assert "ray auto" in app.sub_title
            assert any("now train on the Ray cluster (auto)" in t for t in _texts(app)), _texts(app)
            # a launch goes to Ray
            await pilot.press("1")
            await pilot.pause(0.2)
            await launch(pilot)
            await wait_for(pilot, lambda: bool(calls), 10)
            assert calls[-1]["executor"] == ExecutorOptions("ray")  # address None: auto
            # and back
            await palette(pilot, "Executor: this machine")
            await wait_for(pilot, lambda: app.executor.kind == "local", 10)
            assert "ray" not in app.sub_title
    assert len(console_errors) == 1 and "no Ray cluster runs on this machine" in console_errors[0], console_errors
