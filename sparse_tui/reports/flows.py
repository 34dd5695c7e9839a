"""The reduced dynamics' runs as arrays (Figs. 1a, 1b, 6, 7, 8, 10): what their reports and figures read.

Each figure draws the 'ode' runs of the entry's preset (their logged toy/w, toy/alpha, toy/w_tilde and losses) beside
what theory.py computes for them (the landscape of Eq. 12, w_inf(alpha), the Hessian, the linearisation). The
flows themselves are checked against independent scipy integrations in tests/test_theory.py."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from sparse_tui.atlas import Entry
from sparse_tui.reports.base import FigureError, Report, make_report, run_config


def flow_series(store: Any, run_id: str) -> dict[str, Any]:
    """An 'ode' run as arrays: t (flow time = step x lr), d, T, B, p, plateau time, w, alpha, da (Eq. 9 inverted),
    the losses and, with p > 0, w~ and the other columns' w (App. A.4.1)."""
    from sparse_tui.science.repetition import initial
    from sparse_tui.science.theory import delta_a_of_alpha

    rec = store.get(run_id)
    cfg = run_config(rec)
    task, lr = cfg.task, float(cfg.train.lr)
    series = store.metrics(run_id)

    def arr(name: str) -> Any:
        return timed(series, name, lr)

    t, w = arr("toy/w")
    _, alpha = arr("toy/alpha")
    out = {"rec": rec, "t": t, "w": w, "alpha": alpha, "d": float(task.d), "T": float(task.T),
           "B": float(initial(task.B)), "p": float(initial(task.p)),
           "plateau": None if rec.plateau_step is None else float(rec.plateau_step) * lr}
    out["da"] = delta_a_of_alpha(alpha, out["T"], out["B"])
    for name in ("test/loss", "train/loss", "toy/w_tilde"):
        tt, v = arr(name)
        out[name] = v if tt.size == t.size else np.interp(t, tt, v) if tt.size else None
    if out["toy/w_tilde"] is not None:
        d = out["d"]
        out["w_rest"] = (np.sqrt(d) * w - out["toy/w_tilde"]) / np.sqrt(d - 1)
    if t.size == 0:
        raise FigureError(f"run {run_id} logged no toy/w (an 'ode' run of the reduced dynamics is needed)")
    return out


def timed(series: dict[str, Any], name: str, lr: float) -> tuple[np.ndarray, np.ndarray]:
    """A logged curve against flow time (step × lr), a missing value as NaN."""
    st, vals = series.get(name, ([], []))
    return np.asarray(st, dtype=float) * lr, np.asarray([np.nan if v is None else v for v in vals], dtype=float)


def sorted_flows(store: Any, run_ids: Sequence[str], key: str) -> list[dict[str, Any]]:
    """The runs' ``flow_series``, sorted by ``key`` (d, T or p)."""
    return sorted((flow_series(store, r) for r in run_ids), key=lambda f: f[key])


def _time_axis(ax: Any, flows: Sequence[dict[str, Any]]) -> None:
    """Flow-time axis up to 2.5 x the longest plateau (the late phase is flat)."""
    pls = [f["plateau"] for f in flows if f["plateau"]]
    if pls:
        ax.set_xlim(0, min(2.5 * max(pls), max(float(f["t"][-1]) for f in flows)))


def _theory_report(entry: Entry, run_ids: Sequence[str], claim: str, head: str, rows: list[str],
                   data: dict[str, Any]) -> Report:
    return make_report(entry, run_ids, [f"  paper: {claim}", f"  {head}", *(f"  {r}" for r in rows)], data)
