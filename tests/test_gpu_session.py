"""benchmarks/gpu_session.sh, the prepared GPU session, run here in its ``--device cpu`` mode (the same script, CPU
sizes): every step runs, each prints 5 lines, and OUT holds at most 3 files after every step (the archive of the
work folder without checkpoints, the summary, the last log), whose contents are checked; wheels or imports that fail
stop the session at once with one line; --dry-run lists the steps in order of value; bad arguments, and an OUT
inside the checkout, are one line, exit 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_session.sh"
STEPS = ["blog", "tf32", "doctor", "tests", "bench", "evalbench", "paper", "atlas"]


def session(*args: str, cwd: Path = ROOT, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(["bash", str(SCRIPT), *args], check=False, capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=e)


def test_dry_run_lists_steps_in_order_of_value(tmp_path):
    out = tmp_path / "gpu"
    r = session(str(out), "--dry-run", "--budget", "540")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    steps = [ln.split()[0] for ln in lines[1:-1]]
    assert steps[:8] == ["wheels", *STEPS[:-1]] and set(steps[8:]) == {"atlas"}
    atlas = [re.match(r"atlas\s+(\S+)\s+projected\s+(\d+) s", ln) for ln in lines if ln.startswith("atlas")]
    assert all(atlas) and len(atlas) >= 10
    secs = {m.group(1): int(m.group(2)) for m in atlas}
    assert secs["fig15_adam"] == 0  # the same runs as fig14_left, which it follows: reproduce reuses them
    paid = [int(m.group(2)) for m in atlas if int(m.group(2))]
    assert paid == sorted(paid)  # cheapest first
    assert "not measurements" in lines[-1]
    assert not out.exists()  # nothing run, nothing written


def test_bad_arguments_and_an_out_inside_the_checkout_are_one_line_exit_2(tmp_path):
    for args, says in ((["--budget", "soon"], "--budget"), (["--steps", "doctor,warp"], "unknown step 'warp'"),
                       (["--frobnicate"], "unknown option"), (["--device", "tpu"], "--device")):
        r = session(str(tmp_path / "o"), *args)
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    # a relative OUT is taken from where the script is called: from the checkout's root it would land inside it
    r = session("gpu_out", "--device", "cpu")
    assert r.returncode == 2 and "inside the checkout" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (ROOT / "gpu_out").exists()


def test_wheels_or_imports_that_fail_stop_the_session_at_once(tmp_path):
    bad = tmp_path / "whl"
    bad.mkdir()
    (bad / "broken-1.0-py3-none-any.whl").write_text("not a zip")
    out = tmp_path / "out"
    r = session(str(out), "--device", "cpu", "--wheels", str(bad), "--work", str(tmp_path / "w1"), timeout=120)
    assert r.returncode == 3, r.stdout + r.stderr
    stops = [ln for ln in r.stdout.splitlines() if "STOP" in ln]
    assert len(stops) == 1 and stops[0].startswith("gpu_session.sh: STOP at wheels:")
    assert sorted(p.name for p in out.iterdir()) == ["last.log", "session.tgz", "summary.tsv"]
    rows = [ln.split("\t") for ln in (out / "summary.tsv").read_text().splitlines() if not ln.startswith("#")]
    assert [r_[0] for r_ in rows] == ["wheels"] and rows[0][1] != "0"  # nothing ran after it
    # imports that fail (here: a python without the project's packages) stop it the same way
    r = session(str(out), "--device", "cpu", "--work", str(tmp_path / "w2"), env={"PYTHON": "/usr/bin/false"},
                timeout=120)
    assert r.returncode == 3 and "STOP at imports" in r.stdout
    rows = [ln.split("\t")[0] for ln in (out / "summary.tsv").read_text().splitlines() if not ln.startswith("#")]
    assert rows == ["imports"]


@pytest.mark.slow
def test_the_whole_session_on_cpu_brings_its_evidence_home(tmp_path):
    """Every step in CPU sizes (about a minute on a 2-core machine); OUT given relative to the caller's folder."""
    r = session("out", "--device", "cpu", "--work", str(tmp_path / "work"), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["last.log", "session.tgz", "summary.tsv"]
    # 5 lines per step: "=== name rc=...", 3 lines of its log, "--- packed: ..."
    lines = r.stdout.splitlines()
    heads = [i for i, ln in enumerate(lines) if ln.startswith("=== ")]
    assert [lines[i].split()[1] for i in heads] == ["imports", *STEPS]
    assert all(lines[i + 4].startswith("--- packed:") for i in heads)
    assert len(lines) == 2 + 5 * len(heads)
    rows = {ln.split("\t")[0]: ln.split("\t") for ln in (out / "summary.tsv").read_text().splitlines()
            if not ln.startswith("#")}
    assert list(rows) == ["imports", *STEPS] and all(row[1] == "0" for row in rows.values()), rows
    assert "atlas plan only" in (out / "last.log").read_text()

    with tarfile.open(out / "session.tgz") as tar:
        names = {n.lstrip("./") for n in tar.getnames()}
        read = lambda n: tar.extractfile("./" + n).read().decode()  # noqa: E731
        assert {f"logs/{i + 1:02d}_{s}.log" for i, s in enumerate(["imports", *STEPS])} <= names
        assert {"summary.tsv", "blog.json", "tf32.json", "bench.json", "eval_bench.json", "paper.json",
                "atlas_plan.txt", "runs_blog/runs.db", "runs_tf32/runs.db", "runs/runs.db"} <= names
        assert not any("checkpoints" in n for n in names)  # the archive leaves the checkpoints behind
        blog, tf32 = json.loads(read("blog.json")), json.loads(read("tf32.json"))
        assert blog["rc"] == 0 and blog["seconds"] > 0 and "--verbose" in blog["command"]
        assert 'train.precision="tf32"' in tf32["command"]
        assert "start-up" in read("logs/02_blog.log")  # --verbose: the start-up phases
        bench = json.loads(read("bench.json"))
        assert {row["phase"] for row in bench["runs"] if "phase" in row} == {"plain loop", "scheduler (auto)"}
        assert bench["failed"] is False
        assert json.loads(read("eval_bench.json"))["rows"][0]["preset"] == "presets/blog_n80.toml"
        paper = json.loads(read("paper.json"))
        assert 0 < paper["model_steps_done"] < paper["model_steps_total"]  # stopped at its cap: the first seconds
        assert paper["projected_s"] > 0 and "H100" in paper["projection"] and paper["card"] == "H200"
        assert len(read("atlas_plan.txt").splitlines()) >= 10
