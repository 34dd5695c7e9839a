"""Blog 3's embedding geometry: numerically close tokens sit close, more so at larger n_embd."""

from __future__ import annotations

import math
from typing import Any, Sequence

from sparse_tui.atlas import Entry
from sparse_tui.reports.base import (
    Claim,
    FigureError,
    Report,
    Runs,
    _fig,
    _fmt,
    _num,
    figure_writer,
    make_report,
    run_config,
)
from sparse_tui.science import geometry


def geometry_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Blog 3's embedding geometry: per run its n_embd, final test perplexity and accuracy, and how ordered its final
    embedding is (``geometry.order``: Spearman's rho of embedding distance against value distance; the share of
    tokens whose nearest token is a numerical neighbour) with the share of variance its two drawn axes hold."""
    lines = ["  blog: numerically closer tokens are embedded closer together; the geometry improves with n_embd "
             "(pictures only)",
             f"  {'n_embd':>6} {'seed':>4} {'final ppl':>9} {'acc':>6} {'rho':>6} {'neighbours':>10} {'2-D share':>9}"]
    rows = []
    for rid in run_ids:
        rec = store.get(rid)
        E = store.array(rid, geometry.ARRAY)
        final = rec.final or {}
        loss = final.get("test/loss")
        row = {"run_id": rid, "n_embd": run_config(rec).model.d_model, "seed": rec.seed,
               "final_ppl": math.exp(loss) if loss is not None and math.isfinite(loss) else None,
               "final_acc": final.get("test/acc"), "rho": None, "neighbours": None, "explained": None}
        if E is not None:
            row.update(geometry.order(E), explained=geometry.plane(E).explained)
        rows.append(row)
    rows.sort(key=lambda r: (r["n_embd"] or 0, r["seed"] or 0))
    for r in rows:
        lines.append(f"  {r['n_embd']:>6} {r['seed']:>4} {_num(r['final_ppl'], '9.2f')} {_num(r['final_acc'], '6.3f')}"
                     f" {_num(r['rho'], '6.2f')} {_num(r['neighbours'], '10.2f')} {_num(r['explained'], '9.2f')}")
    if any(r["rho"] is None for r in rows):
        lines.append("  (—: no stored embedding; runs store theirs when they end)")
    return make_report(entry, run_ids, lines, Runs(rows))


@figure_writer()
def geometry_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None) -> Any:
    """Blog 3 ("Sparse attention 3 – inefficiency of extracting similar content", the embedding plots of "Failure
    even for context length = 3" and "Dependence on embedding dimension"): each run's final token embedding in a
    plane (n_embd 2: itself; larger: the first two principal components, ``geometry.plane``), one panel per run,
    every point labelled by its token value and coloured by it, the panel's title giving n_embd and how ordered
    the embedding is (``geometry.order``: Spearman's rho of embedding distance against value distance, the share of
    tokens whose nearest token is a numerical neighbour). Runs without a stored embedding are refused."""
    recs = [store.get(r) for r in run_ids]
    embs = [(rec, store.array(rec.run_id, geometry.ARRAY)) for rec in recs]
    missing = [rec.run_id for rec, E in embs if E is None]
    if missing or not embs:
        raise FigureError(f"no stored embedding for run(s) {', '.join(missing) or '(none given)'} (token-input runs "
                          "store theirs when they end; runs from before schema 5 have none)")
    embs.sort(key=lambda re_: (run_config(re_[0]).model.d_model, re_[0].seed or 0))
    fig, axes = _fig(len(embs), 3.0, 3.0)
    for ax, (rec, E) in zip(axes, embs):
        pl, o = geometry.plane(E), geometry.order(E)
        V = E.shape[0]
        ax.scatter(pl.xy[:, 0], pl.xy[:, 1], c=range(V), cmap="viridis", s=14)
        for v, (x, y) in enumerate(pl.xy):
            ax.annotate(str(v), (x, y), fontsize=6, xytext=(2, 2), textcoords="offset points")
        share = f", {pl.explained:.0%} of var." if pl.axes[0] == "PC1" else ""
        ax.set_title(f"n_embd {E.shape[1]}, seed {rec.seed}{share}\nrho {o['rho']:.2f}, "
                     f"neighbours {o['neighbours']:.2f}", fontsize=7.5)
        ax.set_xlabel(pl.axes[0])
        ax.set_ylabel(pl.axes[1])
    fig.suptitle(title or "learned token embeddings (labels: token value)")
    return fig


def _check_geometry(store, rep):
    rows = rep.data.runs
    ns = sorted({r["n_embd"] for r in rows})
    rho = [_mean([r["rho"] for r in rows if r["n_embd"] == n]) for n in ns]
    pos = all(v is not None and v > 0 for v in rho)
    grows = pos and all(b >= a for a, b in zip(rho, rho[1:]))
    word = "reproduced" if grows else ("in kind" if pos else "not reproduced")
    return word, f"order ρ at n_embd {ns}: {' / '.join(_fmt([v]) for v in rho)}"


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


CLAIM = Claim("close tokens sit close, more so at larger n_embd", _check_geometry, geometry_report, geometry_figure)
