"""benchmarks/gpu_session.sh, the prepared GPU session: its --dry-run lists the steps in order with their caps and the
atlas entries' H100 projections, cheapest first, runs nothing, and works on a CPU; bad arguments are one line, exit 2;
a real run stops each step at the budget and records it in OUT/summary.tsv."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_session.sh"


def session(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_dry_run_lists_steps_and_projections(tmp_path):
    out = tmp_path / "gpu"
    r = session(str(out), "--dry-run", "--budget", "540")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    steps = [ln.split()[0] for ln in lines[1:-1]]
    assert steps[:6] == ["wheels", "doctor", "tests", "bench", "evalbench", "probe"] and set(steps[6:]) == {"atlas"}
    atlas = [re.match(r"atlas\s+(\S+)\s+projected\s+(\d+) s", ln) for ln in lines if ln.startswith("atlas")]
    assert all(atlas) and len(atlas) >= 10
    keys = [m.group(1) for m in atlas]
    assert "fig13" in keys and "fig15_adam" in keys
    secs = {m.group(1): int(m.group(2)) for m in atlas}
    assert secs["fig15_adam"] == 0  # the same runs as fig14_left, which it follows: reproduce reuses them
    paid = [int(m.group(2)) for m in atlas if int(m.group(2))]
    assert paid == sorted(paid)  # cheapest first
    assert "projections from the H100 of 2026-11-26" in lines[-1] and "not measurements" in lines[-1]
    assert not out.exists()  # nothing run, nothing written


def test_bad_arguments_are_one_line_exit_2(tmp_path):
    for args, says in ((["--budget", "soon"], "--budget"), (["--steps", "doctor,warp"], "unknown step 'warp'"),
                       (["--frobnicate"], "unknown option")):
        r = session(str(tmp_path / "o"), *args)
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_step_is_stopped_at_the_budget_and_recorded(tmp_path):
    """On this CPU ``doctor --device cuda`` fails at once; the atlas entries get what is left of a 25 s budget."""
    out = tmp_path / "gpu"
    r = session(str(out), "--steps", "doctor", "--budget", "25")
    assert r.returncode == 0, r.stderr
    rows = [ln.split("\t") for ln in (out / "summary.tsv").read_text().splitlines()]
    assert [row[0] for row in rows] == ["doctor"] and rows[0][1] != "0"  # no CUDA here: doctor fails, recorded
    assert "cuda" in (out / "01_doctor.log").read_text().lower()
    r = session(str(out), "--steps", "atlas", "--budget", "5")
    assert r.returncode == 0 and "SKIP atlas_" in r.stdout  # under 20 s left: skipped, not started
