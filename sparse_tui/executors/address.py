"""``--ray-address`` values, without importing Ray: parsing, the cluster ``ray start`` runs on this machine, and
whether an explicit ``HOST:PORT`` is that cluster (docs/CLUSTER.md, "Addresses and token authentication").

Why the last one matters: since Ray 2.59 a cluster started with ``ray start --head`` on a machine that holds a
Ray token (``~/.ray/auth_token``, which any local ``ray.init()`` creates) requires that token from every client,
and one started before the token existed requires none. A driver on the head may use its token for the cluster
running there; a driver elsewhere follows Ray's rule (no token sent to a typed address unless
``RAY_AUTH_MODE=token``). ray_executor._join applies both.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from sparse_tui.executors.base import ExecutorError

CONNECT_TIMEOUT = 5.0  # seconds to reach HOST:PORT before ray.init is tried


def parse_address(address: str) -> tuple[str, int] | None:
    """(host, port) of ``HOST:PORT``, None for ``auto`` and ``local``; ExecutorError for anything else."""
    if address in ("auto", "local"):
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ExecutorError(f"--ray-address: must be auto, local or HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


def ray_temp_dir() -> Path:
    """Ray's temporary directory on this machine, by Ray's own rule: $RAY_TMPDIR, else $TMPDIR (Linux), else /tmp;
    plus ``ray``."""
    if "RAY_TMPDIR" in os.environ:
        base = os.environ["RAY_TMPDIR"]
    elif sys.platform.startswith("linux") and "TMPDIR" in os.environ:
        base = os.environ["TMPDIR"]
    else:
        base = "/tmp"
    return Path(base) / "ray"


def current_cluster() -> str | None:
    """``HOST:PORT`` of the cluster the last ``ray start`` on this machine started (its address file), or None."""
    try:
        text = (ray_temp_dir() / "ray_current_cluster").read_text().split()
    except OSError:
        return None
    return text[0] if text else None


def auto_address() -> str:
    """What ``--ray-address auto`` names: ``current_cluster()``, or ExecutorError (one line) when there is none."""
    current = current_cluster()
    if current is None:
        raise ExecutorError("--ray-address auto: no Ray cluster runs on this machine "
                            "(start one with 'ray start --head')")
    return current


def _ips(host: str) -> set[str]:
    try:
        return {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return set()


def is_current_cluster(hostport: tuple[str, int]) -> bool:
    """Whether ``(host, port)`` is the cluster ``ray start`` runs on this machine: the same port, and a host that
    is the address file's host or a loopback address (``localhost``, ``127.0.0.1``, ``::1``)."""
    current = current_cluster()
    if current is None:
        return False
    try:
        here = parse_address(current)
    except ExecutorError:
        return False
    if here is None or here[1] != hostport[1]:
        return False
    theirs = _ips(hostport[0])
    return bool(theirs & _ips(here[0])) or any(ip.startswith("127.") or ip == "::1" for ip in theirs)


def reach(address: str, hostport: tuple[str, int]) -> None:
    """ExecutorError (one line) unless a TCP connection to ``hostport`` opens within ``CONNECT_TIMEOUT``."""
    try:
        socket.create_connection(hostport, timeout=CONNECT_TIMEOUT).close()
    except OSError as e:
        why = e.strerror or type(e).__name__
        raise ExecutorError(f"--ray-address: cannot reach a Ray cluster at {address} ({why})") from None
