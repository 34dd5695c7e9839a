"""Presets under hostile input (issue 45): ``presets copy`` copied any existing path (special files included), a FIFO
or a link to /dev/zero in ./presets hung or crashed ``sparse-tui presets`` and the console (``timing.timing``
opened every file), some messages misled, and an explicit ``--presets-dir`` that does not exist fell back to the
bundled presets without a word. Each case is the issue's shortest reproduction. Cases that hung run as real
processes with a timeout (a hang guard, not a timing threshold)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TINY_PRESET
from typer.testing import CliRunner

from sparse_tui.cli import app
from sparse_tui.presets import catalog
from sparse_tui.presets.timing import timing

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}


def _cli(*args: str, cwd: Path | None = None):
    if cwd is not None:
        old = os.getcwd()
        os.chdir(cwd)
    try:
        return CliRunner().invoke(app, list(args), catch_exceptions=False)
    finally:
        if cwd is not None:
            os.chdir(old)


def _proc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True, timeout=120,
                          env=ENV, cwd=cwd)


def _line(r) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


class Hung(BaseException):
    """Not an OSError nor an Exception: no `except OSError` in the code under test swallows it."""


@pytest.fixture(autouse=True)
def hang_guard():
    """A case that used to hang (a FIFO opened in this process) fails after 2 minutes instead of stalling CI."""
    def _hang(signum, frame):
        raise Hung("hung (issue 45: a FIFO or a device was opened and waited on)")

    old = signal.signal(signal.SIGALRM, _hang)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_the_reader_takes_regular_files_only_and_caps_their_size(tmp_path):
    from sparse_tui.base.files import ReadError, open_regular, read_regular

    fifo = tmp_path / "f.toml"
    os.mkfifo(fifo)
    with pytest.raises(ReadError, match="a FIFO, not a preset"):
        open_regular(fifo, "a preset")  # O_NONBLOCK: no writer needed to be refused
    with pytest.raises(ReadError, match="a device, not x"):
        read_regular("/dev/zero", 10, "x")
    (tmp_path / "zero.toml").symlink_to("/dev/zero")
    with pytest.raises(ReadError, match="a device"):
        read_regular(tmp_path / "zero.toml", 10, "x")
    (tmp_path / "big").write_bytes(b"a" * 11)
    with pytest.raises(ReadError, match="more than 10 bytes"):
        read_regular(tmp_path / "big", 10, "x")
    assert read_regular(tmp_path / "big", 11, "x") == b"a" * 11
    (tmp_path / "nothing").symlink_to(tmp_path / "gone")
    with pytest.raises(ReadError, match="dangling"):
        read_regular(tmp_path / "nothing", 10, "x")


def test_presets_copy_refuses_what_is_not_a_preset(tmp_path):
    out = tmp_path / "out"
    for src, words in [("/etc/hostname", "not a preset (a .toml file)"), ("/dev/zero", "not a preset (a .toml file)")]:
        r = _cli("presets", "copy", src, str(out))
        assert r.exit_code == 2 and words in _line(r)
    bad = tmp_path / "bad.toml"
    bad.write_text('[train]\nlr = "fast"\n')
    r = _cli("presets", "copy", str(bad), str(out))
    assert r.exit_code == 2 and "train.lr" in _line(r) and "copies valid presets only" in r.stderr
    assert not out.exists()
    good = tmp_path / "good.toml"
    good.write_text(TINY_PRESET)
    r = _cli("presets", "copy", str(good), str(out))
    assert r.exit_code == 0 and (out / "good.toml").read_text() == TINY_PRESET


def test_presets_copy_of_a_fifo_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "f.toml")
    r = _proc("presets", "copy", "./f.toml", "out", cwd=tmp_path)
    assert r.returncode == 2 and "f.toml: a FIFO, not a preset file" in _line(r)
    assert not (tmp_path / "out").exists()


def test_presets_copy_messages_say_what_is_wrong(tmp_path):
    r = _cli("presets", "copy", "", str(tmp_path / "out"))
    assert r.exit_code == 2 and "give a preset name" in _line(r)
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "nowhere")
    r = _cli("presets", "copy", "smoke", str(link))
    assert r.exit_code == 2 and "a link to nothing (dangling), not a folder" in _line(r)


def test_presets_and_the_catalogue_survive_a_fifo_and_a_link_to_dev_zero(tmp_path):
    own = tmp_path / "presets"
    own.mkdir()
    os.mkfifo(own / "pipe.toml")
    (own / "zero.toml").symlink_to("/dev/zero")
    (own / "mine.toml").write_text("# Time: 8.4 s on a 2-core CPU\n" + TINY_PRESET)
    mine = [i for i in catalog.catalogue(own) if i.group == "yours"]  # what the console lists too
    assert [(i.name, i.timing.duration) for i in mine] == [("mine", "8.4 s")]
    assert timing(own / "zero.toml").duration == "-" and timing(own / "pipe.toml").duration == "-"
    r = _proc("presets", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "mine" in r.stdout and "pipe" not in r.stdout and "zero" not in r.stdout


@pytest.mark.parametrize("cmd", [["presets"], ["presets", "copy", "smoke", "out"], ["run", "smoke", "--dry-run"],
                                 ["reproduce", "fig1c", "--size", "cpu", "--list"]])
def test_an_explicit_presets_dir_that_does_not_exist_is_exit_2(tmp_path, cmd):
    r = _cli(*cmd, "--presets-dir", str(tmp_path / "typo"), cwd=tmp_path)
    assert r.exit_code == 2 and f"--presets-dir {tmp_path / 'typo'}: no such folder" in _line(r)


def test_a_presets_dir_that_is_a_file_is_said(tmp_path):
    f = tmp_path / "hostname"
    f.write_text("box\n")
    r = _cli("presets", "--presets-dir", str(f))
    assert r.exit_code == 2 and "not a folder" in _line(r)
