"""The ``Executor`` interface (issue 23, item 2), driven by a no-op "dry" executor registered here only: the CLI,
the runner, ``runner.detach`` and its coordinator (``sparse-tui work``) and the console's launch path ask an
executor for the same operations (executors/base.py) and carry one ``ExecutorOptions`` value. The dry executor
trains nothing; it records what it was asked and the stacks it would form (``runner.next_stack``), so the tests
assert exactly what an executor is asked to do. docs/ARCHITECTURE.md ("A new executor") shows it as the worked
example."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Callable

import pytest
from typer.testing import CliRunner

from sparse_tui.cli import app
from sparse_tui.executors import EXECUTORS, ExecutorError, ExecutorOptions, executor_for, options
from sparse_tui.lifecycle import runner, signals
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.store import RunStore


class DryExecutor:
    """``--executor dry``: plans stacks of ``GROUP`` runs and trains none of them: each run ends ``cancelled``,
    its reason naming its stack (through ``runner.record_end``, as every run's end)."""

    GROUP = 2
    made: list["DryExecutor"] = []  # every one made, for the tests to read
    problem: str | None = None  # what ``probe`` says

    def __init__(self, options: ExecutorOptions):
        self.options = options
        self.calls: list[tuple] = []
        self.stacks: list[list[str]] = []
        DryExecutor.made.append(self)

    def probe(self) -> str | None:
        return self.problem

    def where(self) -> str:
        return "nowhere (a dry run)"

    def preflight(self, specs: list, device: str | None, source: str, *, detached: bool = False) -> None:
        self.calls.append(("preflight", len(specs), device, source, detached))

    def plan(self, specs: list, schedule: str, workers: int, device: str | None,
             say: Callable[[str], None]) -> tuple[int, int]:
        self.calls.append(("plan", len(specs), schedule, workers, device))
        say(f"dry: stacks of up to {self.GROUP} run(s)")
        return max(1, workers), self.GROUP

    def describe(self, workers: int) -> str:
        return "the dry executor"

    def run_batch(self, store, batch_id: str, *, workers: int, device: str | None, flag, poll, group: int) -> None:
        self.calls.append(("run_batch", batch_id, workers, device, group))
        queued = store.runs(batch_id=batch_id, status="queued", reap=False)
        cfgs, _ = runner.stored_configs(queued)
        while queued and not flag():  # the stacks any executor forms, by the one rule
            pick = runner.next_stack(queued, cfgs, group, None)
            self.stacks.append(pick)
            for run_id in pick:
                runner.record_end(store, run_id, "cancelled", reason=f"dry run: stack {len(self.stacks)}")
            queued = [r for r in queued if r.run_id not in pick]


@pytest.fixture
def dry(monkeypatch):
    """The dry executor registered under ``dry`` for one test (one registry entry, as a new executor would be)."""
    monkeypatch.setitem(EXECUTORS, "dry", DryExecutor)
    monkeypatch.setattr(DryExecutor, "made", [])
    monkeypatch.setattr(DryExecutor, "problem", None)
    return DryExecutor


@pytest.fixture
def no_spawn(monkeypatch):
    """``runner.detach`` starts no process: the command lines it would run are collected."""
    started: list[list[str]] = []

    def popen(cmd, **kw):
        started.append(list(cmd))
        return SimpleNamespace(pid=os.getpid())  # alive: the batch's coordinator is not reaped

    monkeypatch.setattr(runner.subprocess, "Popen", popen)
    return started


SWEEP = ["seeds=[0, 1, 2]"]  # three runs of one shape: stacks of two and one


def test_run_headless_asks_the_executor_for_each_operation(dry, tiny_preset, tmp_path):
    runs_dir = tmp_path / "runs"
    r = CliRunner().invoke(app, ["run", str(tiny_preset), "--headless", "--runs-dir", str(runs_dir), "--set",
                                 SWEEP[0], "--executor", "dry", "--workers", "3", "--schedule", "stacked"])
    assert r.exit_code == 0, r.output
    (ex,) = dry.made
    assert ex.options == ExecutorOptions("dry")
    store = RunStore(runs_dir)
    runs = sorted(store.runs(), key=lambda rec: rec.position)
    batch = runs[0].batch_id
    assert ex.calls == [("preflight", 3, None, "tiny.toml", False), ("plan", 3, "stacked", 3, None),
                        ("run_batch", batch, 3, None, 2)]
    assert ex.stacks == [[runs[0].run_id, runs[1].run_id], [runs[2].run_id]]
    assert "dry: stacks of up to 2 run(s)" in r.output and "3 run(s), the dry executor" in r.output
    assert [(rec.status, rec.reason, rec.step) for rec in runs] == [("cancelled", "dry run: stack 1", 0)] * 2 + [
        ("cancelled", "dry run: stack 2", 0)]  # trained nothing
    assert not store.other_coordinators_alive(batch)  # the runner's lifecycle: this process coordinated, then left


def test_a_refused_preflight_writes_nothing(dry, tiny_preset, tmp_path, monkeypatch):
    def refuse(self, specs, device, source, *, detached=False):
        raise ExecutorError("--executor dry: refused")

    monkeypatch.setattr(DryExecutor, "preflight", refuse)
    runs_dir = tmp_path / "runs"
    for cmd in (["--headless"], ["--detach"]):
        r = CliRunner().invoke(app, ["run", str(tiny_preset), *cmd, "--runs-dir", str(runs_dir), "--executor", "dry"])
        assert r.exit_code == 2 and r.output.strip() == "error: --executor dry: refused"
    assert not runs_dir.exists()


def test_the_registry_names_the_executors(dry, tiny_preset, tmp_path):
    r = CliRunner().invoke(app, ["run", str(tiny_preset), "--headless", "--executor", "slurm"])
    assert r.exit_code == 2 and r.output.strip() == "error: --executor: must be one of local, ray, dry, got 'slurm'"
    assert type(executor_for(options())).__name__ == "LocalExecutor"
    with pytest.raises(ExecutorError, match="--ray-address: only with --executor ray"):
        options("dry", {"--ray-address": "auto"})


def test_options_travel_to_the_detached_coordinator(dry, no_spawn, tiny_preset, tmp_path):
    """``run --detach --executor dry``: the launcher preflights for a detached batch, records the runs and starts
    ``sparse-tui work`` with the options as flags; that coordinator, run here, gets the same options back and
    trains the batch through the executor."""
    runs_dir = tmp_path / "runs"
    r = CliRunner().invoke(app, ["run", str(tiny_preset), "--detach", "--runs-dir", str(runs_dir), "--set", SWEEP[0],
                                 "--executor", "dry"])
    assert r.exit_code == 0, r.output
    (launcher,) = dry.made
    assert launcher.calls == [("preflight", 3, None, "tiny.toml", True)]
    (cmd,) = no_spawn
    batch = cmd[cmd.index("work") + 1]
    assert cmd[-2:] == ["--executor", "dry"]
    r = CliRunner().invoke(app, cmd[cmd.index("work"):])
    assert r.exit_code == 0, r.output
    coordinator = dry.made[1]
    assert coordinator.options == launcher.options == ExecutorOptions("dry")
    assert coordinator.calls == [("preflight", 3, None, f"batch {batch}", False), ("plan", 3, "auto", 0, None),
                                 ("run_batch", batch, 1, None, 2)]
    assert [len(s) for s in coordinator.stacks] == [2, 1]


@pytest.mark.parametrize("opts,flags", [
    (ExecutorOptions(), []),
    (ExecutorOptions("ray"), ["--executor", "ray"]),
    (ExecutorOptions("ray", (("--ray-address", "head:6379"),)), ["--executor", "ray", "--ray-address", "head:6379"]),
])
def test_options_are_their_flags(opts, flags, no_spawn, tiny_preset, tmp_path):
    """What ``runner.detach`` hands the coordinator is what the user's flags give back (``options``)."""
    store = RunStore(tmp_path / "runs")
    runner.start_detached(store, expand(load_preset(tiny_preset)), executor=opts)
    cmd = no_spawn[0]
    assert cmd[cmd.index("--schedule") + 2:] == flags
    address = flags[flags.index("--ray-address") + 1] if "--ray-address" in flags else None
    assert options(flags[1] if flags else "local", {"--ray-address": address}) == opts


def test_a_stopped_batch_ends_its_queued_runs_whatever_the_executor(dry, tiny_preset, tmp_path):
    store = RunStore(tmp_path / "runs")
    batch, ids = store.create_runs(expand(load_preset(tiny_preset, SWEEP)))
    ex = executor_for(ExecutorOptions("dry"))
    runner.run_batch(store, batch, ex, flag=signals.StopFlag("interrupted"))
    assert ex.calls == [("run_batch", batch, 1, None, 1)] and ex.stacks == []
    assert {(r.status, r.reason) for r in store.runs()} == {("interrupted", "never started")}


def test_the_console_launches_through_the_executor(dry, no_spawn, tiny_preset, tmp_path):
    """The console's launch path (tui/actions.py): the executor's probe refuses (one line, nothing recorded) or the
    batch starts detached with the console's options; the question names where it trains."""
    from sparse_tui.tui import actions

    loaded, opts = load_preset(tiny_preset), ExecutorOptions("dry")
    assert "on nowhere (a dry run)?" in actions.launch_question(loaded, opts)
    store = RunStore(tmp_path / "runs")
    dry.problem = "--executor dry: not today"
    with pytest.raises(ExecutorError, match="not today"):
        actions.launch(store, loaded, executor=opts)
    assert store.runs() == [] and no_spawn == []
    dry.problem = None
    done = actions.launch(store, loaded, executor=opts)
    assert done.run_ids == [r.run_id for r in store.runs()] and no_spawn[0][-2:] == ["--executor", "dry"]


def test_the_architecture_doc_example_runs_as_shown(tiny_preset, tmp_path, monkeypatch):
    """docs/ARCHITECTURE.md's "A new executor" shows a dry executor; that code, as the page shows it, registered as
    one entry, takes a batch through ``runner.run_headless``: its stacks are claimed (``runner.claim_next_stack``)
    and every run ends ``cancelled``, untrained."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "ARCHITECTURE.md").read_text()
    section = doc.split("### A new executor", 1)[1].split("\n### ", 1)[0]
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "class DryExecutor" in b]
    scope = {"runner": runner, "ExecutorOptions": ExecutorOptions}
    exec(compile(code, "ARCHITECTURE.md", "exec"), scope)  # our own page, not user input
    monkeypatch.setitem(EXECUTORS, "dry", scope["DryExecutor"])
    store = RunStore(tmp_path / "runs")
    said: list[str] = []
    batch, ids, stopped = runner.run_headless(store, executor_for(ExecutorOptions("dry")),
                                              expand(load_preset(tiny_preset, SWEEP)), say=said.append)
    runs = store.runs(batch_id=batch)
    assert said[0] == "dry: stacks of up to 2 run(s)" and "3 run(s), the dry executor, stacks of up to 2" in said[1]
    assert sorted(ids) == sorted(r.run_id for r in runs) and stopped is None
    assert {(r.status, r.reason, r.device) for r in runs} == {("cancelled", "dry run", "nowhere")}
