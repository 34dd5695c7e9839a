"""Fig. 6 (arXiv 2505.17863 App. A.3.1, Eq. 12): the loss landscape over (w, Δa) and the flow's path."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from sparse_tui.atlas import Entry
from sparse_tui.base.numbers import fmt_plain
from sparse_tui.reports.base import Claim, Report, _fig, figure_writer
from sparse_tui.reports.flows import _theory_report, sorted_flows


@dataclass
class Fig6Data:
    path: list[dict[str, float]]  # (w, Δa) at fractions of the plateau
    w_max_over_sqrt_d: float
    da_at_w_max: float
    w_end_over_sqrt_d: float
    da_end: float


def fig6_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    f = sorted_flows(store, run_ids, "d")[0]
    sd = math.sqrt(f["d"])
    pl = f["plateau"] or float(f["t"][-1])
    pts = []
    for frac in (0.25, 0.5, 0.9, 1.0):
        t = frac * pl
        pts.append({"t_over_plateau": frac, "w": float(np.interp(t, f["t"], f["w"])),
                    "da": float(np.interp(t, f["t"], f["da"]))})
    k = int(np.nanargmax(f["w"]))
    data = Fig6Data(path=pts, w_max_over_sqrt_d=float(f["w"][k]) / sd, da_at_w_max=float(f["da"][k]),
            w_end_over_sqrt_d=float(f["w"][-1]) / sd, da_end=float(f["da"][-1]))
    rows = ["(w, Δa) at " + ", ".join(f"{p['t_over_plateau']:g} × plateau: ({p['w']:.2f}, {p['da']:.2f})"
                                      for p in pts),
            f"w peaks at {data.w_max_over_sqrt_d:.3f} × √d (Δa = {data.da_at_w_max:.2f}), ends at "
            f"{data.w_end_over_sqrt_d:.3f} × √d with Δa = {data.da_end:.2f}"]
    return _theory_report(entry, run_ids, "the flow from (0, 0) over the landscape (T = 256, d = 64)",
                          "measured path:", rows, data)


@figure_writer()
def fig6_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None) -> Any:
    """Fig. 6: log10 of the loss Eq. 12 over (w, da) and the gradient-flow path from (0, 0) (white)."""
    from sparse_tui.science.theory import loss_eq12

    f = sorted_flows(store, run_ids, "d")[0]
    ok = np.isfinite(f["da"])
    w_hi = max(1.4 * math.sqrt(f["d"]), float(np.nanmax(f["w"])) * 1.1)
    da_hi = float(np.nanmax(f["da"][ok])) * 1.1 + 1
    W, A = np.meshgrid(np.linspace(-0.25 * w_hi, w_hi, 240), np.linspace(-0.15 * da_hi, da_hi, 240))
    L = loss_eq12(W, A, f["d"], f["T"], f["B"])
    fig, (ax,) = _fig(1, 4.8, 3.6)
    cs = ax.contourf(W, A, np.log10(L), levels=30, cmap="viridis")
    fig.colorbar(cs, ax=ax, label="log10 loss (Eq. 12)")
    ax.plot(f["w"][ok], f["da"][ok], color="white", lw=1.4)
    ax.plot([0], [0], marker="x", color="white", ms=7, mew=1.6)
    ax.set_xlabel("w")
    ax.set_ylabel("Δa")
    fig.suptitle(title or f"Fig. 6: loss landscape and gradient flow (T = {fmt_plain(f['T'], 'g')}, "
                 f"d = {fmt_plain(f['d'], 'g')})")
    return fig


def _check_fig6(store, rep):
    d = rep.data
    ok = d.w_max_over_sqrt_d > d.w_end_over_sqrt_d and d.da_end > 0
    why = (f"w peaks at {d.w_max_over_sqrt_d:.3f} √d, ends at {d.w_end_over_sqrt_d:.3f} √d; Δa ends at "
           f"{d.da_end:.2f}")
    return ("reproduced" if ok else "not reproduced"), why


CLAIM = Claim("after the transition w decreases while Δa grows (App. A.3.3)", _check_fig6, fig6_report, fig6_figure)
