"""``--ray-address`` helpers that never import Ray (executors/address.py): which ``HOST:PORT`` is the cluster
``ray start`` runs on this machine (joined as ``auto`` so Ray's token authentication applies, docs/CLUSTER.md), and
where Ray keeps that cluster's address file."""

from __future__ import annotations

import socket
import sys

import pytest

from sparse_tui.executors import ExecutorError, ExecutorOptions, executor_for
from sparse_tui.executors.address import current_cluster, is_current_cluster, parse_address, ray_temp_dir


@pytest.fixture
def ray_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    (tmp_path / "ray").mkdir()
    return tmp_path / "ray"


def test_temp_dir_follows_rays_rule(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.delenv("TMPDIR", raising=False)
    assert str(ray_temp_dir()) == "/tmp/ray"
    monkeypatch.setenv("TMPDIR", str(tmp_path / "t"))
    if sys.platform.startswith("linux"):  # Ray reads TMPDIR on Linux only
        assert ray_temp_dir() == tmp_path / "t" / "ray"
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "r"))
    assert ray_temp_dir() == tmp_path / "r" / "ray"


def test_current_cluster_is_the_address_file(ray_tmp):
    assert current_cluster() is None
    (ray_tmp / "ray_current_cluster").write_text("")
    assert current_cluster() is None
    (ray_tmp / "ray_current_cluster").write_text("10.1.2.3:6379\n")
    assert current_cluster() == "10.1.2.3:6379"


def test_which_addresses_are_this_machines_cluster(ray_tmp):
    assert not is_current_cluster(("127.0.0.1", 6379))  # no cluster here
    (ray_tmp / "ray_current_cluster").write_text("10.1.2.3:6379")
    assert is_current_cluster(("10.1.2.3", 6379))  # the file's own address
    assert is_current_cluster(("127.0.0.1", 6379))  # loopback reaches the head running here
    assert is_current_cluster(("localhost", 6379))
    assert not is_current_cluster(("127.0.0.1", 6380))  # another port: another cluster
    assert not is_current_cluster(("10.1.2.4", 6379))  # another machine
    assert not is_current_cluster(("no-such-host.invalid", 6379))
    (ray_tmp / "ray_current_cluster").write_text("garbage")
    assert not is_current_cluster(("127.0.0.1", 6379))


def test_parse_address_errors_name_the_flag():
    assert parse_address("auto") is None and parse_address("local") is None
    assert parse_address("[::1]:6379") == ("::1", 6379)
    for bad in ("head", "head:", ":6379", "head:0", "head:70000", "head:x"):
        with pytest.raises(ExecutorError, match="^--ray-address: must be auto, local or HOST:PORT"):
            parse_address(bad)


def probe(kind: str, address: str | None = None) -> str | None:
    return executor_for(ExecutorOptions(kind, (("--ray-address", address),) if address else ())).probe()


def test_probe_auto_uses_the_address_file(ray_tmp):
    """The console's check (no Ray import): ``auto`` with no cluster here, then with a file naming a closed port,
    then with one that answers."""
    pytest.importorskip("ray")
    assert "no Ray cluster runs on this machine" in probe("ray", "auto")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (ray_tmp / "ray_current_cluster").write_text(f"127.0.0.1:{port}")
    assert probe("ray", "auto").startswith(f"--ray-address: cannot reach a Ray cluster at 127.0.0.1:{port}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        (ray_tmp / "ray_current_cluster").write_text(f"127.0.0.1:{s.getsockname()[1]}")
        assert probe("ray", "auto") is None
