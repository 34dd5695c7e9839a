"""Fig. 1b (arXiv 2505.17863 §2.2): w learns before the attention α."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from sparse_tui.atlas import Entry
from sparse_tui.base.numbers import fmt_plain
from sparse_tui.reports.base import Claim, Report, _fig, _first, _num, figure_writer
from sparse_tui.reports.flows import _theory_report, _time_axis, sorted_flows


@dataclass
class Fig1bData:
    d: float
    T: float
    t_w_tenth: float | None  # flow time at which w reaches 10% of √d
    t_alpha_tenth: float | None  # ... and α 10% of 1
    alpha_when_w_tenth: float | None
    w_when_alpha_tenth: float | None
    w_max_over_sqrt_d: float
    plateau: float | None


def fig1b_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    f = min(sorted_flows(store, run_ids, "d"), key=lambda f: abs(f["d"] - 64))
    sd = math.sqrt(f["d"])
    t_w = _first(f["t"], f["w"] >= 0.1 * sd)
    t_a = _first(f["t"], f["alpha"] >= 0.1)
    alpha_at_tw = float(np.interp(t_w, f["t"], f["alpha"])) if t_w is not None else None
    w_at_ta = float(np.interp(t_a, f["t"], f["w"])) / sd if t_a is not None else None
    data = Fig1bData(d=f["d"], T=f["T"], t_w_tenth=t_w, t_alpha_tenth=t_a,
            alpha_when_w_tenth=alpha_at_tw, w_when_alpha_tenth=w_at_ta,
            w_max_over_sqrt_d=float(np.nanmax(f["w"])) / sd, plateau=f["plateau"])
    rows = [f"w reaches 10% of its optimum √d at t = {_num(t_w, '.0f')}, when α = {_num(alpha_at_tw, '.4f')} "
            f"(initial 1/T = {1 / f['T']:.4f});",
            f"α reaches 10% of its optimum 1 at t = {_num(t_a, '.0f')}, when w = {_num(w_at_ta, '.2f')} × √d; "
            f"plateau {_num(f['plateau'], '.0f')}",
            f"w peaks at {data.w_max_over_sqrt_d:.3f} × √d, then decreases towards √d (App. A.3.3)"]
    return _theory_report(entry, run_ids, "w begins learning before α (T = 512, d = 64)",
                          f"measured (T = {f['T']:g}, d = {f['d']:g}):", rows, data)


@figure_writer()
def fig1b_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None) -> Any:
    """Fig. 1b: w and alpha against time at d = 64 (or the run nearest it), optimal values dashed."""
    f = min(sorted_flows(store, run_ids, "d"), key=lambda f: abs(f["d"] - 64))
    fig, (a1, a2) = _fig(2)
    a1.plot(f["t"], f["w"], color="C0")
    a1.axhline(math.sqrt(f["d"]), color="C0", ls="--", lw=0.9)
    a1.set_ylabel("w (projection on W*)")
    a2.plot(f["t"], f["alpha"], color="C1")
    a2.axhline(1.0, color="C1", ls="--", lw=0.9)
    a2.set_ylabel("α (attention on the relevant token)")
    for ax in (a1, a2):
        ax.set_xlabel("flow time")
        _time_axis(ax, [f])
        if f["plateau"] is not None:
            ax.axvline(f["plateau"], color="0.4", lw=0.7, ls=":")
    fig.suptitle(title or f"Fig. 1b: w before α (T = {fmt_plain(f['T'], 'g')}, d = {fmt_plain(f['d'], 'g')}; "
                 "dashed: optimum, dotted: plateau)")
    return fig


def _check_fig1b(store, rep):
    d = rep.data
    ok = d.t_w_tenth is not None and (d.t_alpha_tenth is None or d.t_w_tenth < d.t_alpha_tenth)
    return ("reproduced" if ok else "not reproduced"), (f"w at 10% at t = {d.t_w_tenth or float('nan'):.0f}, "
                                                        f"α at 10% at t = {d.t_alpha_tenth or float('nan'):.0f}")


CLAIM = Claim("w begins learning before α", _check_fig1b, fig1b_report, fig1b_figure)
