"""Issue 43, defect 6: `show RUN` drew a flat accuracy of 0.018-0.0195 on an auto range, so it looked like a steep
rise. Fractions (accuracy, attention to the relevant tokens) are drawn on [0, 1]."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from sparse_tui.base.plotting import chart
from sparse_tui.store import RunStore

ROOT = Path(__file__).resolve().parent.parent


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_a_flat_accuracy_is_drawn_on_the_unit_range(tmp_path):
    xs = list(range(0, 300, 10))
    ys = [0.018 + 0.0015 * x / 300 for x in xs]
    auto = _plain(chart({"test/acc": (xs, ys)}, title="acc", width=60, height=12))
    fixed = _plain(chart({"test/acc": (xs, ys)}, title="acc", width=60, height=12, ylim=(0.0, 1.0)))
    assert "1.00┤" not in auto and "1.00┤" in fixed and "0.00┤" in fixed
    store = RunStore(tmp_path / "runs")
    from sparse_tui.presets.loading import expand, validate_preset_data

    raw = {"name": "t", "task": {"kind": "recall", "n_tokens": 8, "n_pairs": 2},
           "model": {"kind": "transformer", "n_layers": 1, "d_model": 8}, "train": {"steps": 300, "device": "cpu"}}
    _, (rid,) = store.create_runs(expand(validate_preset_data(raw, "t.toml", path=Path("t.toml"))))
    store.log_metrics_many(rid, xs, {"test/acc": ys, "test/loss": [2.0] * len(xs)})
    store.finish(rid, "finished", step=300)
    store.close()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "100", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "show", rid, "--runs-dir", str(tmp_path / "runs")],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    acc = _plain(r.stdout).split("test accuracy")[1]
    assert "1.00┤" in acc and "0.00┤" in acc
