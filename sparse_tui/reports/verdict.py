"""The atlas's one verdict rule (docs/REPRODUCTION.md, "The verdict rule"): every entry of ``sparse-tui reproduce``
ends with one of ``WORDS``, computed here from its report (``reports.reproduce.Report``), never written by hand.

* **Law entries** (a power law fitted, App. D.2 of arXiv 2505.17863): each exponent has a target, ``target(entry,
  var)``: ``entry.targets[var]`` where the record gives a reason, else ``DEFAULT_TARGET`` (±0.15). ``reproduced``:
  every exponent within its target. ``in kind``: some exponent misses its target, but every exponent whose paper
  value is farther from 0 than its target has the paper's sign, and every two exponents whose paper values differ by
  more than the larger of their targets are in the paper's order. ``not reproduced``: a sign or an order wrong. Whether
  the 95 % interval holds the paper's value is printed per exponent and counted on the verdict line; it does not set
  the word (a long, dense grid excludes every value but its own).
* **Curves, table and theory entries**: ``CHECKS[key]`` states the source's qualitative claim and decides it from
  the report's measured numbers; the thresholds that make a claim decidable (e.g. "sharp" = a drop within 25 % of
  the plateau) are ours and are named in the claim.
* ``not run``: no stored run (the caller's case: nothing to report).

A re-read at another threshold (`reproduce KEY --threshold X`) is a diagnosis: the CLI prints its fit, but the
verdict is that of the preset's own threshold (``reproduce`` computes it from the runs as stored).

No torch, no textual at import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

WORDS = ("reproduced", "in kind", "not reproduced", "not run")
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


# ---------------------------------------------------------------------------------------------------------------
# Curves, table and theory entries: the claim and the numbers that decide it
# ---------------------------------------------------------------------------------------------------------------


CHECKS: dict[str, tuple[str, Callable[[Any, Any], tuple[str, str]]]] = {
    "fig1a": ("a plateau, then a sharp drop (drop ≤ 25% of the plateau, ours)", _check_fig1a),
    "fig1b": ("w begins learning before α", _check_fig1b),
    "fig6": ("after the transition w decreases while Δa grows (App. A.3.3)", _check_fig6),
    "fig7": ("the linearisation matches the early dynamics (within 5% at λt = 0.5, ours)", _check_fig7),
    "fig8": ("w at its equilibrium late; the Hessian sharpest around the transition", _check_fig8),
    "fig10": ("cross-sample repetition shortens the plateau by f(p, d) (within 10%, ours); w̃ learns first",
              _check_fig10),
    "fig3_right": ("repetition speeds emergence up, more at larger d (§2.4; held: ≥ 1.5× at the largest d, ours)",
                   _check_fig3_right),
    "fig4_left": ("emergence later with more pairs (§3.2)", _check_fig4_left),
    "fig5_left": ("a small B speeds emergence up about 4×, a large B overfits (§3.2)", _check_repetition(4.0)),
    "fig5_right": ("a small p speeds emergence up about 2×, a large p overfits (§3.2)", _check_repetition(2.0)),
    "fig16_left": ("on the training data B only speeds up (App. C.2)", _check_fig16),
    "fig16_right": ("on the training data p only speeds up (App. C.2)", _check_fig16),
    "fig17": ("copy and selection attention rise with accuracy (App. C.2)", _check_fig17),
    "fig9": ("SGD follows the reduced flow 'quite accurately' (App. A.3.4)", _check_fig9),
    "fig11": ("sharp transitions (App. B.2)", _check_fig11),
    "fig12": ("repetition leaves the plateau earlier (App. B.2)", _check_fig12),
    "blog3_V": ("perplexity converges near V/2", _check_blog3_V),
    "blog3_C": ("perplexity follows (C−2)/(C−1)·V, rising with C", _check_blog3_C),
    "blog3_nembd": ("best perplexity falls faster than V/n_embd", _check_blog3_nembd),
    "blog3_geometry": ("close tokens sit close, more so at larger n_embd", _check_geometry),
    "euclidean": ("with distance attention a 1-D embedding suffices (held: ≤ 0.5 × V/2 in every seed of some "
                  "readout configuration, ours)", _check_euclidean),
    "euclidean_ordered": ("with distance attention a 1-D embedding suffices (held: ≤ 0.5 × V/2 in every seed of "
                          "some readout configuration, ours)", _check_euclidean),
    "blog6_nembd": ("recall emerges only for a middle range of N", _check_blog6_nembd),
    "blog6_n80": ("N = 80 learns with more data or a smaller lr", _check_blog6_n80),
    "blog6_phase": ("recall emerges in part of the N × lr plane", _check_phase),
    "warmup": ("a warm-up keeps large N stable while recall forms", _check_warmup),
    **{k: ("§4: repetition while stuck, none after the transition, is as fast as repetition and as good as none "
           "(held: 1.5× sooner to the second level and final within 0.02 in every seed, issue 33's)",
           _check_diversity) for k in ("diversity", "diversity_linreg", "diversity_theory")},
}


def verdict(store: Any, rep: Any) -> Verdict:
    """The verdict of a report (``reports.reproduce.Report``) computed from its runs."""
    e = rep.entry
    if e.kind == "law" and "rows" in rep.data:
        return law_verdict(rep.data["rows"])
    if e.key not in CHECKS:
        return Verdict("not reproduced", f"{e.key}: no check of its claim")
    claim, fn = CHECKS[e.key]
    try:
        word, why = fn(store, rep)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as ex:  # a report without the numbers the claim needs
        word, why = "not reproduced", f"the report lacks what the claim needs ({type(ex).__name__}: {ex})"
    return Verdict(word, why, claim=claim)
