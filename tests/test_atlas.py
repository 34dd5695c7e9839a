"""The figure atlas (sparse_tui/atlas): every figure of the paper is listed, every named preset exists and follows
the paper where it speaks (App. D.1 thresholds), laws come from the registry; ``sparse-tui reproduce --list``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparse_tui import atlas
from sparse_tui.atlas import KINDS, SIZES, AtlasError, find, law_of_presets
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.science.theory import PAPER_FITS

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "250"}
NAMED = sorted({(e.key, s, e.preset(s)) for e in atlas.entries() for s in SIZES if e.preset(s)})


def test_every_figure_of_the_paper_has_an_entry():
    numbers = {e.number for e in atlas.entries() if e.source == "arXiv 2505.17863" and e.number}  # §4: no figure
    assert numbers == set(range(1, 18)), "the paper has 17 figures"
    for e in atlas.entries():
        assert e.kind in KINDS and e.figure and e.shows and e.section
        assert e.law is None or e.law in PAPER_FITS, e.key
        assert set(e.presets) <= set(SIZES)
        if e.kind == "law" and not e.built:
            assert e.fit_vars and e.law, f"{e.key}: a law entry names its variables and the paper's law"
        assert set(e.targets) <= set(e.fit_vars), e.key


@pytest.mark.parametrize("key,size,name", NAMED, ids=[f"{k}-{s}" for k, s, _ in NAMED])
def test_every_named_preset_exists_and_validates(key, size, name):
    entry = atlas.ENTRIES[key]
    path = ROOT / "presets" / f"{name}.toml"
    if entry.built:
        pytest.skip(f"{key}: {entry.built}")
    specs = expand(load_preset(path))
    assert specs
    if entry.threshold is not None:  # App. D.1: the preset measures the plateau as the paper does
        t = entry.threshold
        for s in specs:
            pc = s.config.plateau
            assert (pc.metric, pc.mode, pc.value) == (t.metric, t.mode, t.value), f"{name}: {s.label()}"


def test_a_preset_belongs_to_one_law():
    """``fit`` takes the law from the entry of the runs' preset: a preset never names two different laws."""
    by_preset: dict[str, set] = {}
    for e in atlas.entries():
        for name in set(e.presets.values()):
            by_preset.setdefault(name, set()).add(e.law)
    assert {p: laws for p, laws in by_preset.items() if len(laws) > 1} == {}


def test_find_by_key_figure_and_number():
    assert [e.key for e in find("fig15_adam")] == ["fig15_adam"]
    assert [e.key for e in find("fig15")] == ["fig15_sgd", "fig15_adam"]
    assert [e.key for e in find("15")] == [e.key for e in find("Fig. 15")] == ["fig15_sgd", "fig15_adam"]
    with pytest.raises(AtlasError, match="unknown figure 'fig99'.*fig1, fig2"):
        find("fig99")


def test_law_comes_from_the_registry_entry_of_the_preset():
    assert law_of_presets(["paper_fig15_adam_cpu"]) == ("fig15_adam", "")
    assert law_of_presets(["paper_fig2_B"]) == ("fig2_left", "")
    law, why = law_of_presets(["my_own_preset"])
    assert law is None and "not in the figure atlas" in why
    law, why = law_of_presets(["paper_fig15_adam_cpu", "paper_fig15_sgd_cpu"])
    assert law is None and "different laws" in why


