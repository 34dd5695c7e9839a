"""Files written and flags under hostile input (issue 45): the one writer must not replace a file nobody may write
(a rename replaces whatever the mode), every output path is checked before the first is written, names are printed
escaped, and flags that do nothing alone are said, not ignored. In-process through the CLI app (typer's
CliRunner), as tests/test_bad_input.py does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_PRESET, stored_preset
from typer.testing import CliRunner

from sparse_tui.base.files import WriteError, problem, write_file
from sparse_tui.cli import app


def _cli(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def _one_line(r) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.output
    return lines[0]


@pytest.fixture
def finished(tmp_path: Path):
    """A store with two finished recall runs, each with a stored embedding (so that show --plot writes 2 files)."""
    text = TINY_PRESET.replace("seeds = [0]", "seeds = [0, 1]")
    _, runs, store, _, ids = stored_preset(tmp_path, text)
    for rid in ids:
        store.log_metrics_many(rid, [0, 20], {"test/loss": [3.0, 1.0], "test/acc": [0.1, 0.6]})
        store.log_array(rid, "embed", np.eye(8, 4, dtype=np.float32))
        store.finish(rid, "finished", step=20)
    store.close()
    return runs, ids


def test_the_writer_refuses_to_replace_a_read_only_file(tmp_path):
    f = tmp_path / "out.csv"
    f.write_text("keep\n")
    f.chmod(0o444)
    assert "read-only (mode 0444)" in problem(f)
    with pytest.raises(WriteError, match="read-only"):
        write_file(f, lambda fh: fh.write("new\n"))
    assert f.read_text() == "keep\n" and (f.stat().st_mode & 0o777) == 0o444
    f.chmod(0o644)
    write_file(f, lambda fh: fh.write("new\n"))
    assert f.read_text() == "new\n"


def test_export_onto_a_read_only_file_is_refused_and_keeps_it(finished, tmp_path):
    runs, _ = finished
    out = tmp_path / "out.csv"
    out.write_text("keep\n")
    out.chmod(0o444)
    r = _cli("export", "--runs-dir", str(runs), "-o", str(out))
    assert r.exit_code == 2 and "read-only" in _one_line(r) and str(out) in r.stderr
    assert out.read_text() == "keep\n"


def test_show_plot_checks_the_embedding_figure_before_writing_the_first(finished, tmp_path):
    pytest.importorskip("matplotlib")
    runs, ids = finished
    fig, geo = tmp_path / "f.png", tmp_path / "f_embedding.png"
    geo.write_text("keep")
    geo.chmod(0o444)
    r = _cli("show", *ids, "--runs-dir", str(runs), "--plot", str(fig))
    assert r.exit_code == 2 and "f_embedding.png" in _one_line(r) and "read-only" in r.stderr
    assert not fig.exists() and geo.read_text() == "keep"  # nothing half-written


def test_show_plot_onto_a_read_only_file_is_refused(finished, tmp_path):
    pytest.importorskip("matplotlib")
    runs, ids = finished
    fig = tmp_path / "f.png"
    fig.write_text("keep")
    fig.chmod(0o444)
    r = _cli("show", ids[0], "--runs-dir", str(runs), "--no-plots", "--plot", str(fig))
    assert r.exit_code == 2 and "read-only" in _one_line(r)
    assert fig.read_text() == "keep"


def test_wrote_lines_print_a_file_name_escaped(finished, tmp_path):
    pytest.importorskip("matplotlib")
    runs, ids = finished
    fig = tmp_path / "a\x1b[31mb.png"
    r = _cli("show", ids[0], "--runs-dir", str(runs), "--no-plots", "--plot", str(fig))
    assert r.exit_code == 0, r.output
    assert fig.exists() and "\x1b" not in r.stderr and "wrote " in r.stderr and "\\x1b[31mb.png" in r.stderr


def test_mean_by_without_plot_is_said(finished):
    runs, ids = finished
    r = _cli("show", ids[0], "--runs-dir", str(runs), "--no-plots", "--mean-by", "task.d")
    assert r.exit_code == 2 and "--mean-by: only with --plot" in _one_line(r)


@pytest.mark.parametrize("value", ["1e10", "inf", "nan", "0", "-1", "x", "1" * 5000])
def test_export_timeout_out_of_range_is_one_line(finished, tmp_path, value):
    runs, _ = finished
    r = _cli("export", "--runs-dir", str(runs), "--to", "mlflow", str(tmp_path / "m.db"), "--timeout", value)
    assert r.exit_code == 2 and _one_line(r).startswith("error: --timeout:") and len(r.stderr) < 300
    assert not (tmp_path / "m.db").exists()


@pytest.mark.parametrize("flag", [["--update"], ["--mkdir"], ["--timeout", "5"]])
def test_bridge_flags_without_to_are_refused(finished, flag):
    runs, _ = finished
    r = _cli("export", "--runs-dir", str(runs), *flag)
    assert r.exit_code == 2 and f"{flag[0]}: only with --to" in _one_line(r)


def test_show_size_reads_numbers_once(finished, tmp_path):
    runs, ids = finished
    r = _cli("show", ids[0], "--runs-dir", str(runs), "--no-plots", "--plot", str(tmp_path / "f.png"), "--size",
             "7x" + "1" * 30000)
    assert r.exit_code == 2 and "--size" in _one_line(r) and len(r.stderr) < 300
