"""The run lifecycle in one place (issue 19): ``runner.train_claimed`` records how each run ends, once; a terminal
status is never rewritten (``store.finish`` refuses); a stack interrupted mid-step or mid-evaluation keeps the
records of its members that had already ended; a full disk in a stack is recorded as such, stops the batch and says
truthfully what could not be recorded; a batch has several coordinators; one resolver of ids; checkpoints are
data, never code."""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import read_only_copy

from sparse_tui.executors import LocalExecutor
from sparse_tui.lifecycle import resume, runner, signals
from sparse_tui.presets.loading import RunSpec
from sparse_tui.presets.schema import RunConfig
from sparse_tui.store import RunStore

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}

SGD = {
    "task": {"kind": "recall", "n_tokens": 8, "n_pairs": 3},
    "model": {"kind": "transformer", "n_layers": 2, "n_heads": 1, "d_model": 16},
    "train": {"optimizer": "sgd", "lr": 0.5, "batch_size": 16, "steps": 40, "device": "cpu"},
    "eval": {"every": 5, "test_size": 32},
    "plateau": {"metric": "test/acc", "mode": "above", "value": 0.99},
}


def cfg(**dotted) -> RunConfig:
    import copy

    raw = copy.deepcopy(SGD)
    for key, v in dotted.items():
        node = raw
        *path, last = key.split("__")
        for p in path:
            node = node.setdefault(p, {})
        node[last] = v
    return RunConfig.model_validate(raw)


def batch_of(store: RunStore, cfgs: list[RunConfig]) -> tuple[str, list[str]]:
    return store.create_runs([RunSpec("t", "t.toml", c, {"seed": c.seed}) for c in cfgs])


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# -- a terminal status is never rewritten ---------------------------------------------------------------------------


def test_finish_refuses_to_rewrite_a_terminal_status(tmp_path):
    store = RunStore(tmp_path / "runs")
    _, (rid,) = batch_of(store, [cfg()])
    assert store.finish(rid, "finished", reason=None, plateau_step=35.0, summary={"final": {"test/loss": 0.1}}, step=40)
    before = store.get(rid)
    for status in ("interrupted", "failed", "cancelled", "diverged", "finished"):
        assert store.finish(rid, status, reason="again", summary={}, step=50) is False
    after = store.get(rid)
    assert after.to_dict() == before.to_dict()
    # resume is the one way back: requeue, then a new end
    assert store.requeue([rid]) == []  # finished is not resumable
    _, (other,) = batch_of(store, [cfg()])
    assert store.finish(other, "interrupted", reason="interrupted at step 3", step=3)
    assert store.requeue([other]) == [other]
    assert store.finish(other, "finished", step=40) and store.get(other).status == "finished"


# -- a stack interrupted with members already ended -----------------------------------------------------------------

ENDED_MEMBERS = [
    # (name, config, the record it must keep)
    ("diverged", dict(seed=1, train__lr=1e6), ("diverged", "non-finite training loss at step")),
    ("plateau-stop", dict(seed=2, plateau__metric="test/loss", plateau__mode="below", plateau__value=1e9,
                          plateau__stop_after=0), ("finished", "stopped at step 5, 5 steps after its plateau")),
    ("cancelled", dict(seed=3), ("cancelled", "cancelled at step 1")),
]


def _stop_when_others_ended(store, ids, survivor):
    """A function that raises KeyboardInterrupt (what the alarm's ``StopNow`` is) the first time it is called
    after every member but ``survivor`` has ended."""
    state = {"raised": False}

    def maybe_interrupt():
        if not state["raised"] and all(store.get(i).status not in ("queued", "running")
                                       for i in ids if i != survivor):
            state["raised"] = True
            raise signals.StopNow()

    return maybe_interrupt


