"""The executor flags as a user meets them, without a Ray cluster (issue 13): bad values, Ray not installed and a
bad address are usage errors (exit 2, one line, no traceback, no store written); ``--executor local`` is the
default and unchanged; the record channel (executors/channel.py) stores exactly what the local path stores, and
blocks a worker when it is full."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparse_tui.cli import app
from sparse_tui.executors import ExecutorOptions
from sparse_tui.executors.channel import Channel, ChannelSink, apply
from sparse_tui.lifecycle import runner
from sparse_tui.presets.loading import config_from_json, expand, load_preset
from sparse_tui.store import RunStore

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}

FLAG_CASES = [
    ("executor-unknown", ["--executor", "slurm"], "--executor: must be one of local, ray, got 'slurm'"),
    ("address-without-ray", ["--ray-address", "auto"], "--ray-address: only with --executor ray"),
    ("address-no-port", ["--executor", "ray", "--ray-address", "head"],
     "--ray-address: must be auto, local or HOST:PORT, got 'head'"),
    ("address-bad-port", ["--executor", "ray", "--ray-address", "head:99999"],
     "--ray-address: must be auto, local or HOST:PORT, got 'head:99999'"),
    ("address-empty-host", ["--executor", "ray", "--ray-address", ":6379"],
     "--ray-address: must be auto, local or HOST:PORT, got ':6379'"),
]


@pytest.mark.parametrize("cmd", ["run", "resume"])
@pytest.mark.parametrize("case,flags,line", FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_bad_executor_flags_exit_2_one_line(case, flags, line, cmd, tiny_preset, tmp_path):
    runs_dir = tmp_path / "runs"
    first = [str(tiny_preset), "--headless"] if cmd == "run" else ["abc"]
    r = CliRunner().invoke(app, [cmd, *first, "--runs-dir", str(runs_dir), *flags])
    assert r.exit_code == 2, r.output
    assert r.output.strip() == f"error: {line}"
    assert not runs_dir.exists()


def test_executor_ray_without_ray_says_how_to_install(tiny_preset, tmp_path):
    """Ray absent (its import fails): exit 2, one line with the pip command, nothing written."""
    runs_dir = tmp_path / "runs"
    code = ("import sys; sys.modules['ray'] = None; from sparse_tui.cli import main; "
            f"sys.argv = ['sparse-tui', 'run', {str(tiny_preset)!r}, '--headless', '--runs-dir', {str(runs_dir)!r},"
            " '--executor', 'ray']; main()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=ENV)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == 'error: --executor ray: Ray is not installed; pip install "sparse-tui[ray]"'
    assert r.stdout == "" and not runs_dir.exists()


def test_dry_run_with_ray_executor_needs_no_cluster(tiny_preset):
    r = CliRunner().invoke(app, ["run", str(tiny_preset), "--dry-run", "--executor", "ray"])
    assert r.exit_code == 0 and "tiny: 1 run(s)" in r.output


class _Direct:
    """The coordinator's side of the channel, in-process: each message is applied to ``store`` at once."""

    def __init__(self, store: RunStore):
        self.store, self.messages = store, 0

    def __call__(self, message: list):
        self.messages += 1
        for record in message:
            apply(self.store, record)
        return None, []


def test_channel_records_equal_the_local_store_writes(tiny_preset, tmp_path):
    """A run trained through the worker's path (``runner.train_claimed`` writing to a ``ChannelSink``, its records
    applied by the coordinator's ``apply``) leaves the store exactly as the local path does: metrics, attention
    snapshots, final metrics, plateau step; its checkpoint reaches the head's store and is removed at the end."""
    opts = ["train.steps=60", "eval.every=10", "train.checkpoint_every=20", "seeds=[2]"]
    ref = RunStore(tmp_path / "local")
    rb, (rid_ref,) = ref.create_runs(expand(load_preset(tiny_preset, opts)))
    runner.work(ref, rb)

    store = RunStore(tmp_path / "head")
    batch, (rid,) = store.create_runs(expand(load_preset(tiny_preset, opts)))
    (rec,) = store.claim_runs([rid], device="cpu", versions={})
    seen = []

    def put(message):
        seen.extend(r[0] for r in message)
        return direct(message)

    direct = _Direct(store)
    import torch

    sink = ChannelSink(put, str(store.runs_dir))
    runner.train_claimed(sink, [rec], [config_from_json(rec.config)], torch.device("cpu"), sink.should_stop)
    sink.flush()
    got, want = store.get(rid), ref.get(rid_ref)
    assert got.status == "finished" and store.metrics(rid) == ref.metrics(rid_ref)
    assert got.final == want.final and got.plateau_step == want.plateau_step
    assert store.attention_steps(rid) == ref.attention_steps(rid_ref)
    a, b = store.attention(rid, 60), ref.attention(rid_ref, 60)
    assert a[1] == b[1] and all((a[0][k] == b[0][k]).all() for k in b[0])
    # the run is recorded as soon as it ends (runner.train_claimed), then its checkpoint goes
    assert seen.count("checkpoint") == 3 and seen[-2:] == ["finish", "checkpoint_remove"]
    assert not list((store.runs_dir / "checkpoints").iterdir())
    assert direct.messages < 20  # records travel in batches, not one call each


