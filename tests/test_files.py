"""Issue 30 item 1: one writer for every file the tool writes (sparse_tui/base/files.py). Figures (``--plot`` of
``show``, ``fit`` and ``reproduce``) replaced a device node, a symlink and a 0600 file with a 0644 regular file, and
named their hidden temporary file in errors; each case here failed on 3452e68."""

from __future__ import annotations

import errno
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
from tui.conftest import fill_store
from typer.testing import CliRunner

from sparse_tui.cli import app

pytest.importorskip("matplotlib", reason="the plot extra (in dev)")
PKG = Path(__file__).resolve().parent.parent / "sparse_tui"
RUN = "0000000c"  # fill_store's finished recall run


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    fill_store(d).close()
    return d


def _plot(store_dir: Path, target: Path, *cmd: str):
    args = list(cmd or ("show", RUN)) + ["--plot", str(target), "--runs-dir", str(store_dir)]
    return CliRunner().invoke(app, args, catch_exceptions=True)


def _one_line(res) -> str:
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert "Traceback" not in res.output
    (line,) = res.stderr.strip().splitlines()
    return line


def test_the_writer_is_the_only_os_replace_outside_the_store():
    """Every file the package writes goes through files.write_file: no other os.replace / Path.replace."""
    pattern = re.compile(r"\bos\.replace\(|\bos\.rename\(|\.replace\((?:tmp|tmp_name|part)\b")
    found = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py")
             if p.name != "files.py" and "store" not in p.relative_to(PKG).parts and pattern.search(p.read_text())]
    assert found == []
    assert pattern.search((PKG / "base" / "files.py").read_text())


def test_a_device_node_named_like_the_figure_is_refused_and_stays_a_device(store_dir, tmp_path):
    """``mknod full.png c 1 7; --plot full.png`` made the device node a regular file (as root, ``--plot /dev/full``
    would replace the machine's /dev/full)."""
    node = tmp_path / "full.png"
    if subprocess.run(["mknod", "-m", "666", str(node), "c", "1", "7"], capture_output=True).returncode:
        pytest.skip("mknod needs root")
    line = _one_line(_plot(store_dir, node))
    assert line == f"error: --plot {node}: is a character device, not a file to write; refused", line
    assert stat.S_ISCHR(os.lstat(node).st_mode)
    # reproduce refuses before it trains anything (its store is not even created)
    runs = tmp_path / "fresh"
    res = CliRunner().invoke(app, ["reproduce", "fig1c", "--size", "cpu", "--plot", str(node), "--runs-dir",
                                   str(runs)], catch_exceptions=True)
    assert "is a character device" in _one_line(res) and not runs.exists()
    assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_a_fifo_figure_is_refused_without_waiting(store_dir, tmp_path):
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    assert "is a FIFO, not a file to write" in _one_line(_plot(store_dir, fifo))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_0600_figure_keeps_its_mode_and_a_symlink_stays_a_symlink(store_dir, tmp_path):
    private = tmp_path / "private.png"
    private.write_bytes(b"old")
    os.chmod(private, 0o600)
    res = _plot(store_dir, private)
    assert res.exit_code == 0, res.output
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and private.read_bytes().startswith(b"\x89PNG")
    link = tmp_path / "latest.png"
    target = tmp_path / "target.png"
    target.write_bytes(b"old")
    link.symlink_to(target)
    res = _plot(store_dir, link)
    assert res.exit_code == 0, res.output
    assert link.is_symlink() and target.read_bytes().startswith(b"\x89PNG")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.png", "private.png", "runs", "target.png"]


@pytest.fixture
def read_only_dir(tmp_path: Path):
    """A folder nobody can write, root included: a read-only tmpfs (skipped where mounting is not allowed)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a read-only file system here")
    yield ro
    subprocess.run(["umount", str(ro)], capture_output=True)


def test_a_read_only_folder_names_the_figure_never_the_temporary(store_dir, read_only_dir, monkeypatch):
    """The error named ``.x.png.part16244``: the check before any work names the figure; and where the write
    itself fails (the check passed), the error still names the target."""
    target = read_only_dir / "x.png"
    line = _one_line(_plot(store_dir, target))
    assert line == f"error: --plot {target}: directory {read_only_dir} is not writable", line
    import sparse_tui.base.files as files
    from sparse_tui.base.files import WriteError, write_file

    monkeypatch.setattr(files, "problem", lambda *a, **k: None)
    with pytest.raises(WriteError) as e:
        write_file(target, lambda fh: fh.write(b"x"), binary=True, flag="--plot")
    assert str(e.value) == f"--plot {target}: cannot write: Read-only file system"
    assert e.value.errno == errno.EROFS and ".tmp" not in str(e.value)


def test_a_failed_write_leaves_nothing_and_the_old_file_intact(tmp_path):
    """An error inside the writer's callback: the old file stays, no temporary is left (named or O_TMPFILE)."""
    from sparse_tui.base.files import WriteError, write_file

    old = tmp_path / "table.csv"
    old.write_text("old\n")

    def boom(fh):
        fh.write("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(WriteError) as e:
        write_file(old, boom, flag="--output")
    assert str(e.value) == f"--output {old}: cannot write: No space left on device" and e.value.disk_full
    assert old.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["table.csv"]
