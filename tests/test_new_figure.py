"""A new atlas figure is one module plus one entry plus one preset (issues 31, 39; docs/ARCHITECTURE.md, "A new
figure"): the worked example is built from the page's own text, its entry added to the atlas, and ``sparse-tui
reproduce`` trains its preset, prints its report ending with the claim and the verdict its check decides, and draws
its figure, with no other change to the package."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparse_tui import atlas
from sparse_tui.store import RunStore

ROOT = Path(__file__).resolve().parent.parent


def example_blocks() -> list[str]:
    """The python blocks of ARCHITECTURE.md's "A new figure": the module, then its entry."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = doc.split("### A new figure", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_reproduce_builds_the_documented_figure_and_decides_its_verdict(tmp_path: Path, monkeypatch):
    pytest.importorskip("matplotlib")
    from sparse_tui.cli import app

    module, entry = example_blocks()
    (tmp_path / "plateaus.py").write_text(module)  # the figure's module, as the page writes it
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "plateaus", raising=False)
    example = importlib.import_module("plateaus")
    # the entry as the page writes it, in an atlas module's namespace (E: where the figures' modules live; here the
    # example's module is top level)
    e = eval(entry.strip().rstrip(","), {"Entry": atlas.Entry, "PAPER": "arXiv 2505.17863", "E": ""})  # noqa: S307
    assert e.claim_of() is example.CLAIM
    assert e.report_fn() is example.plateau_report and e.plot_fn() is example.plateau_figure
    monkeypatch.setitem(atlas.ENTRIES, e.key, e)  # the one registry line

    presets = tmp_path / "presets"
    presets.mkdir()
    text = (ROOT / "presets" / "paper_fig1c_theory.toml").read_text()  # the reduced flow on a 2 x 1 grid: seconds
    text = text.replace('"task.d" = [16, 32, 64, 128, 256]', '"task.d" = [16, 64]')
    text = text.replace('"task.T" = [64, 256, 1024, 4096]', '"task.T" = [64]').replace("steps = 100000", "steps = 3000")
    (presets / "paper_fig1c_theory.toml").write_text(text)
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
    assert "  claim: every run leaves its plateau\n  verdict: reproduced — 2 of 2 runs leave their plateau" in r.output
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_the_examples_check_decides_each_word():
    """The example's check reads its report's typed data: every run, some, none."""
    ns: dict = {}
    exec(example_blocks()[0], ns)  # noqa: S102 - the page's own example, as test_reproduce_... imports it
    rep = lambda *pls: type("R", (), {"data": ns["Plateaus"]([{"plateau": p} for p in pls])})()  # noqa: E731
    assert ns["CLAIM"].check(None, rep(10.0, 20.0)) == ("reproduced", "2 of 2 runs leave their plateau")
    assert ns["CLAIM"].check(None, rep(10.0, None))[0] == "in kind"
    assert ns["CLAIM"].check(None, rep(None))[0] == "not reproduced"
