"""The preset catalogue (issue 29): a bare name resolves to your own ./presets/NAME.toml before the bundled preset, a
path always wins, ``sparse-tui presets`` lists them grouped with figure and measured CPU time, ``presets copy`` writes
an editable copy and never overwrites, and the "what next" lines name a command that works as typed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparse_tui.presets import catalog
from sparse_tui.presets.catalog import CatalogError, bundled_dir, resolve
from sparse_tui.presets.timing import timing

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True, timeout=300,
                          env=ENV, cwd=cwd)


def own_smoke(folder: Path, steps: int = 37) -> Path:
    """A ./presets/smoke.toml of the user's own: the bundled one with another step count."""
    (folder / "presets").mkdir(exist_ok=True)
    text = (ROOT / "presets" / "smoke.toml").read_text().replace("steps = 600", f"steps = {steps}")
    assert f"steps = {steps}" in text
    path = folder / "presets" / "smoke.toml"
    path.write_text(text)
    return path


def test_the_bundled_folder_is_the_checkouts_presets():
    """One copy: the package's bundled presets are the top-level presets/ files (a link in the checkout; the wheel
    carries the same files, tests/test_wheel.py)."""
    names = sorted(p.name for p in (ROOT / "presets").glob("*.toml"))
    assert sorted(p.name for p in bundled_dir().glob("*.toml")) == names and "smoke.toml" in names


def test_a_path_then_your_own_then_the_bundled_preset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = resolve("smoke")
    assert (r.origin, r.path) == ("bundled", bundled_dir() / "smoke.toml")
    mine = own_smoke(tmp_path)
    for ref in ("smoke", "smoke.toml", "presets/smoke.toml"):
        r = resolve(ref)
        assert r.origin in ("yours", "file") and r.path.resolve() == mine.resolve(), ref
    assert resolve("smoke").line() == "preset smoke: presets/smoke.toml (your own)"
    other = tmp_path / "elsewhere" / "smoke.toml"  # a path that exists wins over both
    other.parent.mkdir()
    other.write_text("x")
    assert resolve(other) == catalog.Resolved(other, "file")
    assert resolve("smoke", tmp_path / "elsewhere").path == tmp_path / "elsewhere" / "smoke.toml"  # --presets-dir
    with pytest.raises(CatalogError, match=r"^nope: file not found, and no preset named 'nope' in presets/ or among"):
        resolve("nope")
    assert resolve(tmp_path / "gone.toml").origin == "file"  # not a bare name: the loader says it is missing


