"""Issue 42: checks that ask what the source claims, the new entries' checks, one word per source sentence, and how
firm a verdict is (a seed bootstrap). No training here: the checks are fed the records' own numbers, the bootstrap a
fake store and report."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from sparse_tui import atlas
from sparse_tui.cli import app
from sparse_tui.reports import firmness, listing
from sparse_tui.reports.entries import diversity
from sparse_tui.reports.verdict import COUNTED, SENTENCES, WORDS, counted, sentence_word


def check(key: str):
    """The check of an entry's claim (``Entry.claim_of``)."""
    return atlas.ENTRIES[key].claim_of().check


def table(cells: dict[float, dict[int, float]]) -> SimpleNamespace:
    """A Fig. 3 right report: plateau (geometric mean) per p and d."""
    return SimpleNamespace(data=SimpleNamespace(table={str(p): {str(d): {"mean": v} for d, v in row.items()}
                                                       for p, row in cells.items()}))


def test_fig3_right_is_judged_only_where_the_theory_predicts_a_speed_up():
    # the record (T = 16): p = 0.3 1.08-1.17x at d 8-32, not growing; p = 0.1 1.00-1.04x. f(0.1, d) is 0.94 at d = 8
    # and 0.985 at d = 16 (no speed-up predicted), 1.06 at d = 32 (judged)
    base = {8: 100.0, 16: 200.0, 32: 400.0}
    rep = table({0.0: base, 0.1: {8: 100.0, 16: 200.0, 32: 400 / 1.04}, 0.3: {8: 100 / 1.17, 16: 200 / 1.08,
                                                                              32: 400 / 1.12}})
    word, why = check("fig3_right")(None, rep)
    assert word == "in kind" and "4 cells" in why and "1.00 (not judged) / 1.00 (not judged) / 1.04" in why
    # a p = 0.1 at d = 8 that is slower no longer decides it; one judged cell that is not faster does
    rep = table({0.0: base, 0.1: {8: 120.0, 16: 210.0, 32: 390.0}, 0.3: {8: 90.0, 16: 150.0, 32: 200.0}})
    assert check("fig3_right")(None, rep)[0] == "reproduced"
    rep = table({0.0: base, 0.1: {8: 90.0, 16: 190.0, 32: 401.0}, 0.3: {8: 90.0, 16: 150.0, 32: 200.0}})
    assert check("fig3_right")(None, rep)[0] == "not reproduced"
    # nothing judged: no p reaches f > 1.05
    assert check("fig3_right")(None, table({0.0: {8: 1.0}, 0.1: {8: 0.5}}))[0] == "not reproduced"


def fig12(runs: list[tuple[float, int, int, float | None]]) -> tuple[SimpleNamespace, SimpleNamespace]:
    """A fake store and Fig. 12 report: (p, d, seed, plateau) per run."""
    recs = {f"r{i}": SimpleNamespace(run_config=SimpleNamespace(task=SimpleNamespace(p=p, d=d)), seed=s)
            for i, (p, d, s, _) in enumerate(runs)}  # the check reads the typed config (RunRecord.run_config)
    store = SimpleNamespace(get=lambda rid: recs[rid])
    return store, SimpleNamespace(data=SimpleNamespace(runs=[{"run_id": f"r{i}", "plateau": pl}
                                                             for i, (*_, pl) in enumerate(runs)]))


def test_fig12_is_judged_only_where_the_theory_predicts_a_speed_up():
    # the record at d = 8: p = 0.3 20-40 steps earlier (of 360), p = 0.1 not at all (f(0.1, 8) = 0.94: not judged)
    store, rep = fig12([(0.0, 8, 0, 360), (0.0, 8, 1, 360), (0.1, 8, 0, 360), (0.1, 8, 1, 370),
                        (0.3, 8, 0, 340), (0.3, 8, 1, 320)])
    word, why = check("fig12")(store, rep)
    assert word == "reproduced" and "not judged: f = 0.94" in why
    store, rep = fig12([(0.0, 8, 0, 360), (0.3, 8, 0, 360)])
    assert check("fig12")(store, rep)[0] == "not reproduced"