@pytest.mark.parametrize("where", ["step", "evaluation"])
def test_stack_interrupted_keeps_the_records_of_members_already_ended(tmp_path, monkeypatch, where):
    """Issue 19: an interrupt during a long step or evaluation of a stack whose other members had ended (diverged,
    stopped after their plateau, cancelled) records the survivor interrupted and leaves the others' status,
    reason, summary and plateau step as they were recorded."""
    from sparse_tui.training import optim, runlog, tracker

    monkeypatch.setattr(runlog, "HEARTBEAT_SECONDS", 0.0)  # the cancel is seen at step 1
    store = RunStore(tmp_path / "runs")
    cfgs = [cfg(seed=0)] + [cfg(**kw) for _, kw, _ in ENDED_MEMBERS]
    _, ids = batch_of(store, cfgs)
    survivor = ids[0]
    recs = store.claim_runs(ids, device="cpu", versions={})
    store.con.execute("UPDATE runs SET cancel_requested=1 WHERE run_id=?", (ids[3],))
    first_records = {}
    real_finish = RunStore.finish

    def finish(self, run_id, status, **kw):
        wrote = real_finish(self, run_id, status, **kw)
        if wrote:
            first_records.setdefault(run_id, self.get(run_id).to_dict())
        return wrote

    monkeypatch.setattr(RunStore, "finish", finish)
    stop = _stop_when_others_ended(store, ids, survivor)
    if where == "step":
        real_step = optim.StackOptimizer.step

        def step(self, *a, **kw):
            stop()
            return real_step(self, *a, **kw)

        monkeypatch.setattr(optim.StackOptimizer, "step", step)
    else:
        real_eval = tracker.evaluate

        def evaluate(*a, **kw):
            stop()
            return real_eval(*a, **kw)

        monkeypatch.setattr(tracker, "evaluate", evaluate)
    with pytest.raises(KeyboardInterrupt):
        runner.train_claimed(store, recs, cfgs, torch.device("cpu"), None)
    for rid, (name, _, (status, reason)) in zip(ids[1:], ENDED_MEMBERS):
        rec = store.get(rid)
        assert rec.status == status and rec.reason.startswith(reason), (name, rec.status, rec.reason)
        assert rec.to_dict() == first_records[rid], name  # nothing rewritten
        assert rec.summary["final"], name
    assert store.get(ids[2]).plateau_step == 0.0
    alive = store.get(survivor)
    assert alive.status == "interrupted" and alive.reason == f"interrupted at step {alive.step}", alive.reason
    assert alive.step >= 5  # it trained on after the plateau member stopped


# -- a full disk in a stack -----------------------------------------------------------------------------------------


def _disk_full_from_step(monkeypatch, step: int, finish_too: bool = False, error=None):
    real = RunStore.log_metrics

    def log_metrics(self, run_id, s, metrics):
        if s >= step:
            raise error or sqlite3.OperationalError("database or disk is full")
        return real(self, run_id, s, metrics)

    monkeypatch.setattr(RunStore, "log_metrics", log_metrics)
    if finish_too:
        def finish(self, *a, **kw):
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(RunStore, "finish", finish)


@pytest.mark.parametrize("finish_fails,error", [(False, None), (True, None), (True, RuntimeError("boom"))],
                         ids=["recorded", "not-recordable", "crash-then-not-recordable"])
def test_full_disk_in_a_stack_is_recorded_and_stops_the_batch(tmp_path, monkeypatch, finish_fails, error):
    """Issue 19: a stack meets a full disk as a single run does: its runs are recorded failed with 'disk full at
    step N' (everything logged before is kept), the batch stops (the run of another shape is not trained) and the
    message says which runs, if any, the disk did not let it record (also when what failed first was not the
    disk: the fault drill's checkpoint write)."""
    store = RunStore(tmp_path / "runs")
    cfgs = [cfg(seed=0), cfg(seed=1), cfg(seed=2, train__steps=30)]  # the third: another stack
    batch, ids = batch_of(store, cfgs)
    _disk_full_from_step(monkeypatch, 15, finish_too=finish_fails, error=error)
    with pytest.raises(runner.DiskFull) as got:
        runner.run_batch(store, batch, LocalExecutor(), group=8)
    msg = str(got.value)
    monkeypatch.undo()
    assert "disk full" in msg and f"sparse-tui resume {batch}" in msg
    for rid in ids[:2]:
        rec = store.get(rid)
        assert store.metrics(rid)["test/loss"][0] == [0, 5, 10]  # everything logged before is kept
        if finish_fails:
            assert rec.status == "running"  # the disk allowed no record: readers reap it once we are gone
        else:
            assert rec.status == "failed" and rec.reason == "disk full at step 10", rec.reason
    if finish_fails:
        assert "2 run(s) could not be recorded" in msg and ids[0] in msg and "recorded as failed" not in msg
    else:
        assert "recorded as failed" in msg and "could not" not in msg
        third = store.get(ids[2])
        assert third.status == "failed" and third.reason == "never started: disk full"
        assert store.metrics(ids[2]) == {}


# -- several coordinators -------------------------------------------------------------------------------------------


@pytest.fixture
def live_process():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield p
    p.kill()
    p.wait()


