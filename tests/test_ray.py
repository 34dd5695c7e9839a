"""The Ray executor (issue 13) on a local Ray cluster of 2 simulated nodes (``ray.cluster_utils.Cluster``, 1 CPU
each, no dashboard), started once for this module: the same final metrics as the local executor for the same
preset and seeds; a killed worker process and a removed node leave no run stuck, and the resumed runs equal
uninterrupted ones bit for bit (CPU); the store written only by the coordinator.

All tests of this module run in one xdist group (Makefile: ``--dist loadgroup``), so the cluster starts once.
Ray missing skips them, except under ``SPARSE_TUI_REQUIRE_RAY=1`` (``make test``, CI), where it is an error.
Every wait has a timeout: a hang fails the test instead of the suite."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed")  # an error under SPARSE_TUI_REQUIRE_RAY=1
from ray.cluster_utils import Cluster  # noqa: E402

from sparse_tui.executors import ray_executor  # noqa: E402
from sparse_tui.lifecycle import runner  # noqa: E402
from sparse_tui.presets.loading import expand, load_preset  # noqa: E402
from sparse_tui.store import TERMINAL, RunStore  # noqa: E402
from sparse_tui.training.checkpoint import has_checkpoint  # noqa: E402

pytestmark = pytest.mark.xdist_group("ray")

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "COLUMNS": "200",
       "RAY_USAGE_STATS_ENABLED": "0"}
# Long enough that a fault lands mid-run (a checkpoint every 50 steps, the kill after the second one).
FAULT = ("train.steps=600", "eval.every=50", "train.checkpoint_every=50")


@pytest.fixture(scope="module")
def cluster():
    # Ray's temporary directory of its own (short: socket paths must fit 107 bytes): a Cluster writes the
    # "current cluster" file there, which under /tmp/ray would point a developer's `--ray-address auto` (and
    # `ray status`) at this test cluster instead of the cluster they started.
    tmp = tempfile.mkdtemp(prefix="st-ray-", dir="/tmp")
    before = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = ENV["RAY_TMPDIR"] = tmp
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1)
    c.wait_for_nodes(timeout=60)
    ray.init(address=c.address, log_to_driver=False, logging_level="error")
    yield c
    ray.shutdown()
    c.shutdown()
    if before is None:
        os.environ.pop("RAY_TMPDIR", None)
    else:
        os.environ["RAY_TMPDIR"] = before
    shutil.rmtree(tmp, ignore_errors=True)


def _batch(store: RunStore, preset: Path, *overrides: str) -> tuple[str, list[str]]:
    return store.create_runs(expand(load_preset(preset, list(overrides))))


def _local_reference(tmp_path: Path, preset: Path, *overrides: str) -> dict:
    """{seed: (metrics, final, plateau_step)} of the same runs trained by the local executor."""
    ref = RunStore(tmp_path / "local")
    batch, _ = _batch(ref, preset, *overrides)
    runner.work(ref, batch)
    return {r.seed: (ref.metrics(r.run_id), r.final, r.plateau_step) for r in ref.runs(batch_id=batch)}


def _same_as_local(store: RunStore, batch: str, want: dict) -> None:
    runs = store.runs(batch_id=batch)
    assert {r.seed for r in runs} == set(want)
    for r in runs:
        assert r.status == "finished", (r.run_id, r.status, r.reason)
        metrics, final, plateau = want[r.seed]
        got = store.metrics(r.run_id)
        assert got.keys() == metrics.keys()
        for name in metrics:
            assert got[name] == metrics[name], (r.seed, name)  # bit-identical: same steps, same values
        assert r.final == final and r.plateau_step == plateau


class Coordinator(threading.Thread):
    """The Ray coordinator (``runner.coordinate`` with the executor) in a thread of the test process."""

    def __init__(self, store: RunStore, batch: str, group: int = 1):
        super().__init__(daemon=True)
        self.store, self.batch, self.group, self.error = store, batch, group, None

    def run(self):
        try:
            # the thread's own store connection (SQLite connections belong to a thread)
            runner.coordinate(RunStore(self.store.runs_dir), self.batch, executor=ray_executor.RayExecutor().connect(),
                              group=self.group)
        except BaseException as e:  # noqa: BLE001 - reported by finish()
            self.error = e

    def finish(self, timeout: float = 120.0) -> None:
        self.join(timeout)
        assert not self.is_alive(), "the Ray coordinator did not finish"
        assert self.error is None, repr(self.error)


def _wait_for(pred, timeout: float = 60.0) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def _running_with_checkpoint(store: RunStore, batch: str, step: int, nodes: set[str] | None = None):
    """A run of ``batch`` training on a Ray worker (on one of ``nodes``) whose checkpoint in the head's store is at
    least ``step``; None while there is none."""
    for r in store.runs(batch_id=batch, status="running", reap=False):
        v = r.versions or {}
        if "worker_pid" in v and (nodes is None or v.get("ray_node") in nodes) and \
                (has_checkpoint(store.runs_dir, r.run_id) or 0) >= step:
            return r
    return None


def test_cli_ray_executor_gives_the_local_executors_metrics(cluster, tiny_preset, tmp_path):
    """`run --headless --executor ray --ray-address HOST:PORT` on the 2-node cluster: every run's metric series,
    final metrics and plateau step equal the local executor's for the same preset and seeds."""
    opts = ("seeds=[0,1,2]", "train.steps=40")
    want = _local_reference(tmp_path, tiny_preset, *opts)
    runs_dir = tmp_path / "ray"
    args = [sys.executable, "-m", "sparse_tui", "run", str(tiny_preset), "--headless", "--runs-dir", str(runs_dir),
            "--executor", "ray", "--ray-address", cluster.address]
    for o in opts:
        args += ["--set", o]
    r = subprocess.run(args, capture_output=True, text=True, timeout=180, env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Ray cluster" in r.stderr and "2 node(s), 2 CPU(s)" in r.stderr
    store = RunStore(runs_dir)
    (batch,) = {x.batch_id for x in store.runs()}
    _same_as_local(store, batch, want)
    for rec in store.runs():  # trained on Ray workers (not in the coordinator), recorded by the coordinator
        assert rec.versions["worker_pid"] != rec.pid and rec.versions["ray_node"]
        assert store.attention_steps(rec.run_id) == [0, 10, 20, 30, 40]
    assert not list((runs_dir / "checkpoints").glob("*.pt")), "finished runs leave no checkpoint"


def test_stacked_runs_on_ray_equal_local(cluster, tiny_preset, tmp_path):
    """A stack of runs (--schedule stacked) is one Ray task; its runs equal the local executor's."""
    opts = ("seeds=[4,5]", "train.steps=30")
    want = _local_reference(tmp_path, tiny_preset, *opts)
    store = RunStore(tmp_path / "ray")
    batch, ids = _batch(store, tiny_preset, *opts)
    co = Coordinator(store, batch, group=8)
    co.start()
    co.finish()
    _same_as_local(store, batch, want)
    assert {store.get(i).versions["worker_pid"] for i in ids} != set() and \
        {store.get(i).summary.get("stacked_with") for i in ids} == {2}


def test_an_invalid_stored_config_is_recorded_failed_as_locally(cluster, tiny_preset, tmp_path):
    """A run whose stored config no longer validates (another version's, or edited by hand) is claimed and recorded
    ``failed`` with the reason by the Ray coordinator, exactly as by the local path (``runner.claim_next_stack``, one
    rule for both); the batch's other runs train on the cluster."""
    reasons = {}
    for where in ("local", "ray"):
        store = RunStore(tmp_path / where)
        batch, ids = _batch(store, tiny_preset, "seeds=[0,1]", "train.steps=20")
        store.con.execute("UPDATE runs SET config=json_set(config, '$.train.bogus', 1) WHERE run_id=?", (ids[0],))
        if where == "local":
            runner.work(store, batch)
        else:
            co = Coordinator(store, batch)
            co.start()
            co.finish()
        bad, good = store.get(ids[0]), store.get(ids[1])
        assert bad.status == "failed" and good.status == "finished", (where, bad.reason, good.reason)
        reasons[where] = bad.reason.replace(ids[0], "RUN")
    assert "train.bogus: unknown key" in reasons["ray"] and reasons["ray"] == reasons["local"]


def test_killed_worker_is_recorded_then_resumed_from_its_checkpoint(cluster, tiny_preset, tmp_path):
    """SIGKILL of the Ray worker process training a run: the run is recorded failed with the reason, submitted
    again from its checkpoint in the head's store, and ends with the uninterrupted run's metrics."""
    opts = (*FAULT, "seeds=[7]")
    want = _local_reference(tmp_path, tiny_preset, *opts)
    store = RunStore(tmp_path / "ray")
    batch, (rid,) = _batch(store, tiny_preset, *opts)
    co = Coordinator(store, batch)
    co.start()
    assert _wait_for(lambda: _running_with_checkpoint(store, batch, 100) is not None, 90), store.get(rid)
    victim = store.get(rid).versions["worker_pid"]
    os.kill(victim, signal.SIGKILL)
    co.finish()
    rec = store.get(rid)
    notes = rec.summary.get("notes", [])
    assert any("resumed after: Ray worker died at step" in n for n in notes), notes
    assert rec.versions["worker_pid"] != victim
    _same_as_local(store, batch, want)


def test_cancel_from_the_store_reaches_the_worker(cluster, tiny_preset, tmp_path):
    """A cancel requested in the head's store (the console's c key, `store.request_cancel`) stops the run on its
    Ray worker at its next heartbeat: `cancelled` with its step, its metrics so far kept."""
    store = RunStore(tmp_path / "ray")
    # long enough to be cancelled mid-run: the cancel reaches the worker within about 2 heartbeats (2 s)
    batch, (first,) = _batch(store, tiny_preset, "train.steps=4000", "eval.every=50", "seeds=[0]")
    co = Coordinator(store, batch)
    co.start()
    assert _wait_for(lambda: (store.get(first).step or 0) >= 50, 60), store.get(first)
    store.request_cancel([first])
    co.finish()
    rec = store.get(first)
    assert rec.status == "cancelled" and rec.reason.startswith("cancelled at step") and rec.step < 4000, rec
    assert max(store.metrics(first)["test/loss"][0]) >= 50


def test_removed_node_fails_its_runs_then_resume_batch_matches(cluster, tiny_preset, tmp_path, monkeypatch):
    """A node removed while it trains a run: with retries off, the run ends `failed` ("Ray node died" or "Ray
    worker died", never stuck running) and the other runs finish; `sparse-tui resume BATCH --executor ray`
    continues it from its checkpoint on the head, and it ends with the uninterrupted run's metrics.

    A third node joins first (the cluster keeps 2 nodes for the tests after this one); whichever non-head node
    trains a run when its checkpoint reaches step 100 is removed."""
    monkeypatch.setattr(ray_executor, "RETRIES", 0)
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes(timeout=60)
    workers = {n.node_id: n for n in cluster.worker_nodes}
    opts = (*FAULT, "seeds=[0,1,2]")
    store = RunStore(tmp_path / "ray")
    batch, ids = _batch(store, tiny_preset, *opts)
    co = Coordinator(store, batch)
    co.start()
    assert _wait_for(lambda: _running_with_checkpoint(store, batch, 100, set(workers)) is not None, 90), \
        [(r.status, r.versions) for r in store.runs(batch_id=batch, reap=False)]
    victim = _running_with_checkpoint(store, batch, 100, set(workers))
    cluster.remove_node(workers[victim.versions["ray_node"]])
    co.finish()
    runs = {r.run_id: r for r in store.runs(batch_id=batch)}
    assert all(r.status in TERMINAL for r in runs.values())
    dead = runs[victim.run_id]
    assert dead.status == "failed" and ("Ray node died" in dead.reason or "Ray worker died" in dead.reason), \
        dead.reason
    assert has_checkpoint(store.runs_dir, victim.run_id) >= 100
    assert all(r.status == "finished" for i, r in runs.items() if i != victim.run_id)

    r = subprocess.run([sys.executable, "-m", "sparse_tui", "resume", batch, "--runs-dir", str(store.runs_dir),
                        "--executor", "ray", "--ray-address", cluster.address],
                       capture_output=True, text=True, timeout=180, env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "1 run(s)" in r.stderr  # only the failed run was resumed
    # the resumed run equals the same run trained uninterrupted by the local executor (the others were not touched)
    want = _local_reference(tmp_path, tiny_preset, *FAULT, f"seeds=[{victim.seed}]")
    store = RunStore(store.runs_dir)
    _same_as_local(store, batch, {**want, **{r.seed: (store.metrics(r.run_id), r.final, r.plateau_step)
                                             for r in store.runs(batch_id=batch) if r.run_id != victim.run_id}})


def test_unreachable_address_exits_2_and_writes_nothing(tiny_preset, tmp_path):
    runs_dir = tmp_path / "runs"
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "run", str(tiny_preset), "--headless", "--runs-dir",
                        str(runs_dir), "--executor", "ray", "--ray-address", "127.0.0.1:1"],
                       capture_output=True, text=True, timeout=60, env=ENV)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == "error: --ray-address: cannot reach a Ray cluster at 127.0.0.1:1 (Connection refused)"
    assert not runs_dir.exists()
