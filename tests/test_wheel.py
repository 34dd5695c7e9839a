"""The installed path (issue 29): the wheel of this tree, installed with its dependencies into a fresh virtual
environment outside the checkout, runs from an empty folder. The check itself is ``.ci/installed`` (what ``.ci/run``
calls after the suite); this test runs it and reads what it printed. It builds a wheel and installs torch and the
package's requirements, so it takes minutes (about 7 at load average 10-12 on the shared 2-core machine)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_wheel_installs_and_runs_from_an_empty_folder():
    env = {**os.environ, "PYTHON": sys.executable, "COLUMNS": "200"}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not (Path(p) / "sparse-tui").exists())  # only the fresh venv's sparse-tui runs
    r = subprocess.run(["bash", str(ROOT / ".ci" / "installed")], capture_output=True, text=True, env=env,
                       timeout=1800)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-4000:]
    n = len(list((ROOT / "presets").glob("*.toml")))
    assert f": {n} presets bundled (presets/ has {n})" in log
    assert re.search(r"^sparse-tui \d+\.\d+\.\d+", log, re.M)
    assert re.search(r"│ checks +│ smoke ", log) and re.search(r"│ blog_n80 +│ Blog 6", log)
    # the bundled preset, read from the installed package, not from this checkout
    # (each venv says it: the full one that trains smoke and the one without torch that refuses to)
    found = re.findall(r"^preset smoke: (\S+) \(bundled with sparse-tui\)$", log, re.M)
    assert any("/venv/lib/" in f for f in found), found
    assert found and all("site-packages/sparse_tui/bundled_presets/" in f and not f.startswith(str(ROOT))
                         for f in found)
    assert re.search(r"│ seed=0 +│ finished │", log)
    assert "measured: plateau_step = 1.56 · d^0.50 · T^0.98" in log
    assert "installed path passed" in log
