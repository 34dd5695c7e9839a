"""The Ray executor on a cluster started the way docs/CLUSTER.md says: ``ray start --head`` and a second node joined
with ``ray start --address``, under Ray's token authentication (the default since Ray 2.59 on a machine that
holds ``~/.ray/auth_token``). Here the two nodes share this machine; the "other machine" is a driver whose Ray
temporary directory knows no cluster and whose home holds no token, as on a laptop or a second server.

Shows (each a real ``sparse-tui run`` process):
* on the head, ``--ray-address HOST:PORT`` naming its own cluster (loopback or the head's IP) trains, as ``auto``;
* a cluster started without authentication, on a machine that holds a token since, trains with ``auto`` and
  ``HOST:PORT`` (Ray's own ``auto`` sends the token, and its actors are then cancelled before they run);
* from elsewhere without ``RAY_AUTH_MODE=token``: exit 2, one line that says what to set, no store written; a
  wrong token: exit 2, one line; the head's token: the runs finish with the local executor's metrics;
* the console's launch path records a refused connection on its runs (failed, with the reason), not a bare
  "coordinator is gone".

Ray's processes get their own temporary directory and home (a short path: Ray's socket paths must fit in 107
bytes), free ports, and are stopped with SIGTERM (``ray start --block`` drains and exits), so nothing here touches
a cluster the developer runs, or the 2-node ``cluster_utils`` cluster of tests/test_ray.py (same xdist group)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the ray extra is not installed")  # an error under SPARSE_TUI_REQUIRE_RAY=1

from sparse_tui.executors import ExecutorOptions
from sparse_tui.lifecycle import runner
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.store import TERMINAL, RunStore

pytestmark = pytest.mark.xdist_group("ray")

RAY = str(Path(sys.executable).parent / "ray")
SMOKE = Path(__file__).resolve().parents[1] / "presets" / "smoke.toml"
STEPS = "train.steps=300"
BASE = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
BASE.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", COLUMNS="200", RAY_USAGE_STATS_ENABLED="0")


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _ray_start(env: dict, log: Path, *args: str) -> subprocess.Popen:
    gcs, agent, agent_grpc, runtime_env, metrics = _free_ports(5)
    cmd = [RAY, "start", "--block", "--num-cpus", "1", "--dashboard-agent-listen-port", str(agent),
           "--dashboard-agent-grpc-port", str(agent_grpc), "--runtime-env-agent-port", str(runtime_env),
           "--metrics-export-port", str(metrics), *args]
    if "--head" in args:
        cmd += ["--port", str(gcs), "--include-dashboard", "false"]
    env = {**env, "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}  # SIGTERM stops at once (default: a 30 s drain)
    return subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def _alive_nodes(env: dict, address: str) -> int:
    out = subprocess.run([RAY, "status", "--address", address], env=env, capture_output=True, text=True,
                         timeout=60).stdout
    active = out.split("Active:")[-1].split("Pending:")[0] if "Active:" in out else ""
    return sum(1 for line in active.splitlines() if "node_" in line)


@contextlib.contextmanager
def _cluster(root: Path, head_env: dict, worker_env: dict | None = None):
    """``ray start --head`` (and, with ``worker_env``, a second node joined with ``ray start --address``) under
    ``root``; yields the head's address once every node is up."""
    procs = [_ray_start(head_env, root / "head.log", "--head")]
    try:
        current = Path(head_env["RAY_TMPDIR"]) / "ray" / "ray_current_cluster"
        deadline = time.time() + 90
        while not (current.exists() and current.read_text().strip()):
            assert procs[0].poll() is None, (root / "head.log").read_text()[-2000:]
            assert time.time() < deadline, "ray start --head did not come up in 90 s"
            time.sleep(0.5)
        address = current.read_text().split()[0]
        if worker_env is not None:
            procs.append(_ray_start(worker_env, root / "worker.log", "--address", address))
            deadline = time.time() + 90
            while _alive_nodes(worker_env, address) < 2:
                assert procs[1].poll() is None, (root / "worker.log").read_text()[-2000:]
                assert time.time() < deadline, "the worker node did not join in 90 s"
                time.sleep(1)
        yield address
    finally:
        for p in procs[::-1]:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs[::-1]:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:  # pragma: no cover - a stuck shutdown
                os.killpg(p.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def token_cluster():
    root = Path(tempfile.mkdtemp(prefix="st-ray-", dir="/tmp"))
    home, away, away_home = root / "home", root / "away", root / "away-home"
    for d in (home / ".ray", away, away_home):
        d.mkdir(parents=True)
    token = uuid.uuid4().hex
    (home / ".ray" / "auth_token").write_text(token)  # as any local ray.init() leaves it
    head_env = {**BASE, "HOME": str(home), "RAY_TMPDIR": str(root)}  # RAY_AUTH_MODE unset: Ray's default
    # A worker node joins as the docs say: the head's token, RAY_AUTH_MODE=token.
    joined = {**head_env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    # The other machine: no cluster in its Ray temporary directory, no token in its home.
    away_env = {**BASE, "HOME": str(away_home), "RAY_TMPDIR": str(away)}
    try:
        with _cluster(root, head_env, joined) as address:
            yield dict(root=root, address=address, port=address.rsplit(":", 1)[1], token=token,
                       head_env=head_env, away_env=away_env)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run(env: dict, address: str, runs_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sparse_tui", "run", str(SMOKE), "--headless", "--set", STEPS, "--executor", "ray",
         "--ray-address", address, "--runs-dir", str(runs_dir), *extra],
        env=env, capture_output=True, text=True, timeout=240)


def _local_final(tmp_path: Path) -> tuple[dict, dict]:
    store = RunStore(tmp_path / "local")
    batch, ids = store.create_runs(expand(load_preset(SMOKE, [STEPS])))
    runner.work(store, batch)
    return store.metrics(ids[0]), store.get(ids[0]).final


def _finished_like_local(runs_dir: Path, want: tuple[dict, dict]) -> None:
    store = RunStore(runs_dir, create=False)
    [r] = store.runs()
    assert r.status == "finished", (r.status, r.reason)
    metrics, final = want
    assert store.metrics(r.run_id) == metrics and r.final == final  # bit for bit, as the local executor


def test_head_address_typed_on_the_head_trains(token_cluster, tmp_path):
    """``HOST:PORT`` of the cluster running here may use this machine's token (Ray itself would not send it to a
    typed address), for the loopback address and for the head's own IP."""
    port = token_cluster["port"]
    for i, address in enumerate((f"127.0.0.1:{port}", token_cluster["address"])):
        res = _run(token_cluster["head_env"], address, tmp_path / f"head{i}")
        assert res.returncode == 0, res.stderr[-3000:]
        assert f"Ray cluster {address}: 2 node(s), 2 CPU(s)" in res.stderr  # the joined worker node is seen
        store = RunStore(tmp_path / f"head{i}", create=False)
        assert [r.status for r in store.runs()] == ["finished"]


def test_other_machine_without_token_mode_gets_one_line(token_cluster, tmp_path):
    env = dict(token_cluster["away_env"])
    (Path(env["HOME"]) / ".ray").mkdir(exist_ok=True)
    (Path(env["HOME"]) / ".ray" / "auth_token").write_text(token_cluster["token"])  # copied, mode not set
    t0 = time.monotonic()
    res = _run(env, token_cluster["address"], tmp_path / "runs")
    took = time.monotonic() - t0
    assert res.returncode == 2, res.stderr[-3000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr[-3000:]  # Ray's per-second native warnings are kept out
    assert lines[0].startswith(f"error: --ray-address: the Ray cluster at {token_cluster['address']} requires token")
    assert "RAY_AUTH_MODE=token" in lines[0] and "ray get-auth-token" in lines[0]
    assert not (tmp_path / "runs").exists()  # nothing written
    assert took < 60  # not Ray's 20 one-second retries plus start-up on top (a generous bound: loaded CI)


def test_other_machine_with_wrong_then_right_token(token_cluster, tmp_path):
    env = {**token_cluster["away_env"], "RAY_AUTH_MODE": "token"}
    res = _run({**env, "RAY_AUTH_TOKEN": "0" * 32}, token_cluster["address"], tmp_path / "wrong")
    assert res.returncode == 2, res.stderr[-3000:]
    [line] = res.stderr.strip().splitlines()
    assert "refused this machine's token" in line and "ray get-auth-token" in line
    assert not (tmp_path / "wrong").exists()

    res = _run({**env, "RAY_AUTH_TOKEN": token_cluster["token"]}, token_cluster["address"], tmp_path / "right")
    assert res.returncode == 0, res.stderr[-3000:]
    _finished_like_local(tmp_path / "right", _local_final(tmp_path))


def test_console_launch_records_a_refused_cluster_on_its_runs(token_cluster, tmp_path, monkeypatch):
    """The console checks only that the address answers (without importing Ray); the detached coordinator then
    meets the token requirement: its runs end ``failed`` with that one line, not "coordinator is gone"."""
    for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS"):
        monkeypatch.delenv(k, raising=False)  # an earlier ray.init() in this process may have set them
    for k in ("HOME", "RAY_TMPDIR"):
        monkeypatch.setenv(k, token_cluster["away_env"][k])
    store = RunStore(tmp_path / "console")
    _, ids, pid = runner.start_detached(store, expand(load_preset(SMOKE, [STEPS])),
                                        executor=ExecutorOptions("ray", (("--ray-address", token_cluster["address"]),)))
    deadline = time.time() + 120
    while (r := store.get(ids[0])).status not in TERMINAL:
        assert time.time() < deadline, f"run still {r.status} after 120 s"
        time.sleep(0.5)
    assert r.status == "failed"
    assert r.reason.startswith("never started: --ray-address: the Ray cluster at"), r.reason
    assert "RAY_AUTH_MODE=token" in r.reason


def test_cluster_without_authentication_and_a_token_at_hand(tmp_path):
    """``ray start --head`` before any token existed (``RAY_AUTH_MODE=disabled`` here), a token in the home since:
    Ray's ``auto`` would turn token mode on and the coordinator's channel actor would never run. sparse-tui tries
    the cluster without a token first, so ``auto`` and ``HOST:PORT`` both train."""
    root = Path(tempfile.mkdtemp(prefix="st-ray-", dir="/tmp"))
    try:
        (root / "home" / ".ray").mkdir(parents=True)
        (root / "home" / ".ray" / "auth_token").write_text(uuid.uuid4().hex)
        env = {**BASE, "HOME": str(root / "home"), "RAY_TMPDIR": str(root)}
        with _cluster(root, {**env, "RAY_AUTH_MODE": "disabled"}) as address:
            want = _local_final(tmp_path)
            for i, flag in enumerate(("auto", f"127.0.0.1:{address.rsplit(':', 1)[1]}")):
                res = _run(env, flag, tmp_path / f"open{i}")
                assert res.returncode == 0, res.stderr[-3000:]
                _finished_like_local(tmp_path / f"open{i}", want)
    finally:
        shutil.rmtree(root, ignore_errors=True)
