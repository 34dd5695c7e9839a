"""Fig. 12 (arXiv 2505.17863 App. B.2): curves with and without cross-sample repetition."""

from __future__ import annotations

from typing import Any, Sequence

from sparse_tui.presets.loading import config_get
from sparse_tui.reports.base import Claim, _cfg, _colours, _fig, figure_writer


@figure_writer()
def fig12_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None) -> Any:
    """Fig. 12: per p, the loss on the training distribution (with repetition: train/loss, fresh batches) on top and
    the test loss without repetition below, against the step, with the plateau threshold."""
    recs = sorted((store.get(r) for r in run_ids), key=lambda r: (config_get(r.config, "task.p", 0.0), r.seed or 0))
    fig, axes = _fig(2, 4.0, 2.9)
    cols = _colours(len(recs))
    for rec, c in zip(recs, cols):
        series = store.metrics(rec.run_id)
        p = config_get(rec.config, "task.p", 0.0)
        for ax, name in zip(axes, ("train/loss", "test/loss")):
            if name in series:
                st, vals = series[name]
                ax.plot(st, vals, color=c, label=f"p = {p:g}" + (f", seed {rec.seed}" if rec.seed else ""))
    thr = config_get(recs[0].config, "plateau.value") if recs else None
    for ax, head in zip(axes, ("with repetition (train loss, fresh batches)", "without repetition (test loss)")):
        if thr is not None:
            ax.axhline(thr, color="0.55", lw=0.7)
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_title(head)
    axes[0].legend(frameon=False)
    fig.suptitle(title or "Fig. 12: cross-sample repetition", fontsize=8.5)
    return fig


def _check_fig12(store, rep):
    runs = [(_cfg(store, r["run_id"], "task.p") or 0.0, store.get(r["run_id"]).seed, r["plateau"])
            for r in rep.data.runs]
    base = {s: pl for p, s, pl in runs if p == 0}
    rows = [(p, pl < base[s] if (pl and base.get(s)) else False, base.get(s), pl) for p, s, pl in runs if p > 0]
    top = max((p for p, *_ in rows), default=None)
    every = bool(rows) and all(ok for _, ok, *_ in rows)
    top_ok = top is not None and all(ok for p, ok, *_ in rows if p == top)
    word = "reproduced" if every else ("in kind" if top_ok else "not reproduced")
    return word, "plateau (test, no repetition) vs p = 0: " + ", ".join(
        f"p = {p:g}: {pl:g} vs {b:g}" if (pl and b) else f"p = {p:g}: —" for p, _, b, pl in rows)


CLAIM = Claim("repetition leaves the plateau earlier (App. B.2)", _check_fig12, figure=fig12_figure)
