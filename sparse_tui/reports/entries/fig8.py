"""Fig. 8 (arXiv 2505.17863 App. A.3.3): w against its equilibrium; the Hessian's eigenvalues."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from sparse_tui.atlas import Entry
from sparse_tui.base.numbers import fmt_plain
from sparse_tui.reports.base import Claim, Report, _colours, _fig, _num, figure_writer
from sparse_tui.reports.flows import _theory_report, _time_axis, sorted_flows


@dataclass
class Fig8Data:
    w_over_winf_plateau_max: float | None
    w_over_winf_late_maxdev: float | None
    eig_start: list[float]
    lambda_: float  # B/(√d·T); "lambda" in --json
    eig_max: float
    t_eig_max_over_plateau: float
    eig_end: list[float]
    one_over_d: float


def _eigenvalues(f: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Where Δa is finite along the flow, and the Hessian of Eq. 12's two eigenvalues there."""
    from sparse_tui.science.theory import hessian_eq12

    ok = np.isfinite(f["da"])
    return ok, np.linalg.eigvalsh(hessian_eq12(f["w"][ok], f["da"][ok], f["d"], f["T"], f["B"]))


def fig8_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    from sparse_tui.science.theory import w_equilibrium

    f = sorted_flows(store, run_ids, "d")[0]
    pl = f["plateau"] or float(f["t"][-1])
    winf = w_equilibrium(f["alpha"], f["d"], f["T"], f["B"])
    ratio = f["w"] / winf
    early = f["t"] < 0.5 * pl
    late = f["t"] > 1.5 * pl
    ok, ev = _eigenvalues(f)
    lam = f["B"] / (math.sqrt(f["d"]) * f["T"])
    k = int(np.argmax(ev[:, 1]))
    data = Fig8Data(w_over_winf_plateau_max=float(np.nanmax(ratio[early][1:])) if early.sum() > 1
            else None, w_over_winf_late_maxdev=float(np.nanmax(np.abs(ratio[late] - 1))) if late.any() else None,
            eig_start=[float(ev[0, 0]), float(ev[0, 1])], lambda_=lam, eig_max=float(ev[k, 1]),
            t_eig_max_over_plateau=float(f["t"][ok][k]) / pl, eig_end=[float(ev[-1, 0]), float(ev[-1, 1])],
            one_over_d=1 / f["d"])
    rows = [f"w / w∞(α): at most {_num(data.w_over_winf_plateau_max, '.3f')} in the first half of the plateau; "
            f"within {_num(data.w_over_winf_late_maxdev, '.1e')} of 1 after 1.5 × the plateau",
            f"Hessian eigenvalues at t = 0: {ev[0, 0]:+.3e}, {ev[0, 1]:+.3e} (±1/(√d·T) = ±{lam:.3e}); largest "
            f"{data.eig_max:.3e} at {data.t_eig_max_over_plateau:.2f} × the plateau; at the end "
            f"{ev[-1, 0]:+.2e}, {ev[-1, 1]:.4f} (1/d = {1 / f['d']:.4f})"]
    return _theory_report(entry, run_ids, "w at its equilibrium after the transition; Hessian ±B/√(dT) early, "
                          "sharpest in the middle, 1/d and ~0 late", f"measured (T = {f['T']:g}, d = {f['d']:g}):",
                          rows, data)


@figure_writer()
def fig8_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None) -> Any:
    """Fig. 8: (left) w_inf(alpha) for several T at the run's d; (middle) w and w_inf(alpha(t)) along the flow;
    (right) the smallest and largest eigenvalue of the Hessian of Eq. 12 along the flow."""
    from sparse_tui.science.theory import w_equilibrium

    f = sorted_flows(store, run_ids, "d")[0]
    fig, (a1, a2, a3) = _fig(3)
    Ts = [64, 256, 1024, 4096]
    for T, c in zip(Ts, _colours(len(Ts))):
        al = np.geomspace(1.0 / T, 1.0 - 1e-4, 300)
        a1.plot(al, w_equilibrium(al, f["d"], T, f["B"]), color=c, label=f"T = {T}")
    a1.axhline(math.sqrt(f["d"]), color="0.5", lw=0.7, ls="--")
    a1.set_xscale("log")
    a1.set_xlabel("α")
    a1.set_ylabel("w∞(α)")
    a1.legend()
    a2.plot(f["t"], f["w"], color="C0", label="w")
    a2.plot(f["t"], w_equilibrium(f["alpha"], f["d"], f["T"], f["B"]), color="C3", ls="--", label="w∞(α(t))")
    a2.set_ylim(0, 2.5 * math.sqrt(f["d"]))
    a2.set_xlabel("flow time")
    a2.legend()
    ok, ev = _eigenvalues(f)
    a3.plot(f["t"][ok], ev[:, 1], color="C2", label="largest")
    a3.plot(f["t"][ok], ev[:, 0], color="C4", label="smallest")
    a3.set_yscale("symlog", linthresh=1e-5)
    a3.set_xlabel("flow time")
    a3.set_title("Hessian eigenvalues")
    a3.legend()
    for ax in (a2, a3):
        _time_axis(ax, [f])
        if f["plateau"] is not None:
            ax.axvline(f["plateau"], color="0.4", lw=0.7, ls=":")
    fig.suptitle(title or f"Fig. 8 (T = {fmt_plain(f['T'], 'g')}, d = {fmt_plain(f['d'], 'g')})")
    return fig


def _check_fig8(store, rep):
    d = rep.data
    late = d.w_over_winf_late_maxdev
    mid = d.t_eig_max_over_plateau
    ok = late is not None and late <= 1e-3 and 0.5 <= mid <= 1.5
    return ("reproduced" if ok else "not reproduced"), (f"|w ÷ w∞ − 1| late {late:.1e}; largest eigenvalue at "
                                                        f"{mid:.2f} × the plateau")


CLAIM = Claim("w at its equilibrium late; the Hessian sharpest around the transition", _check_fig8, fig8_report,
              fig8_figure)
