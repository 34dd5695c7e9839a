"""Fig. 12 (arXiv 2505.17863 App. B.2): curves with and without cross-sample repetition."""

from __future__ import annotations

from typing import Any, Sequence

from sparse_tui.reports.base import Claim, _colours, _fig, figure_writer, run_config
from sparse_tui.science.repetition import initial
from sparse_tui.science.theory import SPEED_UP_JUDGED, f_rep


@figure_writer()
def fig12_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None) -> Any:
    """Fig. 12: per p, the loss on the training distribution (with repetition: train/loss, fresh batches) on top and
    the test loss without repetition below, against the step, with the plateau threshold."""
    recs = sorted((store.get(r) for r in run_ids), key=lambda r: (initial(run_config(r).task.p), r.seed or 0))
    fig, axes = _fig(2, 4.0, 2.9)
    cols = _colours(len(recs))
    for rec, c in zip(recs, cols):
        series = store.metrics(rec.run_id)
        p = run_config(rec).task.p
        for ax, name in zip(axes, ("train/loss", "test/loss")):
            if name in series:
                st, vals = series[name]
                ax.plot(st, vals, color=c, label=f"p = {p:g}" + (f", seed {rec.seed}" if rec.seed else ""))
    thr = run_config(recs[0]).plateau.value if recs else None
    for ax, head in zip(axes, ("with repetition (train loss, fresh batches)", "without repetition (test loss)")):
        if thr is not None:
            ax.axhline(thr, color="0.55", lw=0.7)
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_title(head)
    axes[0].legend()
    fig.suptitle(title or "Fig. 12: cross-sample repetition")
    return fig


def _check_fig12(store: Any, rep: Any) -> tuple[str, str]:
    """App. B.2 (Fig. 12): repetition leaves the plateau earlier, judged at the p whose f(p, d) exceeds
    ``SPEED_UP_JUDGED`` at the run's d. Held: every judged run earlier than its seed's p = 0 run; in kind: every
    judged run
    of the largest p; not reproduced otherwise, or no run judged."""
    recs = [(store.get(r["run_id"]), r["plateau"]) for r in rep.data.runs]
    runs = [(float(initial(run_config(rec).task.p)), float(run_config(rec).task.d), rec.seed, pl) for rec, pl in recs]
    base = {s: pl for p, _, s, pl in runs if p == 0}
    rows = [(p, d, pl, base.get(s), float(f_rep(p, d))) for p, d, s, pl in runs if p > 0]
    judged = [(p, pl, b) for p, d, pl, b, f in rows if f > SPEED_UP_JUDGED]
    ok = [bool(pl and b and pl < b) for _, pl, b in judged]
    top = max((p for p, *_ in judged), default=None)
    why = "plateau (test, no repetition) vs p = 0: " + ", ".join(
        (f"p = {p:g}: {pl:g} vs {b:g}" if (pl and b) else f"p = {p:g}: —")
        + ("" if f > SPEED_UP_JUDGED else f" (not judged: f = {f:.2f})") for p, d, pl, b, f in rows)
    if not judged:
        return "not reproduced", why + "; no run where the theory predicts a speed-up"
    top_ok = all(o for (p, *_), o in zip(judged, ok) if p == top)
    return ("reproduced" if all(ok) else "in kind" if top_ok else "not reproduced"), why


CLAIM = Claim("repetition leaves the plateau earlier (App. B.2), judged where f(p, d) > 1.05 (issue 42)", _check_fig12,
              figure=fig12_figure)
