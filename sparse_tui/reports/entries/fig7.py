"""Fig. 7 (arXiv 2505.17863 App. A.3.2, Eq. 15): the early dynamics against their linearisation."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from sparse_tui.atlas import Entry
from sparse_tui.base.numbers import fmt_plain
from sparse_tui.reports.base import Claim, Report, Runs, _colours, _fig, _fmt, _num, figure_writer
from sparse_tui.reports.flows import _theory_report, sorted_flows


def fig7_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    from sparse_tui.science.theory import escape_time_linear, linear_solution

    rows, data = [], []
    for f in sorted_flows(store, run_ids, "T"):
        lam = f["B"] / (math.sqrt(f["d"]) * f["T"])
        errs = {}
        for x in (0.25, 0.5, 1.0):
            t = x / lam
            w_lin, _ = linear_solution(t, f["d"], f["T"], f["B"])
            w = float(np.interp(t, f["t"], f["w"]))
            errs[x] = w / float(w_lin) - 1
        closed = float(escape_time_linear(f["d"], f["T"], f["B"]))
        pl = f["plateau"]
        data.append({"T": f["T"], "w_rel_err": errs, "plateau": pl, "closed_form": closed})
        rows.append(f"{f['T']:>6g} " + " ".join(f"{errs[x]:>+9.3f}" for x in errs)
                    + f" {_num(pl, '10.0f')} {closed:>11.0f} {_num(closed / pl if pl else None, '7.2f')}")
    return _theory_report(entry, run_ids, "the linearisation matches the early dynamics (d = 512)",
                          f"{'T':>6} {'w/lin-1 at λt=0.25':>9} {'0.5':>9} {'1.0':>9} {'plateau':>10} "
                          f"{'closed form':>11} {'ratio':>7}", rows, Runs(data))


@figure_writer()
def fig7_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None) -> Any:
    """Fig. 7: w, da and the loss of the flow (plain) against the linearisation of Eq. 15 (dashed), per T, against
    lambda t (lambda = B / (sqrt(d) T))."""
    from sparse_tui.science.theory import linear_solution

    flows = sorted_flows(store, run_ids, "T")
    fig, axes = _fig(3)
    for f, c in zip(flows, _colours(len(flows))):
        lam = f["B"] / (math.sqrt(f["d"]) * f["T"])
        x = f["t"] * lam
        sel = x <= 2.0
        wl, dal = linear_solution(f["t"][sel], f["d"], f["T"], f["B"])
        ll = 0.5 * (1 - lam * np.sinh(2 * x[sel]))
        for ax, real, lin in zip(axes, (f["w"], f["da"], f["test/loss"]), (wl, dal, ll)):
            ax.plot(x[sel], real[sel], color=c, label=f"T = {fmt_plain(f['T'], 'g')}")
            ax.plot(x[sel], lin, color=c, ls="--", lw=1.0)
    for ax, name in zip(axes, ("w", "Δa", "test loss")):
        ax.set_xlabel("λ t  (λ = B / (√d T))")
        ax.set_title(name)
    axes[2].set_ylim(0, 0.55)
    axes[0].legend()
    fig.suptitle(title or f"Fig. 7: early dynamics (plain) vs their linearisation (dashed), d = "
                 f"{fmt_plain(flows[0]['d'], 'g')}")
    return fig


def _check_fig7(store, rep):
    errs = [abs(r["w_rel_err"][0.5]) for r in rep.data.runs]
    word = "reproduced" if all(e <= 0.05 for e in errs) else "not reproduced"
    return word, f"|w ÷ linearisation − 1| at λt = 0.5: {_fmt(errs, '.3f')}"


CLAIM = Claim("the linearisation matches the early dynamics (within 5% at λt = 0.5, ours)", _check_fig7,
              fig7_report, fig7_figure)
