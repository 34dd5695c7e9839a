"""Executors: where the stacks of a batch are trained. ``local`` (the default) is this machine, in-process or with
worker processes (runner.py); ``ray`` is a Ray cluster (executors/ray_executor.py; docs/CLUSTER.md).

Whatever the executor, the coordinator plans the stacks (``runner.next_stack``), every stack is trained by the one
training loop (training/loop.py) through ``runner._train_claimed``, and the coordinator's process alone writes the
run store on its machine. Nothing here imports Ray, torch or Textual: ``ray`` is imported when a Ray executor is
made (``sparse-tui --help`` stays light; tests/test_cli.py).
"""

from __future__ import annotations

import importlib.util

from sparse_tui.executors.address import auto_address, parse_address, reach
from sparse_tui.executors.errors import EXECUTORS, INSTALL_HINT, ExecutorError  # noqa: F401  (the package's API)
from sparse_tui.executors.ray_executor import connect


def make_executor(name: str, address: str | None = None):
    """None for ``local`` (runner.py trains here), a connected ``RayExecutor`` for ``ray``. Raises
    ``ExecutorError`` (before anything is written to a store) when Ray is missing or the cluster unreachable."""
    if name == "local":
        if address is not None:
            raise ExecutorError("--ray-address: only with --executor ray")
        return None
    if name != "ray":
        raise ExecutorError(f"--executor: must be one of {', '.join(EXECUTORS)}, got {name!r}")

    return connect(address or "auto")


def probe(name: str, address: str | None = None) -> str | None:
    """Whether ``--executor name`` can be used now, without importing Ray (the console's check before it launches
    a batch; the detached coordinator then connects for real): None, or the one-line problem. ``auto`` is the
    cluster ``ray start --head`` runs on this machine (its address file under Ray's temporary directory)."""


    if name == "local":
        return None
    if importlib.util.find_spec("ray") is None:
        return f"--executor ray: Ray is not installed; {INSTALL_HINT}"
    address = address or "auto"
    if address == "local":
        return None
    try:
        if address == "auto":
            address = auto_address()
        reach(address, parse_address(address))
    except ExecutorError as e:
        return str(e)
    return None
