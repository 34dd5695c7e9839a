"""A new atlas figure is one module plus one entry (issue 31; docs/ARCHITECTURE.md, "A new figure"): the worked
example of the docs, tests/plateau_figure.py, added to the atlas here, is reproduced end to end by ``sparse-tui
reproduce`` (its preset trained, its report printed, its figure drawn) with no other change to the package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from plateau_figure import PLATEAUS, plateau_figure, plateau_report
from typer.testing import CliRunner

from sparse_tui import atlas
from sparse_tui.store import RunStore

ROOT = Path(__file__).resolve().parent.parent


def test_the_architecture_doc_shows_the_example_as_it_is():
    """docs/ARCHITECTURE.md's "A new figure" shows tests/plateau_figure.py verbatim."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = doc.split("### A new figure", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert (ROOT / "tests" / "plateau_figure.py").read_text() in blocks


def test_reproduce_trains_reports_and_draws_a_registered_figure(tmp_path: Path, monkeypatch):
    pytest.importorskip("matplotlib")
    from sparse_tui.cli import app

    presets = tmp_path / "presets"
    presets.mkdir()
    text = (ROOT / "presets" / "paper_fig1c_theory.toml").read_text()  # the reduced flow on a 2 x 1 grid: seconds
    text = text.replace('"task.d" = [16, 32, 64, 128, 256]', '"task.d" = [16, 64]')
    text = text.replace('"task.T" = [64, 256, 1024, 4096]', '"task.T" = [64]').replace("steps = 100000", "steps = 3000")
    (presets / "paper_fig1c_theory.toml").write_text(text)
    monkeypatch.setitem(atlas.ENTRIES, PLATEAUS.key, PLATEAUS)  # the one registry line
    assert PLATEAUS.report_fn() is plateau_report and PLATEAUS.plot_fn() is plateau_figure
    png, runs = tmp_path / "plateaus.png", tmp_path / "runs"
    r = CliRunner().invoke(app, ["reproduce", "plateaus", "--size", "cpu", "--workers", "1", "--runs-dir", str(runs),
                                 "--presets-dir", str(presets), "--plot", str(png)])
    assert r.exit_code == 0, r.output
    store = RunStore(runs)
    recs = sorted(store.runs(), key=lambda r: r.config["task"]["d"])
    assert [r.status for r in recs] == ["finished", "finished"] and all(r.plateau_step for r in recs)
    assert "plateaus — Plateaus: the plateau of each run" in r.output
    for rec in recs:
        assert f"  {rec.label}: {rec.plateau_step:g}" in r.output
    assert png.read_bytes()[:4] == b"\x89PNG"
