"""Blog 3, "Sparse attention 3 – inefficiency of extracting similar content": the nearest-token task's
perplexity against V, C and n_embd, and its proposal, Euclidean attention (entries blog3_V, blog3_C, blog3_nembd,
euclidean, euclidean_ordered: one report, one figure, a claim each)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from sparse_tui.atlas import Entry
from sparse_tui.reports.base import (
    Claim,
    Report,
    _fig,
    _fmt,
    _gmean,
    _loglog_slope,
    _num,
    figure_writer,
    make_report,
    run_config,
)


@dataclass
class NearestData:
    runs: list[dict[str, Any]]  # nearest_rows
    n_embd_slope: float | None  # log-log slope of the best perplexity against n_embd


def nearest_rows(store: Any, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Blog 3 ("Sparse attention 3 – inefficiency of extracting similar content"): per run its V, C, n_embd, attention,
    whether the readout sees its own token (``model.readout_self_key``), the final and the best test perplexity
    exp(test loss) (step of the best), the final test accuracy and attention
    from the last token to the target (``attn/L1/relevant``), and the blog's two references:
    (C−2)/(C−1)·V, the perplexity of a model that guesses uniformly among the context tokens other than the current
    one ("Dependence on vocab size V"), and V/n_embd, which the best perplexity falls faster than ("Dependence on
    embedding dimension"). Sorted by attention, self key (with it first), V, C, n_embd, seed."""
    rows: list[dict[str, Any]] = []
    for rid in run_ids:
        rec = store.get(rid)
        cfg = run_config(rec)
        t, m = cfg.task, cfg.model
        steps, vals = store.metrics(rid).get("test/ppl", ([], []))
        pts = [(s, v) for s, v in zip(steps, vals) if v is not None and math.isfinite(v)]
        best = min(pts, key=lambda sv: sv[1]) if pts else (None, None)
        V, C, n = t.vocab, t.context, m.d_model
        guess = (C - 2) / (C - 1) * V if V and C else None
        final = rec.final or {}
        rows.append({"run_id": rid, "V": V, "C": C, "n_embd": n, "attention": m.attention,
                     "self_key": m.readout_self_key,
                     "seed": rec.seed, "final": pts[-1][1] if pts else None, "best": best[1], "best_step": best[0],
                     "final_acc": final.get("test/acc"), "attn_relevant": final.get("attn/L1/relevant"), "guess": guess,
                     "v_over_n": V / n if V and n else None})
    rows.sort(key=lambda r: (r["attention"], not r["self_key"], r["V"] or 0, r["C"] or 0, r["n_embd"] or 0,
                             r["seed"] or 0))
    return rows


