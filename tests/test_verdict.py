"""The atlas's one verdict rule (``sparse_tui.reports.verdict``; docs/REPRODUCTION.md, "The verdict rule") and
``reproduce --list`` for a terminal and as JSON. No training here: the rule is fed the records' own numbers."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

from typer.testing import CliRunner

from sparse_tui import atlas
from sparse_tui.cli import app
from sparse_tui.reports import listing as rp
from sparse_tui.reports.base import Claim
from sparse_tui.reports.entries.fig5 import Fig5Data
from sparse_tui.reports.verdict import DEFAULT_TARGET, WORDS, law_verdict, target


def rows(entry_key: str, measured: dict[str, tuple[float, float, float]]) -> list[dict]:
    """Law rows as ``law_report`` builds them: paper exponents from theory.PAPER_FITS, measured (value, CI)."""
    from sparse_tui.science.theory import PAPER_FITS

    e = atlas.ENTRIES[entry_key]
    pf = PAPER_FITS[e.law]
    return [{"variable": v, "paper": pf.exponents[v], "measured": m, "ci": (lo, hi), "diff": m - pf.exponents[v],
             "target": target(e, v)} for v, (m, lo, hi) in measured.items()]


def test_every_law_entry_has_a_target_per_exponent_default_015():
    for e in atlas.entries():
        if e.kind == "law":
            for v in e.fit_vars:
                assert 0 < target(e, v) <= 0.3, (e.key, v)
    assert target(atlas.ENTRIES["fig3"], "B") == DEFAULT_TARGET == 0.15  # no longer ±0.2 (issue 32)
    assert target(atlas.ENTRIES["fig15_sgd"], "T") == 0.15 and target(atlas.ENTRIES["fig4_right"], "n_pairs") == 0.3


def test_law_rule_on_the_records_numbers():
    # Fig. 15 right (Adam): both exponents within ±0.15 -> reproduced, even though intervals exclude the paper
    v = law_verdict(rows("fig15_adam", {"d": (1.20, 1.12, 1.28), "T": (0.49, 0.44, 0.54)}))
    assert v.word == "reproduced" and "2 of 2 95% intervals exclude the paper's value" in v.why
    # Fig. 3: every exponent off by more than 0.15, signs and order as the paper -> in kind
    v = law_verdict(rows("fig3", {"d": (1.13, 1.0, 1.26), "T": (0.61, 0.4, 0.8), "B": (-0.46, -0.7, -0.2)}))
    assert v.word == "in kind" and "B -0.46 vs -0.80 (±0.15)" in v.why
    # Fig. 4 right: N_pairs +1.29 against +2.25 misses even ±0.3; still above N_tokens as in the paper -> in kind
    v = law_verdict(rows("fig4_right", {"n_tokens": (0.95, 0.81, 1.10), "n_pairs": (1.29, 1.01, 1.58)}))
    assert v.word == "in kind"
    # Fig. 13: N_layers -0.13 against +0.06: the paper's value is within its target of 0, so its sign is free
    v = law_verdict(rows("fig13", {"d": (1.20, 1.1, 1.3), "T": (0.52, 0.4, 0.6), "n_layers": (-0.13, -0.2, -0.06),
                                   "n_heads": (0.14, 0.1, 0.2)}))
    assert v.word == "in kind"
    # a sign wrong, or two exponents in the wrong order -> not reproduced
    assert law_verdict(rows("fig3", {"d": (1.2, 1, 1.4), "T": (0.7, 0.5, 0.9), "B": (0.3, 0.1, 0.5)})).word \
        == "not reproduced"
    v = law_verdict(rows("fig4_right", {"n_tokens": (1.5, 1.3, 1.7), "n_pairs": (1.2, 1.0, 1.4)}))
    assert v.word == "not reproduced" and "order wrong: n_pairs vs n_tokens" in v.why


def fig5(values: dict[float, tuple[list[float], list[float]]]) -> SimpleNamespace:
    """A Fig. 5 report's data: per repetition value, per seed, the speed-up to 5% and final accuracy - baseline."""
    runs = [{"value": 1.0, "baseline": True, "speedup": [1.0], "final_vs_baseline": 0.0}]
    for val, (sp, fin) in values.items():
        runs += [{"value": val, "baseline": False, "speedup": [s], "final_vs_baseline": f} for s, f in zip(sp, fin)]
    return SimpleNamespace(data=Fig5Data([0.05, 0.3, 0.6], runs))


def test_repetition_claims_are_decided_at_the_papers_5_percent():
    check_b, check_p = atlas.ENTRIES["fig5_left"].claim_of().check, atlas.ENTRIES["fig5_right"].claim_of().check
    # the record's B: B = 2 is 1.8-2.1x sooner without overfitting, B = 4 overfits -> in kind (paper: 4x)
    word, why = check_b(None, fig5({2.0: ([2.10, 1.78], [-0.07, -0.12]), 4.0: ([3.0, 2.67], [-0.52, -0.54])}))
    assert word == "in kind" and "2: 1.93" in why and "4: 2.83 overfits" in why
    # 3x sooner without overfitting, and a larger value that overfits -> reproduced
    assert check_b(None, fig5({2.0: ([3.2, 3.1], [0.0, -0.02]), 6.0: ([4, 4], [-0.7, -0.8])}))[0] == "reproduced"
    # the record's p: p = 0.25 is not sooner to 5% (0.88 / 1.07), p = 0.5 overfits -> not reproduced (the 30%
    # crossing, 1.18-1.24x, is a re-read at another level, a diagnosis)
    assert check_p(None, fig5({0.25: ([0.88, 1.07], [-0.01, -0.05]), 0.5: ([1.17, 0.94], [-0.07, -0.17])}))[0] \
        == "not reproduced"
    # no value overfits: the claim's second half is untested -> in kind at most
    assert check_b(None, fig5({2.0: ([3.5, 3.5], [0.0, 0.0])}))[0] == "in kind"


def test_every_entry_other_than_a_law_has_a_claim_check():
    """Each entry names its claim (the figure's module under reports/entries/), or is a fitted law, whose kind's
    claim is the one rule for laws."""
    for e in atlas.entries():
        claim = e.claim_of()
        assert isinstance(claim, Claim) and claim.check is not None, e.key
        assert (claim.text == "") == (e.kind == "law"), e.key


def test_list_json_gives_every_entry_a_verdict_and_a_cost(tmp_path):
    r = CliRunner().invoke(app, ["reproduce", "--list", "--json", "--runs-dir", str(tmp_path / "none")])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert len(data) == len(atlas.ENTRIES)
    for d in data:
        assert d["verdict"] in WORDS and d["verdict_source"] == "record", d["key"]
        assert set(d["cost"]) == {"cpu_minutes", "cpu_source", "gpu_minutes_projected", "gpu_projection"}
        assert d["cost"]["cpu_minutes"] > 0 and d["verdict"] != "not run", d["key"]  # every entry has a record
    assert {d["key"]: d["verdict"] for d in data}["fig4_right"] in WORDS


def test_list_fits_80_columns_one_line_per_entry_and_splits_no_word(tmp_path):
    rows = rp.status_rows(None, with_verdicts=True)
    lines = rp.list_lines(rows, with_store=False, width=80)
    assert all(len(line) <= 80 for line in lines)
    assert len(lines) <= len(rows) * 1.4 + 6  # about one screen per 20 entries
    text = "\n".join(lines)
    for e in atlas.entries():
        assert re.search(rf"^{re.escape(e.key)} ", text, re.M), e.key
        for word in e.figure.split():
            assert word in text.split(), (e.key, word)  # wrapped at spaces only
