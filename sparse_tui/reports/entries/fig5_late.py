"""Fig. 5 left's late grokking (arXiv 2505.17863 §3.2; Fig. 5's caption: "learning for long enough eventually leads
to grokking"): Fig. 5's report over a run five times longer, and its own check. Issue 42."""

from __future__ import annotations

from typing import Any

from sparse_tui.reports.base import Claim
from sparse_tui.reports.entries.fig5 import fig5_report
from sparse_tui.reports.entries.fig17 import _at

LATE_FROM = 2400  # Fig. 5 left's CPU records stop here (paper_fig5_B_cpu)


def check_fig5_late(store: Any, rep: Any) -> tuple[str, str]:
    """Fig. 5 left: "learning for long enough eventually leads to grokking" at large B. Read per B that overfits at
    step ``LATE_FROM`` (test accuracy there > 0.1 below the same seed's baseline, Fig. 5's cut): its test accuracy
    then and at the end of the long run. Held: every such run ends within 0.1 of its baseline (it grokked); in kind:
    every such run rises by more than 0.1 after ``LATE_FROM`` but stays below; not reproduced otherwise (no late
    rise, or no B overfits at ``LATE_FROM``)."""
    runs = rep.data.runs

    def at(run_id: str, step: float) -> float | None:
        return _at(store.metrics(run_id), "test/acc", step)

    base = {r["seed"]: r for r in runs if r["baseline"]}
    rows, grok, rise = [], [], []
    for r in sorted((r for r in runs if not r["baseline"]), key=lambda r: (float(r["value"]), r["seed"] or 0)):
        b = base.get(r["seed"])
        if b is None:
            continue
        early, early_b = at(r["run_id"], LATE_FROM), at(b["run_id"], LATE_FROM)
        if early is None or early_b is None or early >= early_b - 0.1:
            rows.append(f"B = {r['value']:g} seed {r['seed']}: {early or 0:.2f} at {LATE_FROM} (not overfitting)")
            continue
        grok.append(r["final"] >= b["final"] - 0.1)
        rise.append(r["final"] - early > 0.1)
        rows.append(f"B = {r['value']:g} seed {r['seed']}: {early:.2f} at {LATE_FROM} → {r['final']:.2f} at the end "
                    f"(baseline {b['final']:.2f})")
    why = "; ".join(rows) + " (held: every run that overfits at 2400 ends within 0.1 of its baseline)"
    if not grok:
        return "not reproduced", why + "; no B overfits at 2400"
    return ("reproduced" if all(grok) else "in kind" if all(rise) else "not reproduced"), why


CLAIM = Claim("at large B, 'learning for long enough eventually leads to grokking' (Fig. 5; held: every run that "
              "overfits at 2400 ends within 0.1 of its baseline)", check_fig5_late, fig5_report)