def test_your_own_preset_wins_over_the_bundled_one_in_run(tmp_path):
    """`sparse-tui run smoke` from a folder with ./presets/smoke.toml runs that file and says so."""
    own_smoke(tmp_path, steps=37)
    r = cli("run", "smoke", "--dry-run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[0] == "preset smoke: presets/smoke.toml (your own)"
    assert "│ 37 " in r.stdout and "600" not in r.stdout  # the steps column: ours, not the bundled 600
    (tmp_path / "presets" / "smoke.toml").unlink()
    r = cli("run", "smoke", "--dry-run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[0] == f"preset smoke: {bundled_dir() / 'smoke.toml'} (bundled with sparse-tui)"
    assert "│ 600 " in r.stdout
    r = cli("run", "nope", "--dry-run", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("error: nope: file not found, and no preset named 'nope'")
    assert len(r.stderr.splitlines()) == 1


def test_reproduce_reads_your_own_preset_first(tmp_path, monkeypatch):
    from sparse_tui import atlas
    from sparse_tui.reports import planner as rp

    monkeypatch.chdir(tmp_path)
    (entry,) = atlas.find("fig1c")
    loaded, _ = rp.load_specs(entry, "cpu")
    assert Path(loaded.path).resolve() == (bundled_dir() / "paper_fig1c_theory.toml").resolve()
    (tmp_path / "presets").mkdir()
    text = (ROOT / "presets" / "paper_fig1c_theory.toml").read_text().replace('"task.d" = [16, 32, 64, 128, 256]',
                                                                               '"task.d" = [16, 64]')
    (tmp_path / "presets" / "paper_fig1c_theory.toml").write_text(text)
    loaded, specs = rp.load_specs(entry, "cpu")
    assert Path(loaded.path).resolve() == (tmp_path / "presets" / "paper_fig1c_theory.toml").resolve()
    assert len(specs) == 2 * 4


def test_presets_lists_the_groups_with_figure_and_time(tmp_path):
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "mine.toml").write_text((ROOT / "presets" / "smoke.toml").read_text())
    r = cli("presets", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in r.stdout.splitlines() if line.startswith("│")]
    groups = [row[0] for row in rows if row[0]]
    assert groups == ["yours", "checks", "theory", "paper (CPU)", "paper (GPU)", "blogs"]
    by_name = {row[1]: row for row in rows}
    assert by_name["mine"][0] == "yours" and rows[0][1] == "mine"  # your own first
    assert by_name["smoke"][0] == "checks" and rows[1][1] == "smoke"
    assert by_name["blog_n80"][2:4] == ["Blog 6, N = 80: data × lr", "2 min 33 s"]
    assert by_name["paper_fig1c_theory"][2:] == ["Fig. 1c, Eq. 6 / App. A.3.2", "8.4 s",
                                                 "load 3.1, shared 2-core CPU, 2026-11-25"]  # eq6 reuses its runs
    assert by_name["paper_fig11"][3] == "-"  # GPU-sized: no CPU time measured, none invented
    assert len(by_name) == len(list(bundled_dir().glob("*.toml"))) + 1


@pytest.mark.parametrize("time_line, shown", [
    ("# Time: 8.4 s wall for the 20 runs on the shared 2-core CPU (load average 3.1)", "8.4 s"),
    ("# Time: 18 runs, 9-17 s each, about 4 min on the shared 2-core CPU", "about 4 min"),
    ("# Time: 24000 steps took 34-108 s per run, so this preset takes about 2-5 minutes there", "about 2-5 minutes"),
    ("# Time: 12 min 23 s for the 8 runs", "12 min 23 s"),
    ("# Time: seconds on the shared 2-core CPU; GPU: not needed", "seconds"),
    ("# Time: GPU: not measured (no GPU was available); the 2-core CPU takes hours.", "-"),
    ("# What you should see: a drop. Time: 26 min on the shared 2-core CPU.", "26 min"),
    ("# What you should see: a drop.", "-"),
])
def test_the_cpu_time_is_the_headers_or_a_dash(tmp_path, time_line, shown):
    p = tmp_path / "x.toml"
    p.write_text(f"# x.toml: a preset\n{time_line}\nname = \"x\"\n# Time: 5 s (after the header: not read)\n")
    assert timing(p).duration == shown


def test_presets_copy_writes_an_editable_copy_and_never_overwrites(tmp_path):
    r = cli("presets", "copy", "blog_n80", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    copy = tmp_path / "presets" / "blog_n80.toml"
    assert copy.read_bytes() == (ROOT / "presets" / "blog_n80.toml").read_bytes()
    copy.write_text("# my edits\n")
    r = cli("presets", "copy", "blog_n80", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == "error: presets/blog_n80.toml: exists; not overwritten (edit it, or " \
        "copy into another folder)\n"
    assert copy.read_text() == "# my edits\n"
    r = cli("presets", "copy", "blog_n80", "other", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "other" / "blog_n80.toml").read_text() == "# my edits\n"  # yours first
    for args, line in [(["nope"], "error: nope: file not found, and no preset named 'nope'"),
                       (["smoke", "presets/blog_n80.toml"], "error: presets/blog_n80.toml: not a folder")]:
        r = cli("presets", "copy", *args, cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.startswith(line) and len(r.stderr.splitlines()) == 1, r.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["blog_n80.toml", "blog_n80.toml", "other", "presets"]


def test_what_next_names_the_environments_script_when_the_path_lacks_it(tmp_path, monkeypatch):
    from sparse_tui.cli import common as c

    script = Path(sys.executable).parent / "sparse-tui"
    assert script.is_file()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert c._self_command() == str(script)  # not under this folder: the whole path
    monkeypatch.chdir(script.parent.parent.parent)
    assert c._self_command() == os.path.join(script.parent.parent.name, "bin", "sparse-tui")  # .venv/bin/sparse-tui
    monkeypatch.setattr("shutil.which", lambda name: str(script))
    assert c._self_command() == "sparse-tui"


def test_a_directory_never_shadows_a_preset_name(tmp_path, monkeypatch):
    """Issue 42: a run folder named like a preset (``--runs-dir ./diversity_theory``) is not the preset: the name
    resolves to the preset file, and ``reproduce diversity_theory --runs-dir ./diversity_theory`` integrates it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "diversity_theory").mkdir()
    r = resolve("diversity_theory")
    assert (r.origin, r.path) == ("bundled", bundled_dir() / "diversity_theory.toml")
    (tmp_path / "nope").mkdir()
    with pytest.raises(CatalogError, match=r"^nope: is a directory, not a preset file, and no preset named 'nope'"):
        resolve("nope")
    r = cli("reproduce", "diversity_theory", "--size", "cpu", "--runs-dir", "./diversity_theory", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "verdict: " in r.stdout and (tmp_path / "diversity_theory" / "runs.db").is_file()
    r = cli("run", "diversity_theory", "--dry-run", cwd=tmp_path)
    assert r.returncode == 0 and "(bundled with sparse-tui)" in r.stderr.splitlines()[0], r.stderr