def div(rows: list[tuple[str, int, float | None, float]], higher: bool = True) -> SimpleNamespace:
    """A §4 report: (setting, seed, step at the last level, final - none's) per run."""
    return SimpleNamespace(data=SimpleNamespace(runs=[{"setting": s, "seed": seed, "cross": [1.0, c],
                                                       "final_vs_base": f, "higher": higher, "levels": [0.05, 0.6]}
                                                      for s, seed, c, f in rows]))


def test_the_switch_is_judged_at_its_last_level_against_both_constants():
    check_ = check("diversity")
    none = [("no repetition", s, c, 0.0) for s, c in enumerate((1600, 1560, 1680))]
    const = [("B 4.0", s, None, -0.56) for s in range(3)]  # never reaches 60%
    # the recall record: B 4 -> 1 at 5%: 1100 / 1080 / 1120 at 60% (1.44-1.50x), final +0.041 / -0.015 / +0.025
    switch = [("B 4.0 -> 1 when test/acc >= 0.05", s, c, f)
              for s, (c, f) in enumerate(((1100, 0.041), (1080, -0.015), (1120, 0.025)))]
    word, why = check_(None, div(none + const + switch))
    assert word == "in kind" and "constant never" in why
    fast = [("B 4.0 -> 1 when test/acc >= 0.05", s, 1000, 0.0) for s in range(3)]
    assert check_(None, div(none + const + fast))[0] == "reproduced"
    # later than its constant repetition: not what §4 proposes
    const_fast = [("B 4.0", s, 900, -0.56) for s in range(3)]
    assert check_(None, div(none + const_fast + fast))[0] == "not reproduced"
    # the linear-regression record: a tie with no repetition in seed 2 (400 = 400) is not sooner
    lin_none = [("no repetition", s, c, 0.0) for s, c in enumerate((400, 380, 400))]
    lin_const = [("p 0.3", s, c, f) for s, (c, f) in enumerate(((400, 0.003), (400, 0.02), (None, 0.03)))]
    lin_switch = [("p 0.3 -> 0 when plateau", s, c, f) for s, (c, f) in enumerate(((370, -0.028), (370, -0.008),
                                                                                   (400, -0.008)))]
    assert check_(None, div(lin_none + lin_const + lin_switch, higher=False))[0] == "not reproduced"
    # the 5% step (the constant's, by construction) is not read: the same runs with any first level
    assert diversity._uses("p 0 -> 0.9 when stuck 5 -> 0 when test/acc >= 0.05", "p 0.9")
    assert diversity._uses("p steps 0:0.3 1079:0", "p 0.3")
    assert not diversity._uses("p 0.3 -> 0 when test/loss <= 0.5", "p 0.5")


def test_no_claim_is_a_word_outside_the_counts_and_a_sentence_counts_once():
    assert "no claim" in WORDS and "no claim" not in COUNTED
    cells = SimpleNamespace(cells=[{"acc": 0.9}, {"acc": 0.1}])
    assert check("blog6_phase")(None, SimpleNamespace(data=cells))[0] == "no claim"
    assert SENTENCES["euclidean"] == ("euclidean", "euclidean_ordered")
    assert counted("euclidean") and not counted("euclidean_ordered") and counted("fig1a")
    assert sentence_word({"euclidean": "not reproduced", "euclidean_ordered": "reproduced"}) == "reproduced"
    r = CliRunner().invoke(app, ["reproduce", "--list", "--json", "--runs-dir", "/nonexistent/none"])
    data = {d["key"]: d for d in json.loads(r.output)}
    assert data["euclidean"]["sentence_verdict"] == "reproduced" and data["euclidean_ordered"]["counted"] is False
    assert data["blog6_phase"]["verdict"] == "no claim" and data["blog6_phase"]["counted"] is False
    n = sum(d["counted"] for d in data.values())
    rows = listing.status_rows(None, with_verdicts=True)
    line = next(x for x in listing.list_lines(rows, False, 200) if "counted" in x)
    m = re.search(r"(\d+) reproduced, (\d+) in kind, (\d+) not reproduced", line)
    assert m and sum(map(int, m.groups())) == n  # one per sentence: euclidean's sentence once, with its best word


