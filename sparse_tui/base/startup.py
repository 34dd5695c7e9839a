"""The process's start-up, in phases (issue 35: on the H100 a whole blog_nembd command took 23.2 s of which the
stacked steps were 12): ``imports`` (process start to torch and the training code imported), ``cuda context``
(the first CUDA allocation and synchronisation; none on a CPU), ``build`` (the first stack: tasks, models, test
sets, optimiser), ``trial step`` (the first stack's trial: training/loop.py trial_step), ``first capture`` (its CUDA
graph; none without one) and ``first evaluation`` (step 0 of every member). Each is recorded once per process, the
first time it happens (training/loop.py); ``sparse-tui run --verbose`` prints them as one line in the batch log,
from every process that trains (``SPARSE_TUI_VERBOSE=1``, which worker processes inherit). Torch-free."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager

import psutil

PHASES: dict[str, float] = {}  # name -> seconds, in the order they happened
ORDER = ("imports", "cuda context", "build", "trial step", "first capture", "first evaluation")
_printed = False


def since_start() -> float:
    """Seconds since this process started (its creation time, as the OS records it)."""
    return max(0.0, time.time() - psutil.Process().create_time())


def record(name: str, seconds: float) -> None:
    PHASES.setdefault(name, seconds)


@contextmanager
def timed(name: str):
    """Time the block as phase ``name`` (the first time only: later stacks of the process do not count)."""
    t = time.perf_counter()
    try:
        yield
    finally:
        record(name, time.perf_counter() - t)


def line(device_type: str) -> str:
    """``start-up: imports 3.1 s, cuda context skipped (CPU), ...``: every phase, or why it did not happen."""
    parts = []
    for name in ORDER:
        if name in PHASES:
            parts.append(f"{name} {PHASES[name]:.2f} s")
        elif name == "cuda context" and device_type != "cuda":
            parts.append(f"{name} skipped ({device_type.upper()})")
        elif name == "first capture":
            parts.append(f"{name} none ({'CPU' if device_type != 'cuda' else 'eager'})")
    return f"sparse-tui: start-up (pid {os.getpid()}): " + ", ".join(parts)


def verbose() -> bool:
    return os.environ.get("SPARSE_TUI_VERBOSE") == "1"


def report(device_type: str) -> None:
    """Print the start-up line once per process to the batch log (stderr) under ``--verbose``."""
    global _printed
    if verbose() and not _printed:
        _printed = True
        print(line(device_type), file=sys.stderr, flush=True)
