"""The GPU projection (sparse_tui/lifecycle/estimate.py ``project_h100``): the H100 cost model reproduces the two
sweeps it was
fitted on, ``run --dry-run`` prints it labelled as a projection with its source and date, and every GPU-sized
paper preset projects to at most about an hour per figure."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from sparse_tui.lifecycle.estimate import H100_DATE, project_h100
from sparse_tui.presets.loading import expand, load_preset

ROOT = Path(__file__).resolve().parent.parent


def test_the_model_reproduces_the_sweeps_it_was_fitted_on():
    """docs/PERFORMANCE.md (GPU, 2026-11-26): the scheduler's phase of sweep_bench took 21.6 s for blog_nembd and
    30.3 s for paper_fig4_recall at 2,000 steps on the H100."""
    blog = project_h100(ROOT / "presets" / "blog_nembd.toml")
    fig4 = project_h100(expand(load_preset(ROOT / "presets" / "paper_fig4_recall.toml", ["train.steps=2000"])))
    assert blog.runs == 24 and blog.stacks == 1 and blog.evaluations == 24 * 21
    assert blog.seconds == pytest.approx(21.6, abs=0.3)
    assert fig4.runs == 9 and fig4.seconds == pytest.approx(30.3, abs=0.3)
    # linear in the steps of a stack: the shipped 100,000-step Fig. 4 preset costs 50x the steps of the 2,000
    whole = project_h100(ROOT / "presets" / "paper_fig4_recall.toml")
    assert whole.train_s == pytest.approx(50 * fig4.train_s, rel=1e-9)
    assert whole.short() == "~20 min 36 s on one H100 (projected, 2026-11-26)"


def test_ode_presets_have_no_projection():
    assert project_h100(ROOT / "presets" / "paper_fig1c_theory.toml") is None


def test_gpu_presets_fit_about_an_hour_per_figure():
    per_figure: dict[str, float] = defaultdict(float)
    for p in sorted(glob.glob(str(ROOT / "presets" / "paper_*.toml"))):
        name = Path(p).stem
        if name.endswith("_cpu") or not re.match(r"paper_fig\d+", name):  # a section's preset (paper_sec23_*) is
            continue  # one size for both (the atlas names it for cpu and gpu), no GPU-size figure preset
        pr = project_h100(p)
        if pr is None:
            continue
        text = Path(p).read_text()
        assert "# GPU size (issue 35): projected about" in text and "Covers" in text, name  # says what it covers
        fig = re.match(r"paper_fig(\d+)", name).group(1)
        if name != "paper_fig15_adam":  # the same runs as paper_fig14_left (reproduce reuses them)
            per_figure[fig] += pr.seconds
    assert per_figure and max(per_figure.values()) <= 70 * 60, dict(per_figure)


def test_dry_run_prints_the_projection(tiny_preset):
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "run", str(tiny_preset), "--dry-run"], capture_output=True,
                       text=True, timeout=240, env={**os.environ, "COLUMNS": "300"})
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("GPU projection:"))
    # a range on the card named (the lent H200), from the H100 model of its date until a calibration exists
    assert re.match(r"GPU projection: H200: \d+–\d+ s \(", line), line
    assert H100_DATE in line and "docs/PERFORMANCE.md" in line and "not measured" in line
