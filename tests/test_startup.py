"""Start-up phases (sparse_tui/base/startup.py): ``run --verbose`` prints each training process's imports, CUDA context,
build, trial step, first capture and first evaluation times in the batch log; without it, nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from sparse_tui.base import startup


def _run(tiny_preset, runs_dir, *extra):
    return subprocess.run([sys.executable, "-m", "sparse_tui", "run", str(tiny_preset), "--headless", "--runs-dir",
                           str(runs_dir), "--set", "train.steps=20", *extra], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_verbose_prints_the_phases_in_the_batch_log(tiny_preset, runs_dir):
    r = _run(tiny_preset, runs_dir, "--verbose")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "start-up (pid" in ln]
    assert len(lines) == 1, r.stderr
    times = dict(re.findall(r"(imports|build|trial step|first evaluation) (\d+\.\d+) s", lines[0]))
    assert sorted(times) == ["build", "first evaluation", "imports", "trial step"]
    assert float(times["imports"]) > 0.1  # torch alone takes longer than that
    assert "cuda context skipped (CPU)" in lines[0] and "first capture none (CPU)" in lines[0]
    quiet = _run(tiny_preset, runs_dir)
    assert quiet.returncode == 0 and "start-up" not in quiet.stderr


def test_line_on_cuda(monkeypatch):
    monkeypatch.setattr(startup, "PHASES", {"imports": 3.0, "cuda context": 0.5, "trial step": 0.25})
    assert startup.line("cuda").endswith("imports 3.00 s, cuda context 0.50 s, trial step 0.25 s, first capture none "
                                         "(eager)")
