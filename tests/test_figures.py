"""Figures with matplotlib: ``sparse-tui fit --plot`` and ``sparse-tui show RUN --plot`` (sparse_tui/figures.py), and
the one-line install hint when the optional extra is missing."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import stored_preset
from typer.testing import CliRunner

from sparse_tui.cli import app
from sparse_tui.store import RunStore

pytest.importorskip("matplotlib")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

SYNTH = """\
name = "synth"
seeds = [0, 1]
[task]
kind = "linreg"
d = 16
T = 64
[model]
kind = "ode"
[train]
optimizer = "sgd"
lr = 1.0
steps = 100000
[eval]
every = 1000
[plateau]
metric = "test/loss"
mode = "fraction"
value = 0.2
[sweep]
"task.d" = [16, 32, 64]
"task.B" = [1, 2, 4]
"""


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """Runs with plateau = 1.5 sqrt(d) 4096 / B (the Fig. 2 left law at T = 4096); d = 64, B = 1 never emerges
    (censored). Each run logs a test-loss curve that sits at 0.5 and drops at its plateau."""
    _, runs, store, specs, ids = stored_preset(tmp_path, SYNTH.replace("T = 64", "T = 4096"))
    for spec, rid in zip(specs, ids):
        t = spec.config.task
        pl = 1.5 * math.sqrt(t.d) * t.T / t.B * (1.0 + 0.01 * spec.seed)
        never = t.d == 64 and t.B == 1
        steps = list(range(0, 100001, 1000))
        loss = [0.5 if (never or s < pl) else 0.5 * math.exp(-(s - pl) / 2000) for s in steps]
        store.log_metrics_many(rid, steps, {"test/loss": loss})
        store.finish(rid, "finished", plateau_step=None if never else pl, step=100000,
                     summary={"final": {"test/loss": loss[-1]}})
    store.close()
    return runs


def test_fit_plot_writes_png_and_svg_with_fit_paper_law_and_censored(store_dir, tmp_path):
    png = tmp_path / "fit.png"
    r = invoke("fit", "--runs-dir", str(store_dir), "--vars", "d,B", "--plot", str(png))
    assert r.exit_code == 0, r.output
    assert "d: +0.500" in r.stdout and "B: -1.000" in r.stdout  # the text report is printed as without --plot
    data = png.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 20_000
    assert f"wrote {png}" in r.stderr
    svg = tmp_path / "fit.svg"
    r = invoke("fit", "--runs-dir", str(store_dir), "--vars", "d,B", "--plot", str(svg), "--paper", "fig2_left")
    assert r.exit_code == 0, r.output
    text = svg.read_text()
    # svg.fonttype = none keeps the labels as text: one panel per variable, the fit, the paper's Fig. 2 left law
    # (its T taken from the runs, all at T = 4096), and the censored runs
    assert text.count("plateau step") >= 2
    assert "paper Fig. 2 left" in text and "at T = 4096" in text
    assert "fit: slope +0.500" in text and "fit: slope -1.000" in text
    assert "paper: slope +0.49" in text and "paper: slope -0.99" in text
    assert "censored = 2" in text and "censored: no plateau" in text
    assert not list(tmp_path.glob(".*.part*")), "no temporary file left behind"


def test_show_plot_one_run_and_several(store_dir, tmp_path):
    store = RunStore(store_dir, create=False)
    recs = store.runs()
    one = recs[0].run_id
    svg = tmp_path / "curves.svg"
    r = invoke("show", one[:8], "--runs-dir", str(store_dir), "--no-plots", "--plot", str(svg))
    assert r.exit_code == 0, r.output
    text = svg.read_text()
    assert "test/loss" in text and "plateau step" in text and "test/loss fraction 0.2" in text
    png = tmp_path / "many.png"
    r = invoke("show", *[x.run_id for x in recs[:6]], "--runs-dir", str(store_dir), "--plot", str(png))
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert "6 runs" in _svg_of_many(store_dir, [x.run_id for x in recs[:6]], tmp_path)
    # several runs need --plot
    r = invoke("show", recs[0].run_id, recs[1].run_id, "--runs-dir", str(store_dir))
    assert r.exit_code == 2 and "several with --plot" in r.stderr


def test_show_plot_of_a_sweep_draws_one_panel_per_point(store_dir, tmp_path):
    """Several sweep points (each with its seeds): small multiples in the order of the swept values, the watched
    metric (the plateau metric, test/loss here), the threshold 0.2 x its first value and the plateau steps."""
    from sparse_tui.reports.curves import curves_figure

    store = RunStore(store_dir, create=False)
    recs = [r for r in store.runs() if r.params["task.B"] == 2]  # 3 values of d x 2 seeds
    assert len(recs) == 6
    out = curves_figure(store, [r.run_id for r in reversed(recs)], tmp_path / "sweep.svg")
    text = out.read_text()
    titles = [t for t in ("d=16, B=2", "d=32, B=2", "d=64, B=2") if t in text]
    assert len(titles) == 3 and text.index("d=16, B=2") < text.index("d=32, B=2") < text.index("d=64, B=2")
    assert "seed 0" in text and "seed 1" in text and "plateau step" in text
    # forced overlay instead of panels
    over = curves_figure(store, [r.run_id for r in recs], tmp_path / "overlay.svg", facet=False).read_text()
    assert "d=16" in over and "test/loss" in over and "plateau step" in over


def _svg_of_many(store_dir, ids, tmp_path) -> str:
    out = tmp_path / "many.svg"
    assert invoke("show", *ids, "--runs-dir", str(store_dir), "--plot", str(out)).exit_code == 0
    return out.read_text()


def test_plot_bad_suffix_and_folder_exit_2(store_dir, tmp_path):
    for target, words in ((tmp_path / "fit.jpg", "must end in .png, .svg, .pdf"),
                          (tmp_path / "nope" / "fit.png", "does not exist")):
        r = invoke("fit", "--runs-dir", str(store_dir), "--vars", "d,B", "--plot", str(target))
        assert r.exit_code == 2 and words in r.stderr and not target.exists()
        assert len([ln for ln in r.stderr.splitlines() if ln.strip()]) == 1


def test_without_matplotlib_one_line_install_hint_exit_2(store_dir, tmp_path):
    """With matplotlib unimportable, --plot says in one line how to install the extra and exits 2, before doing
    any work; the commands without --plot still work."""
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from typer.testing import CliRunner; from sparse_tui.cli import app\n"
        f"r = CliRunner().invoke(app, ['fit', '--runs-dir', {str(store_dir)!r}, '--vars', 'd,B', '--plot', "
        f"{str(tmp_path / 'f.png')!r}])\n"
        "print(r.exit_code); print(r.stderr.strip())\n"
        f"r = CliRunner().invoke(app, ['fit', '--runs-dir', {str(store_dir)!r}, '--vars', 'd,B'])\n"
        "print(r.exit_code)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "2"
    assert lines[1] == 'error: figures need matplotlib: pip install "sparse-tui[plot]"'
    assert lines[2] == "0"
    assert not (tmp_path / "f.png").exists()


def test_help_does_not_import_matplotlib():
    code = ("import sys; from typer.testing import CliRunner; from sparse_tui.cli import app; "
            "r = CliRunner().invoke(app, ['--help']); assert r.exit_code == 0; "
            "r = CliRunner().invoke(app, ['fit', '--help']); assert '--plot' in r.output; "
            "import sparse_tui.reports.figures; assert 'matplotlib' not in sys.modules, 'matplotlib imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
