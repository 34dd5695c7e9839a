"""The atlas's one verdict rule (docs/REPRODUCTION.md, "The verdict rule"): every entry of ``sparse-tui reproduce``
ends with one of ``WORDS``, computed here from its report (``reports.base.Report``), never written by hand.

* **Law entries** (a power law fitted, App. D.2 of arXiv 2505.17863): each exponent has a target, ``target(entry,
  var)``: ``entry.targets[var]`` where the record gives a reason, else ``DEFAULT_TARGET`` (±0.15). ``reproduced``:
  every exponent within its target. ``in kind``: some exponent misses its target, but every exponent whose paper
  value is farther from 0 than its target has the paper's sign, and every two exponents whose paper values differ by
  more than the larger of their targets are in the paper's order. ``not reproduced``: a sign or an order wrong. Whether
  the 95 % interval holds the paper's value is printed per exponent and counted on the verdict line; it does not set
  the word (a long, dense grid excludes every value but its own).
* **Curves, table and theory entries**: the entry's claim (``Entry.claim``: a ``reports.base.Claim`` in the
  figure's module, reports/entries/) states the source's qualitative claim and decides it from the report's
  numbers; the thresholds that make a claim decidable (e.g. "sharp" = a drop within 25 % of the plateau) are ours
  and are named in the claim.
* ``not run``: no stored run (the caller's case: nothing to report).
* ``no claim``: the source states nothing to check (blog 6's phase diagram: it only suggests drawing the plane); the
  report's numbers are a description. Outside the counts (``COUNTED``).

Issue 42: the checks ask what the source claims (cross-sample repetition is judged only where the theory's speed-up
factor f(p, d) exceeds 1.05, Figs. 3 right and 12; the §4 switch on the step at its last level against both
constants and on its final value, never on the 5 % step, the constant's until it switches); a sentence tested by
two entries is judged once (``SENTENCES``); how firm a word is (a seed bootstrap): ``reports/firmness.py``.

A re-read at another threshold (`reproduce KEY --threshold X`) is a diagnosis: the CLI prints its fit, but the
verdict is that of the preset's own threshold (``reproduce`` computes it from the runs as stored).

No torch, no textual at import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

WORDS = ("reproduced", "in kind", "not reproduced", "not run", "no claim")
COUNTED = ("reproduced", "in kind", "not reproduced")  # the words a summary counts
RANK = {"reproduced": 0, "in kind": 1, "not reproduced": 2}  # best first: a sentence's word over its open choices
# An entry that tests the same source sentence as another (an open choice of it): the sentence is judged once, under
# the first key, by the best word of its entries (every choice the source leaves open tried, the best reading is the
# sentence's); the other entries keep their own words as readings of that choice, not counted.
SENTENCES: dict[str, tuple[str, ...]] = {"euclidean": ("euclidean", "euclidean_ordered"),
                                         "sec23_temporary": ("sec23_temporary", "sec23_toy")}


def sentence_of(key: str) -> str | None:
    """The first key of the sentence ``key`` shares with other entries (``SENTENCES``), or None."""
    return next((k for k, members in SENTENCES.items() if key in members), None)


def sentence_word(words: dict[str, str]) -> str:
    """The sentence's word from its entries' words (key -> word): the best counted one, else not run."""
    ranked = sorted((RANK[w], w) for w in words.values() if w in RANK)
    return ranked[0][1] if ranked else "not run"


def counted(key: str) -> bool:
    """Whether the entry ``key``'s own word counts in a summary (a second entry of a sentence does not)."""
    s = sentence_of(key)
    return s is None or s == key
DEFAULT_TARGET = 0.15


@dataclass(frozen=True)
class Verdict:
    word: str  # one of WORDS
    why: str  # the measured numbers that decide it, one line
    claim: str = ""  # curves entries: the claim checked
    source: str = "runs"  # "runs" (computed from the store) or "record" (docs/REPRODUCTION.md, no store here)

    def line(self) -> str:
        src = "" if self.source == "runs" else " (the record's; no stored runs here)"
        return f"verdict: {self.word}{src} — {self.why}"

    def to_dict(self) -> dict[str, str]:
        return {"verdict": self.word, "why": self.why, "claim": self.claim, "source": self.source}


def target(entry: Any, var: str) -> float:
    """The tolerance exponent ``var`` of ``entry`` is held to: the entry's own where its record says why, else
    ``DEFAULT_TARGET``."""
    return float(entry.targets.get(var, DEFAULT_TARGET))


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def law_verdict(rows: Sequence[dict[str, Any]]) -> Verdict:
    """The rule for fitted laws over ``rows`` (``law_report``'s: variable, paper, measured, ci, diff, target)."""
    rows = [r for r in rows if r.get("paper") is not None]
    if not rows:
        return Verdict("not reproduced", "no exponent of the paper's law to compare")
    missed = [r for r in rows if abs(r["diff"]) > r["target"]]
    outside = sum(not (r["ci"][0] <= r["paper"] <= r["ci"][1]) for r in rows)
    ci = f"{outside} of {len(rows)} 95% intervals exclude the paper's value"
    if not missed:
        return Verdict("reproduced", f"every exponent within its target; {ci}")
    wrong_sign = [r["variable"] for r in rows if abs(r["paper"]) > r["target"]
                  and _sign(r["measured"]) != _sign(r["paper"])]
    wrong_order = [f"{a['variable']} vs {b['variable']}" for a in rows for b in rows
                   if a["paper"] - b["paper"] > max(a["target"], b["target"]) and a["measured"] <= b["measured"]]
    miss = ", ".join(f"{r['variable']} {r['measured']:+.2f} vs {r['paper']:+.2f} (±{r['target']:g})" for r in missed)
    if wrong_sign or wrong_order:
        bad = "; ".join(filter(None, [f"sign wrong: {', '.join(wrong_sign)}" if wrong_sign else "",
                                      f"order wrong: {', '.join(wrong_order)}" if wrong_order else ""]))
        return Verdict("not reproduced", f"missed {miss}; {bad}; {ci}")
    return Verdict("in kind", f"signs and order as the paper, missed {miss}; {ci}")


def verdict(store: Any, rep: Any) -> Verdict:
    """The verdict of a report (``reports.base.Report``) computed from its runs by its entry's claim
    (``Entry.claim_of``: the figure's own, or its kind's)."""
    claim = rep.entry.claim_of()
    if claim.check is None:
        return Verdict("not reproduced", f"{rep.entry.key}: no check of its claim")
    try:
        word, why = claim.check(store, rep)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as ex:  # the report lacks a number
        word, why = "not reproduced", f"the report lacks what the claim needs ({type(ex).__name__}: {ex})"
    return Verdict(word, why, claim=claim.text)