def test_channel_blocks_a_full_put_until_the_coordinator_takes():
    """Backpressure: with the channel full, a worker's put waits; the coordinator's take frees it, and the answer
    carries the coordinator's stop and cancels."""

    async def scenario():
        ch = Channel(capacity=2)
        await ch.put(["a"])
        await ch.put(["b"])
        waiting = asyncio.ensure_future(ch.put(["c"]))
        await asyncio.sleep(0.05)
        assert not waiting.done() and len(ch.items) == 2
        await ch.control("interrupted", ["r1"])
        assert await ch.take() == [["a"], ["b"]]
        answer = await asyncio.wait_for(waiting, 5)
        assert answer == ("interrupted", ["r1"])
        assert await ch.take() == [["c"]]

    asyncio.run(scenario())


def test_sink_sees_stop_and_cancel_at_its_next_message():
    sent = []

    def put(message):
        sent.append(message)
        return "interrupted", ["r2"]

    sink = ChannelSink(put, "/head/runs")
    assert sink.should_stop() is None
    assert sink.heartbeat("r1", 5) is False  # buffered: no message yet
    sink.finish("r1", "finished", step=5)  # a run's end is sent at once
    assert sent and sink.should_stop() == "interrupted" and sink.heartbeat("r2", 6) is True
    assert sink.get("r1").step == 5


def test_local_executor_is_the_default_and_unchanged(tiny_preset, tmp_path):
    r = CliRunner().invoke(app, ["run", str(tiny_preset), "--headless", "--runs-dir", str(tmp_path / "a"),
                                 "--executor", "local"])
    assert r.exit_code == 0, r.output
    (rec,) = RunStore(tmp_path / "a").runs()
    assert rec.status == "finished" and "worker_pid" not in rec.versions


def test_console_launches_through_the_chosen_executor(tiny_preset, tmp_path, monkeypatch):
    """The console (``sparse-tui --executor ray``) launches through ``runner.start_detached`` with the executor,
    says so in its header, and refuses a launch (one line, nothing recorded) while the cluster is unreachable."""
    import asyncio
    import logging

    from sparse_tui.tui.app import SparseTuiApp

    calls = []

    def fake_start(store, specs, **kw):  # record the runs, start no process
        calls.append(kw)
        batch_id, ids = store.create_runs(specs)
        return batch_id, ids, 0

    monkeypatch.setattr(runner, "start_detached", fake_start)
    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "tiny.toml").write_text(tiny_preset.read_text())

    class Errors(logging.Handler):  # what the console reported (its sparse_tui.tui logger)
        def __init__(self) -> None:
            super().__init__(logging.WARNING)
            self.texts: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.texts.append(record.getMessage())

    async def launch(address: str, runs_dir: Path) -> list[str]:
        errors = Errors()
        logging.getLogger("sparse_tui.tui").addHandler(errors)
        RunStore(runs_dir).close()  # the console asks before it creates a store (issue 21)
        app = SparseTuiApp(runs_dir, presets, gpu=False, poll_interval=0.1,
                           executor=ExecutorOptions("ray", (("--ray-address", address),)))
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause(0.5)
            assert f"ray {address}" in app.sub_title
            await pilot.press("1")
            await pilot.pause(0.2)
            await pilot.press("ctrl+l")
            for _ in range(100):  # a launch asks first
                await pilot.pause(0.1)
                if type(app.screen).__name__ == "ConfirmScreen":
                    break
            await pilot.press("y")
            for _ in range(100):
                await pilot.pause(0.1)
                if errors.texts or calls:
                    break
        logging.getLogger("sparse_tui.tui").removeHandler(errors)
        return errors.texts

    errors = asyncio.run(launch("127.0.0.1:1", tmp_path / "a"))
    assert calls == [] and RunStore(tmp_path / "a").runs() == []
    assert errors == ["ExecutorError: --ray-address: cannot reach a Ray cluster at 127.0.0.1:1 (Connection refused)"]
    errors = asyncio.run(launch("local", tmp_path / "b"))
    assert errors == [] and calls and calls[0]["executor"] == ExecutorOptions("ray", (("--ray-address", "local"),))
    assert len(RunStore(tmp_path / "b").runs()) == 1


def test_console_with_an_unreachable_cluster_exits_2(tiny_preset, tmp_path):
    r = CliRunner().invoke(app, ["--runs-dir", str(tmp_path / "runs"), "--executor", "ray", "--ray-address",
                                 "127.0.0.1:1"])
    assert r.exit_code == 2
    assert r.output.strip() == "error: --ray-address: cannot reach a Ray cluster at 127.0.0.1:1 (Connection refused)"
    r = CliRunner().invoke(app, ["run", str(tiny_preset), "--executor", "ray", "--ray-address", "127.0.0.1:1"])
    assert r.exit_code == 2 and "cannot reach a Ray cluster" in r.output