def test_firmness_and_environment_are_listed_for_every_entry():
    r = CliRunner().invoke(app, ["reproduce", "--list", "--json", "--runs-dir", "/nonexistent/none"])
    data = {d["key"]: d for d in json.loads(r.output)}
    for key, d in data.items():
        assert d["firmness"]["firmness"] in firmness.FIRMNESS, key
        assert set(d["environment"]) >= {"torch", "numpy", "threads", "schedule", "device", "commit"}, key
    assert data["fig1c"]["firmness"]["firmness"] == "deterministic"
    assert data["fig1c"]["environment"]["torch"] and data["fig1c"]["environment"]["threads"] == 1
    # fig5_right flipped on another machine (issue 42's audit): post-plateau numbers from 2 seeds -> fragile
    assert data["fig5_right"]["firmness"]["firmness"] == "fragile"
    assert data["fig3"]["environment"]["torch"] is None and "not recorded" in data["fig3"]["environment"]["note"]


def test_bootstrap_weights_are_exact_and_flip_rates_follow():
    w = firmness.subset_weights(3)
    assert w == {1: pytest.approx(1 / 27), 2: pytest.approx(6 / 27), 3: pytest.approx(6 / 27)}
    assert 3 * w[1] + 3 * w[2] + w[3] == pytest.approx(1.0)
    recs = {f"r{s}": SimpleNamespace(seed=s, config={"model": {"kind": "transformer"}}) for s in range(3)}
    store = SimpleNamespace(get=lambda rid: recs[rid])
    entry = SimpleNamespace(key="fig3")
    # the word holds only when seed 2 is in the draw: it flips in every draw without seed 2 (8/27)
    f = firmness.firmness(store, entry, list(recs), "reproduced",
                          lambda ids: "reproduced" if "r2" in ids else "in kind")
    assert f.flips == pytest.approx(8 / 27) and f.word == "fragile"
    f = firmness.firmness(store, entry, list(recs), "reproduced", lambda ids: "reproduced")
    assert (f.word, f.flips) == ("firm", 0.0)
    # post-plateau numbers from 2 seeds are fragile whatever the bootstrap says
    two = {k: v for k, v in recs.items() if k != "r2"}
    f = firmness.firmness(SimpleNamespace(get=lambda rid: two[rid]), SimpleNamespace(key="fig5_right"), list(two),
                          "in kind", lambda ids: "in kind")
    assert f.word == "fragile" and "2 seeds" in f.why


def test_environment_summarises_what_the_runs_recorded():
    runs = [SimpleNamespace(device="cpu", versions={"torch": "2.13.0+cpu", "numpy": "2.4.6", "threads": 1,
                                                    "stack": s, "commit": "abc"}) for s in (1, 8)]
    env = firmness.environment(runs)
    assert env["torch"] == ["2.13.0+cpu"] and env["schedule"] == ["sequential", "stacked"] and env["threads"] == [1]
    assert "threads 1, {sequential, stacked}" in firmness.environment_line(env)
    old = firmness.environment([SimpleNamespace(device="cpu", versions={})])
    assert old["torch"] is None
    assert firmness.environment_line(old) == "device cpu; not recorded: torch, numpy, threads, schedule, commit"


def test_new_entries_are_in_the_atlas_with_checks():
    for key in ("fig14_random", "fig5_late", "sec23_temporary", "sec23_toy", "eq6"):
        e = atlas.ENTRIES[key]
        assert e.claim_of().check is not None and e.record and e.preset("cpu"), key
    assert atlas.find("fig14")[-1].key == "fig14_random"