def nearest_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Blog 3: ``nearest_rows`` as a table, and over the runs the log-log slope of the best perplexity against n_embd
    (the blog: steeper than −1, the slope of V/n_embd)."""
    rows = nearest_rows(store, run_ids)
    lines = ["  blog: random guess among the other context tokens = (C−2)/(C−1)·V; best perplexity falls faster "
             "than V/n_embd",
             f"  {'attention':<9} {'self key':>8} {'V':>4} {'C':>3} {'n_embd':>6} {'seed':>4} {'final ppl':>9} "
             f"{'best (step)':>15} "
             f"{'(C−2)V/(C−1)':>12} {'final/that':>10} {'V/n_embd':>8} {'best/that':>9} {'acc':>6} {'attn→target':>11}"]
    for r in rows:
        g, vn = r["guess"], r["v_over_n"]
        best = "—" if r["best"] is None else f"{r['best']:.2f} ({r['best_step']})"
        lines.append(f"  {r['attention']:<9} {'yes' if r['self_key'] else 'no':>8} {r['V']:>4} {r['C']:>3} "
                     f"{r['n_embd']:>6} {r['seed']:>4} "
                     f"{_num(r['final'], '9.2f')} {best:>15} {_num(g, '12.2f')} "
                     f"{_num(r['final'] / g if (g and r['final']) else None, '10.2f')} {_num(vn, '8.2f')} "
                     f"{_num(r['best'] / vn if (vn and r['best']) else None, '9.2f')} {_num(r['final_acc'], '6.3f')} "
                     f"{_num(r['attn_relevant'], '11.3f')}")
    slope = _loglog_slope([(r["n_embd"], r["best"]) for r in rows if r["best"] and r["n_embd"]])
    if slope is not None:
        lines.append(f"  best perplexity ∝ n_embd^{slope:.2f} over n_embd {sorted({r['n_embd'] for r in rows})} "
                     "(V/n_embd: exponent −1; the blog: faster)")
    return make_report(entry, run_ids, lines, NearestData(rows, slope))


@figure_writer()
def nearest_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None) -> Any:
    """Blog 3 ("Sparse attention 3 – inefficiency of extracting similar content"): the best and the final test
    perplexity of each run (one point per seed) against what its runs sweep, C or n_embd, beside the blog's reference
    there: (C−2)/(C−1)·V (guessing among the other context tokens) against C, V/n_embd against n_embd, log-log.
    Rows: ``nearest_rows``."""
    rows = nearest_rows(store, run_ids)
    xkey = "C" if len({r["C"] for r in rows}) > 1 else "n_embd"
    ref, ref_label = ("guess", "(C−2)/(C−1)·V: guess a context token") if xkey == "C" else ("v_over_n", "V/n_embd")
    fig, (ax,) = _fig(1, 4.4, 3.1)
    for key, marker, label in (("best", "o", "best test perplexity"), ("final", "x", "final test perplexity")):
        pts = [(r[xkey], r[key]) for r in rows if r[key] is not None]
        ax.scatter([x for x, _ in pts], [y for _, y in pts], marker=marker, s=18, label=label)
    refs = sorted({(r[xkey], r[ref]) for r in rows if r[ref] is not None})
    ax.plot([x for x, _ in refs], [y for _, y in refs], color="0.4", ls="--", label=ref_label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel({"C": "context length C", "n_embd": "n_embd"}[xkey])
    ax.set_ylabel("test perplexity exp(loss)")
    ax.legend()
    vs = sorted({r["V"] for r in rows})
    fig.suptitle(title or f"nearest token, V = {', '.join(map(str, vs))}")
    return fig


def _near_half_v(rows):
    return [r["final"] / (r["V"] / 2) if r["final"] else None for r in rows]


def _check_blog3_V(store, rep):
    x = _near_half_v(rep.data.runs)
    ok = all(v is not None and 0.5 <= v <= 1.5 for v in x)
    return ("reproduced" if ok else "not reproduced"), f"final perplexity ÷ (V/2): {_fmt(x)} (near: 0.5-1.5, ours)"


def _check_blog3_C(store, rep):
    rows = rep.data.runs
    x = [r["final"] / r["guess"] if (r["final"] and r["guess"]) else None for r in rows]
    by_c = sorted({r["C"] for r in rows})
    means = [_gmean([r["final"] for r in rows if r["C"] == c]) for c in by_c]
    rises = all(a and b and b > a for a, b in zip(means, means[1:]))
    ok = all(v is not None and 0.5 <= v <= 1.5 for v in x)
    word = "reproduced" if ok else ("in kind" if rises else "not reproduced")
    return word, (f"final perplexity ÷ (C−2)V/(C−1): {_fmt(x)}; mean at C = {by_c}: "
                  f"{' / '.join(_fmt([m], '.1f') for m in means)} ({'rises' if rises else 'does not rise'} with C)")


def _check_blog3_nembd(store, rep):
    s = rep.data.n_embd_slope
    word = "reproduced" if s is not None and s < -1 else ("in kind" if s is not None and s < 0 else "not reproduced")
    return word, f"best perplexity ∝ n_embd^{s:.2f} (the blog: steeper than −1)" if s is not None else "no slope"


def _check_euclidean(store, rep):
    """Held: in some readout configuration the preset sweeps (with or without the readout's self key), every
    Euclidean run at n_embd 1 ends at a perplexity <= 0.5 x V/2 (ours); in kind: below V/2 (the blog's failure
    level) in every seed of some configuration."""
    groups: dict[bool, list[float | None]] = {}
    for r in rep.data.runs:
        if r["attention"] == "euclidean" and r["n_embd"] == 1:
            groups.setdefault(bool(r["self_key"]), []).append(r["final"] / (r["V"] / 2) if r["final"] else None)
    if not groups:
        return "not reproduced", "no Euclidean run at n_embd 1"
    ok = {k: v for k, v in groups.items() if all(x is not None for x in v)}
    word = ("reproduced" if any(max(v) <= 0.5 for v in ok.values())
            else "in kind" if any(max(v) < 1 for v in ok.values()) else "not reproduced")
    return word, "Euclidean at n_embd 1, final perplexity ÷ (V/2): " + "; ".join(
        f"{'with' if k else 'without'} the self key {_fmt(v)}" for k, v in sorted(groups.items(), reverse=True))


V = Claim("perplexity converges near V/2", _check_blog3_V, nearest_report)
C = Claim("perplexity follows (C−2)/(C−1)·V, rising with C", _check_blog3_C, nearest_report, nearest_figure)
NEMBD = Claim("best perplexity falls faster than V/n_embd", _check_blog3_nembd, nearest_report, nearest_figure)
EUCLIDEAN = Claim("with distance attention a 1-D embedding suffices (held: ≤ 0.5 × V/2 in every seed of some readout "
                  "configuration, ours)", _check_euclidean, nearest_report)
