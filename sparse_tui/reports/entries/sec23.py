"""§2.3 of arXiv 2505.17863: cross-sample repetition "only provides a temporary advantage [...] In the long run,
learning is slower". For each p > 0 and seed, its test loss (without repetition) against p = 0's of the same seed
after both plateaus: where it crosses above, and the ratio of the last five evaluations. Held when every p > 0 ends
above p = 0 in every seed, having been below at p = 0's plateau. The reduced flow (``sec23_temporary``) and the toy
model trained by SGD (``sec23_toy``) test the same sentence (``verdict.SENTENCES``). Issue 42."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from sparse_tui.atlas import Entry
from sparse_tui.reports.base import (
    Claim,
    Report,
    Runs,
    _colours,
    _fig,
    _fmt,
    _num,
    figure_writer,
    make_report,
    run_config,
)
from sparse_tui.reports.flows import timed
from sparse_tui.science.repetition import initial


def _series(store: Any, run_id: str) -> tuple[np.ndarray, np.ndarray]:
    return timed(store.metrics(run_id), "test/loss", float(run_config(store.get(run_id)).train.lr))


def _p(rec: Any) -> float:
    """The run's cross-sample repetition p (a schedule: its start)."""
    return float(initial(run_config(rec).task.p))


def temporary_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    recs = [store.get(r) for r in run_ids]
    base = {r.seed: r for r in recs if _p(r) == 0}
    out, rows = [], []
    for r in sorted(recs, key=lambda r: (_p(r), r.seed or 0)):
        p = _p(r)
        b = base.get(r.seed)
        if p == 0 or b is None:
            continue
        t, loss = _series(store, r.run_id)
        t0, loss0 = _series(store, b.run_id)
        n = min(t.size, t0.size)
        t, loss, loss0 = t[:n], loss[:n], loss0[:n]
        lr = float(run_config(r).train.lr)
        pl = None if r.plateau_step is None else float(r.plateau_step) * lr
        pl0 = None if b.plateau_step is None else float(b.plateau_step) * lr
        after = t >= max(pl or t[-1], pl0 or t[-1])
        above = after & (loss > loss0)
        below_at_pl0 = bool(pl0 is not None and np.interp(pl0, t, loss) < np.interp(pl0, t, loss0))
        crossings = [float(t[i]) for i in range(1, n) if above[i] and not above[i - 1]]
        ratio = float(np.nanmean(loss[-5:]) / np.nanmean(loss0[-5:]))
        out.append({"p": p, "seed": r.seed, "plateau": pl, "plateau_p0": pl0, "below_at_p0_plateau": below_at_pl0,
                    "crossings": crossings, "above_fraction_after": float(above[after].mean()) if after.any() else None,
                    "end_ratio": ratio, "end": float(t[-1])})
        rows.append(f"{p:>5g} {r.seed if r.seed is not None else '-':>4} {_num(pl, '9.0f')} {_num(pl0, '9.0f')} "
                    f"{'yes' if below_at_pl0 else 'no':>8} {', '.join(f'{c:g}' for c in crossings[:3]) or 'none':>18} "
                    f"{ratio:>10.4f}")
    return make_report(entry, run_ids, [
        "  paper (§2.3): repetition 'only provides a temporary advantage [...] In the long run, learning is slower'",
        "  test loss without repetition against p = 0's (same seed) after both plateaus; end = mean of the last 5",
        f"  {'p':>5} {'seed':>4} {'plateau':>9} {'p=0 pl.':>9} {'below@pl0':>8} {'crosses above at':>18} "
        f"{'end ÷ p=0':>10}", *(f"  {x}" for x in rows)], Runs(out))


def check_temporary(store: Any, rep: Any) -> tuple[str, str]:
    runs = rep.data.runs
    if not runs:
        return "not reproduced", "no p > 0 run beside a p = 0 run of its seed"
    by: dict[float, list[dict]] = {}
    for r in runs:
        by.setdefault(r["p"], []).append(r)
    ends = {p: [r["end_ratio"] for r in rs] for p, rs in by.items()}
    held = {p: all(r["below_at_p0_plateau"] and r["end_ratio"] > 1 for r in rs) for p, rs in by.items()}
    word = ("reproduced" if all(held.values()) else "in kind" if any(held.values()) else "not reproduced")
    parts = "; ".join(f"p = {p:g}: end ÷ p = 0 {_fmt(v, '.3f')}, crosses above after both plateaus in "
                      f"{sum(bool(r['crossings']) for r in by[p])} of {len(by[p])}" for p, v in sorted(ends.items()))
    return word, parts + " (held: every p > 0 ends above p = 0 in every seed, having been below at p = 0's plateau)"


@figure_writer()
def temporary_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None) -> Any:
    """§2.3: the test loss (without repetition) of each p against time, log-log, and its ratio to p = 0's."""
    recs = sorted((store.get(r) for r in run_ids), key=lambda r: (_p(r), r.seed or 0))
    ps = sorted({_p(r) for r in recs})
    colour = dict(zip(ps, _colours(len(ps))))
    base = {r.seed: _series(store, r.run_id) for r in recs if _p(r) == 0}
    fig, (ax, ax2) = _fig(2)
    for r in recs:
        p = _p(r)
        t, loss = _series(store, r.run_id)
        ok = (t > 0) & (loss > 0)
        ax.plot(t[ok], loss[ok], color=colour[p], lw=1.0, label=f"p = {p:g}" if r.seed in (None, 0) else None)
        if p > 0 and r.seed in base:
            t0, l0 = base[r.seed]
            n = min(t.size, t0.size)
            ok = (t[:n] > 0) & (l0[:n] > 0)
            ax2.plot(t[:n][ok], loss[:n][ok] / l0[:n][ok], color=colour[p], lw=1.0)
    ax.set(xscale="log", yscale="log", xlabel="time", title="test loss (no repetition)")
    ax2.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax2.set(xscale="log", xlabel="time", title="÷ p = 0's (same seed)")
    ax.legend()
    fig.suptitle(title or "§2.3: is cross-sample repetition's advantage temporary?")
    return fig


CLAIM = Claim("cross-sample repetition 'only provides a temporary advantage [...] in the long run, learning is slower' "
              "(§2.3; held: every p > 0 ends above p = 0 in every seed)", check_temporary, temporary_report,
              temporary_figure)
