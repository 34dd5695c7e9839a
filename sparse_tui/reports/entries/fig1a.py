"""Fig. 1a (arXiv 2505.17863 §2.2, Eqs. 3-4): the reduced flow's loss curves, a plateau then a drop."""

from __future__ import annotations

import math
from typing import Any, Sequence

from sparse_tui.atlas import Entry
from sparse_tui.base.numbers import fmt_plain
from sparse_tui.reports.base import Claim, Report, Runs, _colours, _fig, _fmt, _num, figure_writer
from sparse_tui.reports.flows import _theory_report, _time_axis, sorted_flows
from sparse_tui.reports.library import transition_steps


def fig1a_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    rows, data = [], []
    for f in sorted_flows(store, run_ids, "d"):
        rec = f["rec"]
        series = store.metrics(rec.run_id)
        drop = transition_steps(series, rec)
        pl = f["plateau"]
        over = pl / (math.sqrt(f["d"]) * f["T"] / f["B"]) if pl else None
        data.append({"d": f["d"], "plateau": pl, "plateau_over_scale": over, "drop": drop})
        rows.append(f"{f['d']:>6g} {_num(pl, '10.1f')} {_num(over, '12.3f')} "
                    f"{_num(drop, '10g')} {_num(drop / pl if (drop and pl) else None, '12.3f')}")
    return _theory_report(entry, run_ids, "a plateau at 0.5, then a sharp drop (no numbers)",
                          f"{'d':>6} {'plateau':>10} {'pl/(√d·T)':>12} {'drop':>10} {'drop/plateau':>12}", rows,
                          Runs(data))


@figure_writer()
def fig1a_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None) -> Any:
    """Fig. 1a: the test loss of the reduced flow against time, one line per d (T = 512)."""
    flows = sorted_flows(store, run_ids, "d")
    fig, (ax,) = _fig(1, 4.6, 3.0)
    for f, c in zip(flows, _colours(len(flows))):
        ax.plot(f["t"], f["test/loss"], color=c, label=f"d = {fmt_plain(f['d'], 'g')}")
        if f["plateau"] is not None:
            ax.axvline(f["plateau"], color=c, lw=0.7, ls=":")
    ax.axhline(0.1, color="0.55", lw=0.7)
    _time_axis(ax, flows)
    ax.set_xlabel("flow time (step × lr)")
    ax.set_ylabel("test loss")
    ax.legend()
    fig.suptitle(title or f"Fig. 1a: reduced dynamics, T = {fmt_plain(flows[0]['T'], 'g')}")
    return fig


def _check_fig1a(store, rep):
    runs = rep.data.runs
    ratio = [r["drop"] / r["plateau"] if (r["drop"] is not None and r["plateau"]) else None for r in runs]
    if any(r["plateau"] is None for r in runs):
        return "not reproduced", "a run without a plateau"
    word = "reproduced" if all(x is not None and x <= 0.25 for x in ratio) else "in kind"
    return word, f"every d has a plateau; drop ÷ plateau {_fmt(ratio, '.3f')}"


CLAIM = Claim("a plateau, then a sharp drop (drop ≤ 25% of the plateau, ours)", _check_fig1a, fig1a_report,
              fig1a_figure)