def test_a_killed_resume_does_not_orphan_the_live_coordinators_queued_runs(tmp_path, live_process):
    """Issue 19: a batch whose coordinator is alive is resumed (a failed run re-queued) by a process that is then
    killed: the queued runs stay queued while the first coordinator lives, and are failed once none is alive."""
    store = RunStore(tmp_path / "runs")
    batch, ids = store.create_runs([RunSpec("t", "t.toml", cfg(seed=s), {"seed": s}) for s in range(3)],
                                   coordinator=live_process.pid)
    store.claim_runs([ids[0]], device="cpu", versions={})
    store.finish(ids[0], "failed", reason="boom")
    assert runner.requeue_for_resume(store, batch, [ids[0]], coordinator=dead_pid()) == [ids[0]]
    assert store.reap() == [] and {r.status for r in store.runs()} == {"queued"}
    live_process.kill()
    live_process.wait()
    assert sorted(store.reap()) == sorted(ids)
    assert all(r.reason.startswith("never started: its coordinator") for r in store.runs())


def test_an_interrupted_coordinator_leaves_the_queue_to_a_live_one(tmp_path, live_process):
    """Ctrl-C of one coordinator of a batch ends its queued runs only when no other coordinator is alive."""
    store = RunStore(tmp_path / "runs")
    batch, ids = store.create_runs([RunSpec("t", "t.toml", cfg(seed=s), {"seed": s}) for s in range(2)])
    store.add_coordinator(batch, live_process.pid)
    runner.run_batch(store, batch, LocalExecutor(), flag=signals.StopFlag("interrupted"))
    assert [r.status for r in store.runs()] == ["queued", "queued"]
    live_process.kill()
    live_process.wait()
    runner.run_batch(store, batch, LocalExecutor(), flag=signals.StopFlag("interrupted"))
    assert {(r.status, r.reason) for r in store.runs()} == {("interrupted", "never started")}


# -- one resolver of ids and prefixes -------------------------------------------------------------------------------


def _store_with_ids(tmp_path: Path, runs: list[tuple[str, str, str]]) -> Path:
    """A store whose runs have the given (run_id, batch_id, status)."""
    store = RunStore(tmp_path / "runs")
    for run_id, batch_id, status in runs:
        _, (rid,) = batch_of(store, [cfg()])
        store.con.execute("UPDATE runs SET run_id=?, batch_id=?, status=? WHERE run_id=?",
                          (run_id, batch_id, status, rid))
    store.close()
    return tmp_path / "runs"


RESOLVER_CASES = [
    # (case, runs (run_id, batch_id, status), argv, expected fragment of the one line)
    ("resume-empty", [("aaaa0001", "bbb001", "failed")], ["resume", ""], "run or batch id: must not be empty"),
    ("resume-batch-and-run-prefix", [("b0000001", "c00001", "failed"), ("a0000001", "b00001", "failed")],
     ["resume", "b"], "'b' is ambiguous: it starts run b0000001, batch b00001"),
    ("resume-three-runs", [("c0000001", "e00001", "failed"), ("c0000002", "e00001", "failed"),
                           ("c0000003", "e00001", "failed")], ["resume", "c"],
     "'c' is ambiguous: it starts run c0000001, run c0000002, run c0000003"),
    ("resume-unknown", [("c0000001", "e00001", "failed")], ["resume", "f"], "no run or batch 'f'"),
    ("show-ambiguous", [("c0000001", "e00001", "failed"), ("c0000002", "e00001", "failed")], ["show", "c"],
     "run id 'c' is ambiguous: it starts run c0000001, run c0000002"),
    ("export-empty", [("c0000001", "e00001", "failed")], ["export", ""], "run id: must not be empty"),
    ("fit-batch-ambiguous", [("c0000001", "e00001", "failed"), ("c0000002", "e00002", "failed")],
     ["fit", "--batch", "e"], "--batch 'e' is ambiguous: it starts batch e00001, batch e00002"),
    ("fit-batch-unknown", [("c0000001", "e00001", "failed")], ["fit", "--batch", "x"], "no batch 'x'"),
]


@pytest.mark.parametrize("case,runs,argv,expected", RESOLVER_CASES, ids=[c[0] for c in RESOLVER_CASES])
def test_one_resolver_for_ids_and_prefixes(case, runs, argv, expected, tmp_path):
    from typer.testing import CliRunner

    from sparse_tui.cli import app

    runs_dir = _store_with_ids(tmp_path, runs)
    res = CliRunner().invoke(app, argv + ["--runs-dir", str(runs_dir)])
    assert res.exit_code == 2, (res.exit_code, res.output)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], lines


