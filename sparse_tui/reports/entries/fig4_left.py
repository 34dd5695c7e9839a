"""Fig. 4 left/middle (arXiv 2505.17863 §3.2): recall emerges later with more pairs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from sparse_tui.atlas import Entry
from sparse_tui.reports.base import (
    RECALL_LEVEL,
    Claim,
    Report,
    _crossing,
    _fmt,
    _gmean,
    _loglog_slope,
    _num,
    make_report,
    run_config,
)
from sparse_tui.reports.curves import curves_figure


@dataclass
class Fig4LeftData:
    runs: list[dict[str, Any]]
    points: list[dict[str, Any]]  # per N_pairs: geometric means over seeds beside Fig. 4 right's law
    n_pairs_slope: float | None
    later_with_pairs: bool | None
    recall_level: float


def fig4_curves_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Fig. 4 left/middle (§3.2): learning curves as N_pairs grows at a fixed vocabulary. Per run the plateau (App.
    D.1's 5% test accuracy), the first evaluation at ``RECALL_LEVEL`` accuracy and the rise between the two (relative
    to the plateau: small = sharp), the final accuracy; per N_pairs the geometric means over seeds beside Fig. 4
    right's law at that point (0.55 · N_tokens^0.79 · N_pairs^2.25); the log-log slope of the plateau against N_pairs;
    and whether the plateau grows with N_pairs in every seed. The paper: emergence is sharp and later for more
    pairs (curves, no numbers)."""
    from sparse_tui.science.theory import PAPER_FITS

    law = PAPER_FITS["fig4"]
    rows: list[dict[str, Any]] = []
    for rid in run_ids:
        rec = store.get(rid)
        steps, vals = store.metrics(rid).get("test/acc", ([], []))
        recall = _crossing((steps, vals), RECALL_LEVEL)
        pl = rec.plateau_step
        task = run_config(rec).task
        rows.append({"run_id": rid, "n_pairs": task.n_pairs, "n_tokens": task.n_tokens, "seed": rec.seed, "plateau": pl,
                     "recall": recall, "rise": (recall - pl) / pl if (recall and pl) else None,
                     "final_acc": vals[-1] if vals else None, "last_step": float(steps[-1]) if steps else None})
    rows.sort(key=lambda r: (r["n_pairs"] or 0, r["seed"] or 0))

    points = []
    for n in sorted({r["n_pairs"] for r in rows}):
        rs = [r for r in rows if r["n_pairs"] == n]
        pl = _gmean(r["plateau"] for r in rs)
        points.append({"n_pairs": n, "n_tokens": rs[0]["n_tokens"], "seeds": len(rs),
                       "censored": sum(r["plateau"] is None for r in rs), "plateau": pl,
                       "recall": _gmean(r["recall"] for r in rs), "never": sum(r["recall"] is None for r in rs),
                       "paper": law.predict(n_tokens=rs[0]["n_tokens"], n_pairs=n)})
    slope = _loglog_slope([(pt["n_pairs"], pt["plateau"]) for pt in points if pt["plateau"] and not pt["censored"]])
    later = None
    seeds = sorted({r["seed"] for r in rows})
    if len(points) >= 2:
        later = True
        for sd in seeds:  # strictly later with every added pair count; a run without a plateau is the latest
            pls = [r["plateau"] if r["plateau"] is not None else math.inf for r in rows if r["seed"] == sd]
            later = later and all(a < b or a == b == math.inf for a, b in zip(pls, pls[1:]))
    lines = [f"  {len(rows)} run(s); paper: emergence sharp and later for more pairs (curves; Fig. 4 right's law "
             f"{law.C:g} · N_tokens^{law.exponents['n_tokens']:g} · N_pairs^{law.exponents['n_pairs']:g} gives the "
             f"plateau); measured: plateau (5%), first {RECALL_LEVEL:.0%} accuracy, rise = (that − plateau) / plateau",
             f"  {'N_pairs':>7} {'N_tokens':>8} {'seed':>4} {'plateau':>8} {format(RECALL_LEVEL, '.0%'):>8} "
             f"{'rise':>6} {'final acc':>9} {'last step':>9}"]
    for r in rows:
        lines.append(f"  {r['n_pairs']:>7} {r['n_tokens']:>8} {_num(r['seed'], '4g')} {_num(r['plateau'], '8g')} "
                     f"{_num(r['recall'], '8g')} {_num(r['rise'], '6.2f')} {_num(r['final_acc'], '9.3f')} "
                     f"{_num(r['last_step'], '9g')}")
    lines.append("  per N_pairs (geometric mean over seeds; — = no run crossed):")
    lines.append(f"  {'N_pairs':>7} {'plateau':>8} {'paper law':>9} {'ratio':>6} {format(RECALL_LEVEL, '.0%'):>8} "
                 f"{'never':>5}")
    for pt in points:
        ratio = pt["plateau"] / pt["paper"] if pt["plateau"] and not pt["censored"] else None
        lines.append(f"  {pt['n_pairs']:>7} {_num(pt['plateau'], '8.0f')}{'*' if pt['censored'] else ' '}"
                     f"{pt['paper']:>9.0f} {_num(ratio, '6.2f')} {_num(pt['recall'], '8.0f')} {pt['never']:>5}")
    if slope is not None:
        lines.append(f"  plateau ∝ N_pairs^{slope:.2f} over N_pairs {[pt['n_pairs'] for pt in points if pt['plateau']]}"
                     f" (Fig. 4 right: {law.exponents['n_pairs']:g}); * = some seed never crossed 5%")
    if later is not None:
        lines.append(f"  the plateau grows with N_pairs in every seed: {'yes' if later else 'NO'}")
    data = Fig4LeftData(runs=rows, points=points, n_pairs_slope=slope, later_with_pairs=later,
            recall_level=RECALL_LEVEL)
    return make_report(entry, run_ids, lines, data)


def overlay_figure(store: Any, run_ids: Sequence[str], path: str | Path, *, title: str | None = None) -> Path:
    """Fig. 4 left/middle (arXiv 2505.17863 §3.2): ``curves_figure`` with every run's test loss and accuracy on
    shared axes, one colour per N_pairs, one line style per seed (the paper's overlay, not one panel per point)."""
    return curves_figure(store, run_ids, path, title=title, facet=False)


def _check_fig4_left(store, rep):
    d = rep.data
    rises = [_gmean([r["rise"] for r in d.runs if r["n_pairs"] == pt["n_pairs"] and r["rise"]])
             for pt in d.points]
    if d.later_with_pairs:
        return "reproduced", (f"later with every added pair in every seed; plateau ∝ N_pairs^{d.n_pairs_slope:.2f}; "
                              f"rise ÷ plateau {' / '.join(_fmt([x]) for x in rises)}")
    pls = [pt["plateau"] for pt in d.points]
    mean_later = all(a and b and b > a for a, b in zip(pls, pls[1:]))
    return ("in kind" if mean_later else "not reproduced"), "not later with more pairs in every seed"


CLAIM = Claim("emergence later with more pairs (§3.2)", _check_fig4_left, fig4_curves_report, overlay_figure)
