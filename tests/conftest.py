"""Shared fixtures: a tiny recall preset and a temporary run store."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest

# Tiny models train far faster on one thread, and CI has two cores shared with xdist workers.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Runs record no sys/* metrics (CPU %, RSS, NVML: sparse_tui/base/sysmetrics.py) in the suite: tests compare whole
# metric
# series bit for bit, and the console's snapshots show them. tests/test_sysmetrics.py turns them on.
os.environ["SPARSE_TUI_SYSTEM_METRICS"] = "0"
# GPU calibrations (sparse_tui/training/calibration.py) go to a cache of the suite's own: a developer's cached card
# never changes what --dry-run prints here.
if "SPARSE_TUI_CACHE" not in os.environ:
    import tempfile

    os.environ["SPARSE_TUI_CACHE"] = tempfile.mkdtemp(prefix="sparse-tui-cache-")

def pytest_sessionstart(session) -> None:
    """``SPARSE_TUI_REQUIRE_RAY=1`` (``make test``, CI): the Ray tests must run, so a missing extra is an error here
    instead of their modules' skip (``pytest.importorskip("ray")``)."""
    if os.environ.get("SPARSE_TUI_REQUIRE_RAY") == "1":
        import importlib.util

        try:
            missing = importlib.util.find_spec("ray") is None
        except (ImportError, ValueError):
            missing = True
        if missing:
            raise pytest.UsageError('SPARSE_TUI_REQUIRE_RAY=1 but Ray is not installed (pip install "sparse-tui[ray]")')

TINY_PRESET = """\
# tiny.toml: a test preset (comments must survive a TUI save)
name = "tiny"
seeds = [0]

[task]
kind = "recall"
n_tokens = 8
n_pairs = 3

[model]
kind = "transformer"
n_layers = 2
n_heads = 1
d_model = 16

[train]
lr = 1e-2
batch_size = 16
steps = 20
device = "cpu"

[eval]
every = 5
test_size = 32

[plateau]
metric = "test/acc"
mode = "above"
value = 0.5
"""


@pytest.fixture
def tiny_preset(tmp_path: Path) -> Path:
    p = tmp_path / "tiny.toml"
    p.write_text(TINY_PRESET)
    return p


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"


def stored_preset(tmp_path: Path, text: str, name: str = "synth"):
    """Write preset ``text`` as ``tmp_path/NAME.toml`` and create its runs in a new store at ``tmp_path/runs``.
    Returns (preset path, runs dir, open RunStore, run specs, run ids): tests then log curves and finish the runs."""
    from sparse_tui.presets.loading import expand, load_preset
    from sparse_tui.store import RunStore

    preset = tmp_path / f"{name}.toml"
    preset.write_text(text)
    specs = expand(load_preset(preset))
    runs = tmp_path / "runs"
    store = RunStore(runs)
    _, ids = store.create_runs(specs)
    return preset, runs, store, specs, ids


class StopAfter:
    """A should_stop that asks the training loop to stop after ``n`` calls (one per step, plus one per claim)."""

    def __init__(self, n: int):
        self.n, self.calls = n, 0

    def __call__(self):
        self.calls += 1
        return "interrupted" if self.calls > self.n else None


@contextlib.contextmanager
def read_only_copy(runs_dir: Path):
    """``runs_dir`` seen read-only: a read-only bind mount when running as root (who writes any file), else a
    directory and store without write permission."""
    if os.geteuid() != 0:
        os.chmod(runs_dir / "runs.db", 0o444)
        os.chmod(runs_dir, 0o555)
        try:
            yield runs_dir
        finally:
            os.chmod(runs_dir, 0o755)
            os.chmod(runs_dir / "runs.db", 0o644)
        return
    ro = runs_dir.parent / "ro"
    ro.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(runs_dir), str(ro)], capture_output=True).returncode == 0
    if mounted and subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)], capture_output=True).returncode:
        subprocess.run(["umount", str(ro)])
        mounted = False
    if not mounted:
        pytest.skip("cannot make a read-only mount here")
    try:
        yield ro
    finally:
        subprocess.run(["umount", str(ro)])
