"""Issue 30 item 7, the smaller items: each failed on 3452e68. ``--threshold`` errors name the flag (1e308 gave "target
'plateau_step' is 0 in row 0") and say that accuracy lies in [0, 1]; ``note RUN ''`` deleted the note; ``tag`` and
``note`` on a read-only store did not name the file; ``reproduce`` on a read-only store refused although every run
was stored; ``tag --add café`` was refused by a message that said "letters"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import read_only_copy, stored_preset
from tui.conftest import fill_store

from sparse_tui.store import RunStore

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
RUN = "0000000c"


def _cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True, env=ENV,
                          timeout=timeout)


def _line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    return line


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    fill_store(d).close()
    return d


def test_a_threshold_every_run_is_past_at_once_names_the_flag(store_dir):
    line = _line(_cli("fit", "--threshold", "1e308", "--preset", "toy-sweep", "--runs-dir", str(store_dir)))
    assert line.startswith("error: --threshold 1e+308: run 0000000") and "past it at its first evaluation" in line


ACC_PRESET = """\
name = "accs"
seeds = [0]
[task]
kind = "recall"
n_tokens = 8
n_pairs = 2
[model]
kind = "transformer"
n_layers = 1
d_model = 16
[train]
steps = 100
device = "cpu"
[plateau]
metric = "test/acc"
mode = "above"
value = 0.5
[sweep]
"task.n_tokens" = [8, 16, 32, 64]
"""


def test_a_threshold_on_accuracy_runs_says_accuracy_lies_in_0_1(tmp_path):
    _, runs, store, _, ids = stored_preset(tmp_path, ACC_PRESET)
    for i, rid in enumerate(ids):
        steps = list(range(0, 101, 10))
        store.claim_runs([rid], device="cpu", versions={})
        store.log_metrics_many(rid, steps, {"test/acc": [min(1.0, s / (20.0 + 10 * i)) for s in steps]})
        store.finish(rid, "finished", plateau_step=10.0 + 5 * i, step=100)
    store.close()
    line = _line(_cli("fit", "--threshold", "2", "--vars", "n_tokens", "--runs-dir", str(runs)))
    assert line == "error: --threshold: test/acc is an accuracy, it lies in [0, 1]; got 2", line
    ok = _cli("fit", "--threshold", "0.9", "--vars", "n_tokens", "--runs-dir", str(runs))
    assert ok.returncode == 0, ok.stderr


def test_an_empty_note_is_refused_and_the_note_stays(store_dir):
    assert _cli("note", RUN, "kept", "--runs-dir", str(store_dir)).returncode == 0
    line = _line(_cli("note", RUN, "", "--runs-dir", str(store_dir)))
    assert line == "error: note: the note is empty; to remove the note, use --clear"
    assert RunStore(store_dir).get(RUN).note == "kept"
    assert _cli("note", RUN, "--clear", "--runs-dir", str(store_dir)).returncode == 0
    assert RunStore(store_dir).get(RUN).note is None


def test_tag_and_note_on_a_read_only_store_name_the_file(store_dir):
    with read_only_copy(store_dir) as ro:
        for args, what in ((("tag", RUN, "--add", "x"), "change tags"), (("note", RUN, "hello"), "change the note")):
            line = _line(_cli(*args, "--runs-dir", str(ro)))
            assert line == (f"error: {ro / 'runs.db'}: the run store is read-only (file system or permissions); "
                            f"cannot {what}"), line


def test_a_tag_with_a_non_ascii_letter_is_refused_by_an_accurate_message(store_dir):
    line = _line(_cli("tag", RUN, "--add", "café", "--runs-dir", str(store_dir)))
    assert line == ("error: --add: tag 'café': use 1-40 characters, each an ASCII letter, a digit or one of "
                    "_.:+=/@- (no spaces); 'é' is not one of them"), line


def test_reproduce_on_a_read_only_store_reports_when_every_run_is_stored(tmp_path):
    """fig1a's runs (the reduced flow, seconds) trained into a store, then the store seen read-only: reproduce
    reports (as fit does on the same copy); an entry with runs still to train is refused, naming the store."""
    runs = tmp_path / "runs"
    first = _cli("reproduce", "fig1a", "--size", "cpu", "--runs-dir", str(runs))
    assert first.returncode == 0, first.stderr
    with read_only_copy(runs) as ro:
        again = _cli("reproduce", "fig1a", "--size", "cpu", "--runs-dir", str(ro))
        assert again.returncode == 0, again.stderr
        assert "5 run(s): 5 already in the store, 0 to train" in again.stderr, again.stderr
        assert again.stdout.startswith("fig1a") and first.stdout.endswith(again.stdout)
        line = _line(_cli("reproduce", "fig1c", "--size", "cpu", "--runs-dir", str(ro)))
        assert line == (f"error: {ro / 'runs.db'}: the run store is read-only (file system or permissions); fig1c "
                        "needs 20 run(s) trained (pass another --runs-dir)"), line
