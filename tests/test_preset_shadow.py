"""Issue 43: `presets copy blog_n80 .` then `run blog_n80` trained the bundled preset and said nothing of
./blog_n80.toml. Both commands now name the file that a bare name leaves aside."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200",
       "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True, timeout=300,
                          env=ENV, cwd=cwd)


def test_a_copy_in_the_working_folder_is_named_by_copy_and_by_run(tmp_path):
    r = cli("presets", "copy", "blog_n80", ".", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "blog_n80.toml").is_file(), r.stderr
    assert "warning: sparse-tui run blog_n80 reads" in r.stderr and "(bundled), not blog_n80.toml" in r.stderr
    r = cli("run", "blog_n80", "--dry-run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("preset blog_n80: ") and lines[0].endswith("(bundled with sparse-tui)")
    assert lines[1] == ("warning: ./blog_n80.toml is not used: a bare name means ./presets/blog_n80.toml else the "
                        "bundled preset (run ./blog_n80.toml to train that file)")
    r = cli("presets", "copy", "blog_n80", cwd=tmp_path)  # your ./presets copy: run reads it, and says what it hides
    assert r.returncode == 0 and "warning" not in r.stderr
    r = cli("run", "blog_n80", "--dry-run", cwd=tmp_path)
    assert "your presets/blog_n80.toml shadows the bundled blog_n80" in r.stderr
    r = cli("run", "./blog_n80.toml", "--dry-run", cwd=tmp_path)  # a path: no note
    assert r.returncode == 0 and "warning" not in r.stderr
