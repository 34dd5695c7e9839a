"""Issue 43: `sparse-tui runs` at 80 columns wrapped each run over 6 lines (a 3-character name column); it now uses
the console's columns and naming rules when the full table would wrap (one line per run), and takes the console's
filter expressions (--filter 'acc>0.9')."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tui.conftest import fill_linreg_sweep

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, columns: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": str(columns), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True, timeout=120,
                          env=env)


@pytest.fixture(scope="module")
def store40(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("runs40") / "runs"
    fill_linreg_sweep(d, values=tuple(range(8, 168, 8)), seeds=(0, 1)).close()  # 20 values of T x 2 seeds
    return d


def test_runs_at_80_columns_shows_each_run_on_one_line(store40):
    r = cli("runs", "--runs-dir", str(store40), columns=80)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    ids = [f"{i:08x}" for i in range(2, 42)]  # (id 1 is the batch's)
    assert all(sum(1 for ln in lines if rid in ln) == 1 for rid in ids), r.stdout
    assert len(lines) == 42 and max(len(ln) for ln in lines) <= 80  # the title, the header, one line per run
    row = next(ln for ln in lines if "00000029" in ln)
    assert "T=160 seed=1" in row and "finished" in row and "690" in row  # the swept values whole, the plateau
    wide = cli("runs", "--runs-dir", str(store40), columns=200)  # room for the full table: it stays
    assert "forecast" in wide.stdout and "device" in wide.stdout


def test_runs_takes_the_consoles_filter(store40):
    r = cli("runs", "--runs-dir", str(store40), "--filter", "T>150 seed=1", columns=80)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("2 run(s) in") and "filter 'T>150 seed=1'" in r.stdout
    assert "00000029" in r.stdout and "00000027" in r.stdout and "00000028" not in r.stdout
    j = cli("runs", "--runs-dir", str(store40), "--filter", "T<9", "--json", columns=80)
    assert j.returncode == 0 and j.stdout.count('"run_id"') == 2  # T = 8 at both seeds
    bad = cli("runs", "--runs-dir", str(store40), "--filter", "acx>1", columns=80)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --filter: filter 'acx>1': no key 'acx'")
    assert len(bad.stderr.splitlines()) == 1 and "Traceback" not in bad.stderr