def test_reproduce_list_prints_every_figure_without_torch(tmp_path):
    code = (
        "import sys; from sparse_tui.cli import app; import typer.testing as t;"
        f"r = t.CliRunner().invoke(app, ['reproduce', '--list', '--runs-dir', {str(tmp_path / 'none')!r}]);"
        "assert r.exit_code == 0, r.output; print(r.output);"
        "heavy = [m for m in ('torch', 'textual') if m in sys.modules]; assert not heavy, heavy"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 0, r.stderr
    for n in range(1, 18):
        assert f"Fig. {n}" in r.stdout
    assert "no run store here" in r.stdout
    for key in ("blog3_C", "blog3_nembd", "blog6_nembd", "euclidean", "warmup"):  # the blogs follow the paper
        assert key in r.stdout and r.stdout.index(key) > r.stdout.index("Fig. 17")


def test_the_blogs_experiments_and_proposals_are_entries_with_cpu_presets():
    """Issue 22: every experiment of blogs 3 and 6 and their two proposals is an atlas entry; those built name a CPU
    preset (validated above) and a record; keys keep the blogs' letters but are found case-insensitively."""
    blogs = {e.key: e for e in atlas.entries() if e.source.startswith("Sparse attention")}
    assert {"blog3_V", "blog3_C", "blog3_nembd", "blog3_geometry", "blog6_nembd", "blog6_n80", "blog6_phase",
            "euclidean", "warmup"} <= set(blogs)
    for e in blogs.values():
        assert e.built or (e.preset("cpu") and e.record), e.key
    assert [e.key for e in find("blog3_c")] == [e.key for e in find("blog3_C")] == ["blog3_C"]


def test_fit_takes_the_law_of_the_runs_preset_from_the_atlas(tmp_path):
    """Issue 18: a 1-layer run was compared with the Fig. 3 law because fit guessed by model; now the law is the one
    of the atlas entry that names the runs' preset (Fig. 15 right for paper_fig15_adam_cpu)."""
    import math

    from sparse_tui.reports import fitreport
    from sparse_tui.store import RunStore

    specs = expand(load_preset(ROOT / "presets" / "paper_fig15_adam_cpu.toml"))
    store = RunStore(tmp_path / "runs")
    _, ids = store.create_runs(specs)
    for spec, rid in zip(specs, ids):
        t = spec.config.task
        pl = 1.45 * t.d**1.31 * t.T**0.57 * (1 + 0.02 * spec.seed)
        store.finish(rid, "finished", plateau_step=pl, step=int(pl) + 100)
    rep = fitreport.fit_store(store, "d,T", preset="paper_fig15_adam_cpu")
    assert rep.paper == "fig15_adam" and rep.paper_note == ""
    cmp = {r["variable"]: r for r in rep.comparison}
    assert cmp["d"]["paper"] == 1.31 and cmp["T"]["paper"] == 0.57
    assert math.isclose(rep.result.exponents["d"], 1.31, abs_tol=1e-3)
    assert "Fig. 15 right" in rep.text()
    # an explicit --paper still wins
    assert fitreport.fit_store(store, "d,T", preset="paper_fig15_adam_cpu", paper="fig3").paper == "fig3"


PRESET_FILES = sorted((ROOT / "presets").glob("*.toml"))


@pytest.mark.parametrize("path", PRESET_FILES, ids=[p.stem for p in PRESET_FILES])
def test_linear_regression_thresholds_follow_app_d1(path):
    """App. D.1: the reduced flow's plateau ends at 0.2 x its initial 0.5; Transformers use "the same threshold" as an
    absolute test loss of 0.1, and 0.4 with cross-sample repetition. No linreg preset measures a fraction of a
    Transformer's own initial loss (which depends on the init and on d)."""
    specs = expand(load_preset(path))
    for s in specs:
        c = s.config
        if c.task.kind != "linreg":
            continue
        pc = c.plateau
        if c.model.kind == "transformer":
            repeated = any(x.config.task.p > 0 for x in specs)
            assert (pc.metric, pc.mode, pc.value) == ("test/loss", "below", 0.4 if repeated else 0.1), s.label()
        else:
            assert (pc.metric, pc.mode, pc.value) == ("test/loss", "fraction", 0.2), s.label()


def test_every_record_named_by_the_atlas_is_a_heading_of_reproduction_md():
    headings = {line.lstrip("#").strip() for line in (ROOT / "docs" / "REPRODUCTION.md").read_text().splitlines()
                if line.startswith("#")}
    missing = {e.key: e.record for e in atlas.entries() if e.record and e.record not in headings}
    assert missing == {}
    for e in atlas.entries():
        if e.measured:
            assert e.record, f"{e.key}: a measurement names its record"


def test_every_entry_names_a_report_and_a_figure_that_resolve():
    """One place per figure (issues 31, 39): an entry names its claim ("module:NAME" of the figure's module), which
    holds its report and figure where they are not its kind's (``atlas.CLAIMS``), imported only when used; every one
    imports and takes what ``reproduce`` gives it."""
    import inspect

    pytest.importorskip("matplotlib")
    for e in atlas.entries():
        inspect.signature(e.report_fn()).bind(None, e, [])  # report(store, entry, run_ids)
        draw = inspect.unwrap(e.plot_fn())
        first = {"law": ["rep"], "table": ["data"]}.get(e.kind, ["store", "run_ids"])
        assert list(inspect.signature(draw).parameters)[: len(first)] == first, e.key
    bad = atlas.Entry("x", "Fig. x", "s", "§", "shows", "theory")
    with pytest.raises(AtlasError, match="x: no report for kind 'theory'"):
        bad.report_fn()
