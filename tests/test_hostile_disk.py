"""A full disk and the environment (issue 45): readers open a store that was closed cleanly while the disk is full
(SQLite could not create runs.db-shm, so `runs`, `show` and `export` exited 2 with "disk I/O error"), the bridges
exit 1 on a full disk as documented, and SPARSE_TUI_SYSTEM_METRICS=off / false / ' 0' turn the recording off.

The full disk is a real one: a small tmpfs mounted for the test (CI runs as root); where mounting is not permitted
the tests skip and say why."""

from __future__ import annotations

import errno
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import TINY_PRESET, stored_preset
from typer.testing import CliRunner

from sparse_tui.cli import app


def _cli(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 2 MiB tmpfs at tmp_path/disk, unmounted afterwards; skipped where mount is not permitted."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(folder: Path) -> None:
    """Write until the file system says ENOSPC, then check that not even 4 KiB more fits."""
    fd = os.open(folder / f"filler-{uuid.uuid4().hex}", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)
    fd = os.open(folder / "probe", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with pytest.raises(OSError):
            os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)


@pytest.fixture
def full_store(small_disk: Path):
    """A store of two finished runs, closed cleanly (no -wal / -shm left), on a disk then filled."""
    _, runs, store, _, ids = stored_preset(small_disk, TINY_PRESET.replace("seeds = [0]", "seeds = [0, 1]"))
    for rid in ids:
        store.log_metrics_many(rid, [0, 20], {"test/loss": [3.0, 1.0], "test/acc": [0.1, 0.6]})
        store.finish(rid, "finished", step=20)
    store.close()
    assert not (runs / "runs.db-shm").exists() and not (runs / "runs.db-wal").exists()
    _fill(small_disk)
    return runs, ids


def test_readers_open_a_store_on_a_full_disk(full_store):
    runs, ids = full_store
    before = (runs / "runs.db").read_bytes()
    r = _cli("runs", "--runs-dir", str(runs), "--json")
    assert r.exit_code == 0, r.output
    assert all(i in r.stdout for i in ids) and "read as an immutable file" in r.stderr
    r = _cli("show", ids[0], "--runs-dir", str(runs), "--no-plots")
    assert r.exit_code == 0, r.output
    r = _cli("export", "--runs-dir", str(runs), "--format", "jsonl")
    assert r.exit_code == 0, r.output
    assert sum(1 for ln in r.stdout.splitlines() if ln.startswith("{")) == 2
    assert (runs / "runs.db").read_bytes() == before  # nothing written (SQLite's failed try may leave a stub -shm)


@pytest.mark.parametrize("to", ["tensorboard", "mlflow"])
def test_export_to_a_full_disk_exits_1(tmp_path, small_disk, to):
    pytest.importorskip(to)
    _, runs, store, _, ids = stored_preset(tmp_path, TINY_PRESET)  # the store on a disk with room
    store.log_metrics_many(ids[0], [0, 20], {"test/loss": [3.0, 1.0], "test/acc": [0.1, 0.6]})
    store.finish(ids[0], "finished", step=20)
    store.close()
    (small_disk / "out").mkdir()
    _fill(small_disk)
    dest = str(small_disk / "out" / ("tb" if to == "tensorboard" else "m.db"))
    r = _cli("export", "--runs-dir", str(runs), "--to", to, dest)
    assert r.exit_code == 1, r.output  # docs/USAGE.md: a full disk is exit 1, not a usage error
    assert "Traceback" not in r.output and "error: --to" in r.stderr


@pytest.mark.parametrize("value", ["0", "off", "OFF", "false", "False", "no", " 0", "0 "])
def test_system_metrics_off_spellings(monkeypatch, value):
    from sparse_tui.base.sysmetrics import SystemSampler

    monkeypatch.setenv("SPARSE_TUI_SYSTEM_METRICS", value)
    assert SystemSampler.enabled() is False and SystemSampler().sample() == {}
    monkeypatch.setenv("SPARSE_TUI_SYSTEM_METRICS", "1")
    assert SystemSampler.enabled() is True
