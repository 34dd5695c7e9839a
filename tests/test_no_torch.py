"""An install without torch (issue 40: torch is the ``train`` extra): training commands say in one line how to add
it (exit 2, no traceback, nothing written); the console's launch refuses the same way. Torch is hidden from the
child process by an import hook that finds no ``torch`` (as in a venv without it).
.ci/installed checks the real thing: the wheel in a venv without torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HIDE = ("import sys\n"
        "class NoTorch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch' or name.startswith('torch.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoTorch())\n")


def _cli(*args: str) -> subprocess.CompletedProcess:
    code = HIDE + f"sys.argv = ['sparse-tui', *{list(args)!r}]\nfrom sparse_tui.cli import main\nmain()\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})


@pytest.mark.parametrize("args", [("run", "smoke", "--headless"), ("run", "smoke", "--detach"), ("doctor",)])
def test_training_without_torch_is_one_line_and_exit_2(tmp_path: Path, args):
    r = _cli(*args, *(("--runs-dir", str(tmp_path / "runs")) if args[0] == "run" else ()))
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert 'pip install "sparse-tui[train]"' in line and "download.pytorch.org/whl/cpu" in line
    assert not (tmp_path / "runs").exists()


def test_the_console_launch_refuses_without_torch():
    code = HIDE + ("from sparse_tui.executors import ExecutorError, ExecutorOptions\n"
                   "from sparse_tui.tui.actions import check_executor\n"
                   "try:\n    check_executor(ExecutorOptions())\nexcept ExecutorError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith('training needs torch, which this install lacks: pip install "sparse-tui[train]"')
