"""Issue 21 on the command line: tags, notes, archive and delete after launch (the console's rules), the failed run's
stored values, what next after a run, and the time estimate of --dry-run."""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tui.conftest import fill_store

from sparse_tui.store import RunStore

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
FINISHED, FAILED = "0000000c", "0000000d"


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True, env=ENV,
                          input=stdin, timeout=300)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    fill_store(d).close()
    return d


def test_tags_and_notes_after_launch_show_in_runs_and_exports(store_dir: Path):
    s = str(store_dir)
    assert _cli("tag", FINISHED, "--add", "baseline", "--add", "v2", "--runs-dir", s).returncode == 0
    assert _cli("tag", FINISHED, "--remove", "v2", "--add", "keep", "--runs-dir", s).returncode == 0
    assert RunStore(store_dir).get(FINISHED).tags == ["baseline", "keep"]
    r = _cli("tag", FINISHED, "--add", "two words", "--runs-dir", s)
    assert r.returncode == 2 and r.stderr.startswith("error: --add: tag 'two words'") and "Traceback" not in r.stderr
    assert _cli("note", FINISHED, "copy head at 140", "--runs-dir", s).returncode == 0
    assert _cli("note", FINISHED, "--runs-dir", s).stdout.strip() == "copy head at 140"
    r = _cli("note", FINISHED, "a\x1bb", "--runs-dir", s)
    assert r.returncode == 2 and "printable" in r.stderr
    listing = _cli("runs", "--runs-dir", s).stdout
    line = next(ln for ln in listing.splitlines() if FINISHED in ln)
    assert "baseline keep · copy head at 140" in line
    assert _cli("runs", "--tag", "keep", "--json", "--runs-dir", s).stdout.count('"run_id"') == 1
    rows = list(csv.DictReader(io.StringIO(_cli("export", FINISHED, "--runs-dir", s).stdout)))
    assert rows[0]["name"] == "recall-lr lr=0.01 seed=0" and rows[0]["tags"] == "baseline keep"
    assert rows[0]["note"] == "copy head at 140"
    assert _cli("note", FINISHED, "--clear", "--runs-dir", s).returncode == 0
    assert RunStore(store_dir).get(FINISHED).note is None


def test_delete_asks_naming_the_runs_and_refuses_live_ones(store_dir: Path):
    s = str(store_dir)
    r = _cli("delete", FINISHED, "--runs-dir", s, stdin="")  # no terminal: refused, nothing deleted
    assert r.returncode == 2 and "pass --yes" in r.stderr
    assert RunStore(store_dir).get(FINISHED)
    store = RunStore(store_dir)
    store.con.execute("UPDATE runs SET status='running', pid=? WHERE run_id=?", (os.getpid(), FAILED))
    store.con.commit()
    r = _cli("delete", FAILED, "--yes", "--runs-dir", s)
    assert r.returncode == 2 and "still queued or running" in r.stderr and "cancel them first" in r.stderr
    r = _cli("delete", FINISHED, "--yes", "--runs-dir", s)
    assert r.returncode == 0 and "deleted 1 run(s)" in r.stderr
    assert FINISHED not in [x.run_id for x in RunStore(store_dir).runs(reap=False)]


def test_delete_question_on_a_terminal(store_dir: Path):
    """The question names the runs; 'n' deletes nothing (a pseudo-terminal stands for the user)."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: sparse-tui on the terminal
        os.execvpe(sys.executable, [sys.executable, "-m", "sparse_tui", "delete", FINISHED, "--runs-dir",
                                    str(store_dir)], ENV)
    out = b""
    while b"Delete?" not in out:
        out += os.read(fd, 1024)
    os.write(fd, b"n\n")
    try:
        while True:
            chunk = os.read(fd, 1024)
            if not chunk:
                break
            out += chunk
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert f"{FINISHED} recall-lr lr=0.01 seed=0 (finished)" in text and "nothing deleted" in text
    assert os.waitstatus_to_exitcode(status) == 0
    assert RunStore(store_dir).get(FINISHED)


def test_archive_hides_runs_from_runs_until_asked(store_dir: Path):
    s = str(store_dir)
    r = _cli("archive", FINISHED, "--runs-dir", s)
    assert r.returncode == 0 and "archived 1 run(s)" in r.stderr
    assert FINISHED not in _cli("runs", "--runs-dir", s).stdout
    assert FINISHED in _cli("runs", "--archived", "--runs-dir", s).stdout
    assert _cli("archive", FINISHED, "--undo", "--runs-dir", s).returncode == 0
    assert FINISHED in _cli("runs", "--runs-dir", s).stdout


def test_store_of_schema_3_gains_the_new_columns(store_dir: Path):
    store = RunStore(store_dir)
    store.con.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    store.con.commit()
    store.close()
    again = RunStore(store_dir)  # migration 3 -> 4 on columns it already has: no error
    assert again.get(FINISHED).tags == [] and again.get(FINISHED).note is None


def test_headless_run_ends_with_what_next_and_dry_run_estimates(tmp_path: Path):
    preset = tmp_path / "tiny.toml"
    from tui.conftest import tiny_text

    preset.write_text(tiny_text(steps=40))
    runs = tmp_path / "runs"
    r = _cli("run", str(preset), "--headless", "--runs-dir", str(runs))
    assert r.returncode == 0, r.stderr
    rid = RunStore(runs).runs()[0].run_id
    m = re.search(rf"what next:\n  (\S*sparse-tui) --runs-dir {re.escape(str(runs))}\s", r.stderr)
    assert m and (shutil.which(m.group(1)) or Path(m.group(1)).is_file()), r.stderr  # runs as typed (issue 29)
    assert f"\n  {m.group(1)} show {rid} --runs-dir {runs}" in r.stderr
    d = _cli("run", str(preset), "--dry-run")
    assert d.returncode == 0 and "estimate: about " in d.stdout and "on one thread just now" in d.stdout


def test_parquet_to_a_terminal_is_refused(store_dir: Path):
    """Parquet is binary: without -o and with the terminal as stdout, one line and exit 2 (nothing written)."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(sys.executable, [sys.executable, "-m", "sparse_tui", "export", "--format", "parquet",
                                    "--runs-dir", str(store_dir)], ENV)
    out = b""
    try:
        while True:
            chunk = os.read(fd, 1024)
            if not chunk:
                break
            out += chunk
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 2
    assert b"binary output; pass --output FILE or redirect stdout" in out and b"PAR1" not in out