def test_an_exact_id_wins_over_a_prefix(tmp_path):
    runs_dir = _store_with_ids(tmp_path, [("abc12345", "abc123", "failed"), ("abc12399", "abc123", "failed")])
    store = RunStore(runs_dir)
    assert store.find("abc123", ("run", "batch")) == ("batch", "abc123")
    assert store.find("abc12345", ("run", "batch")) == ("run", "abc12345")
    batch, ids = resume.resume_targets(store, "abc123")
    assert batch == "abc123" and sorted(ids) == ["abc12345", "abc12399"]


# -- resume refuses what it cannot do, in one line ------------------------------------------------------------------


def _cli(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def _interrupted_run(tmp_path: Path, steps: int = 20) -> tuple[RunStore, str]:
    store = RunStore(tmp_path / "runs")
    _, (rid,) = batch_of(store, [cfg(train__steps=steps)])
    store.claim_runs([rid], device="cpu", versions={})
    store.finish(rid, "interrupted", reason="interrupted at step 3", step=3)
    return store, rid


def test_resume_of_a_run_whose_stored_config_no_longer_validates(tmp_path):
    """One line naming the run and the key, exit 2, nothing re-queued; a coordinator that meets such a run records
    it failed with the same reason instead of crashing."""
    store, rid = _interrupted_run(tmp_path)
    store.con.execute("UPDATE runs SET config=json_set(config, '$.train.bogus', 1) WHERE run_id=?", (rid,))
    r = _cli("resume", rid, "--runs-dir", str(store.runs_dir))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert f"run {rid}: stored config: train.bogus: unknown key" in line, line
    assert store.get(rid).status == "interrupted"
    store.requeue([rid])
    runner.work(store, store.get(rid).batch_id)
    rec = store.get(rid)
    assert rec.status == "failed" and "train.bogus: unknown key" in rec.reason, rec.reason


def test_resume_on_a_read_only_store_names_the_file(tmp_path):
    store, rid = _interrupted_run(tmp_path)
    store.close()
    with read_only_copy(store.runs_dir) as ro:
        r = _cli("resume", rid, "--runs-dir", str(ro))
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert str(ro / "runs.db") in line and "read-only" in line, line


# -- checkpoints are data, never code -------------------------------------------------------------------------------


class _Payload:
    """A pickle that writes a marker file when it is unpickled (what a planted 'checkpoint' would do)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "code ran"))


def _plant(runs_dir: Path, run_id: str, marker: Path) -> Path:
    """A pickle where ``run_id``'s checkpoint is looked for, in the layout of every version (step 3 in the name,
    and the older ``<run>.pt``)."""
    folder = runs_dir / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    data = pickle.dumps({"format": 1, "run_ids": [run_id], "x": _Payload(marker)})
    for name in (f"{run_id}.3.pt", f"{run_id}.pt"):
        (folder / name).write_bytes(data)
    return folder / f"{run_id}.3.pt"


def test_a_planted_pickle_never_runs_on_resume(tmp_path):
    """Issue 19: ``sparse-tui resume RUN`` with a pickle planted as the run's checkpoint: the payload does not run,
    one line names the file, exit 2, nothing re-queued."""
    store, rid = _interrupted_run(tmp_path)
    marker = tmp_path / "marker"
    planted = _plant(store.runs_dir, rid, marker)
    pickle.loads(pickle.dumps(_Payload(tmp_path / "proof")))  # the payload does run when unpickled
    assert (tmp_path / "proof").exists()
    r = _cli("resume", rid, "--runs-dir", str(store.runs_dir))
    assert not marker.exists(), "the planted checkpoint ran code"
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert str(planted) in line and "not a sparse-tui checkpoint" in line, line
    assert store.get(rid).status == "interrupted"


def test_a_planted_pickle_never_runs_when_training_or_on_a_ray_worker(tmp_path, capsys):
    """The training loop's restore (a detached coordinator, a worker process) and a Ray worker's restore (the bytes
    the coordinator hands it) load data only: the run starts over from step 0 and says why."""
    from sparse_tui.executors.channel import ChannelSink
    from sparse_tui.training.checkpoint import CheckpointFiles

    store, rid = _interrupted_run(tmp_path, steps=10)
    marker = tmp_path / "marker"
    _plant(store.runs_dir, rid, marker)
    data = CheckpointFiles(store.runs_dir, [rid]).read_bytes()
    with pytest.raises(pickle.UnpicklingError):
        ChannelSink(lambda m: (None, []), str(store.runs_dir), {rid: data}).checkpoint_files([rid]).load("cpu")
    store.requeue([rid])
    runner.work(store, store.get(rid).batch_id)
    assert not marker.exists(), "the planted checkpoint ran code"
    assert store.get(rid).status == "finished"
    assert store.metrics(rid)["test/loss"][0][0] == 0
    assert "ignoring damaged checkpoint" in capsys.readouterr().err


def test_show_reports_the_step_resume_loads_after_a_kill_during_a_save(tmp_path, monkeypatch):
    """Issue 19: a kill just after a checkpoint's rename left the step header one behind (or empty), so ``show``
    said the wrong step. The step is the checkpoint's own: a kill at that moment leaves the new file (and maybe the
    older one), and the step reported is the one a resume loads."""
    from sparse_tui.training import checkpoint as ck

    files = ck.CheckpointFiles(tmp_path / "runs", ["r1"])
    files.write({"format": ck.FORMAT, "step": 10}, 10)
    real_replace = os.replace

    def killed_after_rename(src, dst):
        real_replace(src, dst)
        raise KeyboardInterrupt  # SIGKILL right after the rename: nothing after it runs

    monkeypatch.setattr(os, "replace", killed_after_rename)
    with pytest.raises(KeyboardInterrupt):
        files.write({"format": ck.FORMAT, "step": 20}, 20)
    monkeypatch.undo()
    assert ck.has_checkpoint(tmp_path / "runs", "r1") == 20
    assert files.load("cpu")["step"] == 20
    files.write({"format": ck.FORMAT, "step": 30}, 30)  # the next save leaves only itself
    assert sorted(p.name for p in (tmp_path / "runs" / "checkpoints").iterdir()) == ["r1.30.pt"]


def test_a_checkpoint_on_a_full_disk_is_an_oserror_and_leaves_no_temporary(tmp_path):
    """torch.save reports a full disk as a RuntimeError of its zip writer (seen in the fault drill: the run crashed
    instead of training on with a warning, and the temporary stayed). A checkpoint write raises the ENOSPC behind
    it, the temporary is removed and the previous checkpoint stays."""
    import errno

    from sparse_tui.training import checkpoint as ck

    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a small file system here")
    try:
        files = ck.CheckpointFiles(small, ["r1"])
        files.write({"format": ck.FORMAT, "x": torch.zeros(10)}, 10)
        with pytest.raises(OSError) as got:
            files.write({"format": ck.FORMAT, "x": torch.zeros(100_000)}, 20)
        assert got.value.errno == errno.ENOSPC
        assert sorted(p.name for p in (small / "checkpoints").iterdir()) == ["r1.10.pt"]
        assert files.load("cpu")["x"].shape == (10,)
    finally:
        subprocess.run(["umount", "-l", str(small)])  # lazy: a file still open must not leave it mounted


def test_stale_checkpoint_temporaries_are_removed(tiny_preset, tmp_path):
    """Issue 19: temporaries of checkpoint saves killed by ``kill -9`` piled up. A coordinator removes those of dead
    processes of this host; a live process's temporary, and another host's, stay."""
    import socket

    runs_dir = tmp_path / "runs"
    folder = runs_dir / "checkpoints"
    folder.mkdir(parents=True)
    dead = dead_pid()
    stale = [folder / f"aaaa0001.pt.{dead}.tmp", folder / f"aaaa0002.40.pt.{socket.gethostname()}.{dead}.tmp"]
    kept = [folder / f"aaaa0003.40.pt.{socket.gethostname()}.{os.getpid()}.tmp",
            folder / f"aaaa0004.40.pt.other-host.{dead}.tmp"]
    for p in stale + kept:
        p.write_bytes(b"partial")
    r = _cli("run", str(tiny_preset), "--headless", "--runs-dir", str(runs_dir))
    assert r.returncode == 0, r.stderr
    assert not any(p.exists() for p in stale) and all(p.exists() for p in kept)


def test_an_unknown_column_does_not_hide_the_runs(tmp_path):
    """Issue 19: one column added to the runs table (same schema version, e.g. by a newer sparse-tui) hid every
    run. Unknown columns are ignored."""
    store = RunStore(tmp_path / "runs")
    _, ids = batch_of(store, [cfg(seed=0), cfg(seed=1)])
    store.con.execute("ALTER TABLE runs ADD COLUMN future_column INTEGER NOT NULL DEFAULT 0")  # (archived is real now)
    store.close()
    r = _cli("runs", "--json", "--runs-dir", str(tmp_path / "runs"))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert sorted(x["run_id"] for x in json.loads(r.stdout)) == sorted(ids)
