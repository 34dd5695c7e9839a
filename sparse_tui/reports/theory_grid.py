"""``sparse-tui theory``: the reduced flow's plateau at one point (``theory_point``) or over a grid
(``theory_grid``, fitted as App. D.2 does), beside the closed forms and the paper's laws.

No torch, no textual at import."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from sparse_tui.reports.fitreport import _fmt, json_safe, law_text
from sparse_tui.science.dynamics import compare_closed_form, expand_grid, parse_grid, plateau_times
from sparse_tui.science.fitting import FitError, FitResult, compare_to_theory, fit_power_law, format_comparison
from sparse_tui.science.theory import (
    PAPER_FITS,
    escape_time_linear,
    escape_time_linear_log,
    f_rep,
    forecast_exponents,
)


def theory_point(d: float, T: float, B: float = 1, p: float = 0.0, *, threshold: float = 0.2) -> dict[str, Any]:
    """Integrated plateau of one (d, T, B, p) (test loss to ``threshold`` x 0.5, App. D.1) beside the closed forms of
    the linearised dynamics (App. A.3.2: arcsinh and log forms) and the time scale sqrt(d)·T/(B·f)."""
    _check_threshold(threshold)
    pl = float(plateau_times(d, T, B, p, threshold=threshold)[()])
    eps = 1.0 - threshold
    a = float(escape_time_linear(d, T, B, p, eps=eps)[()])
    lg = float(escape_time_linear_log(d, T, B, p, eps=eps)[()])
    f = float(f_rep(p, d))
    scale = math.sqrt(d) * T / (B * f)
    return json_safe({
        "d": d, "T": T, "B": B, "p": p, "f": f, "threshold": threshold, "eps": eps,
        "plateau": pl, "closed_arcsinh": a, "closed_log": lg, "scale": scale,
        "ratio_arcsinh": a / pl, "ratio_log": lg / pl, "ratio_scale": pl / scale,  # NaN: None (json_safe)
    })


def _check_threshold(threshold: float) -> None:
    if not (0.0 < threshold < 1.0):
        raise FitError(f"--threshold: must be in (0, 1), got {threshold:g}")


def format_theory_point(pt: Mapping[str, Any]) -> str:
    q = f"p = {pt['p']:g} (f = {pt['f']:.4g})" if pt["p"] else "p = 0"
    lines = [
        f"d = {pt['d']:g}, T = {pt['T']:g}, B = {pt['B']:g}, {q}; plateau = first time the test loss reaches "
        f"{pt['threshold']:g} x its initial value 0.5 (App. D.1)",
        f"  integrated plateau (Eqs. 12-14 / 17-21)      {_fmt(pt['plateau'], '.6g'):>12}",
        f"  closed form, arcsinh (App. A.3.2)            {_fmt(pt['closed_arcsinh'], '.6g'):>12}"
        f"   closed / integrated = {_fmt(pt['ratio_arcsinh'], '.3f')}",
        f"  closed form, log (App. A.3.2, large argument){_fmt(pt['closed_log'], '.6g'):>12}"
        f"   closed / integrated = {_fmt(pt['ratio_log'], '.3f')}",
        f"  time scale sqrt(d)·T/(B·f)                   {_fmt(pt['scale'], '.6g'):>12}"
        f"   integrated / scale  = {_fmt(pt['ratio_scale'], '.3f')}",
    ]
    return "\n".join(lines)


def theory_grid(grid: Mapping[str, Sequence[float]] | Sequence[str] | str, *, threshold: float = 0.2,
                paper: str | None = "auto") -> dict[str, Any]:
    """Integrated plateaus over a grid (``dynamics.parse_grid`` strings or a dict), the closed forms, and the power-law
    fit of the integrated plateaus over the variables that vary (p enters as f(p, d)), with its comparison.

    Returns {"rows": [...], "ranges": {...}, "fit": FitResult | None, "fit_error": str | None,
    "comparison": [...], "paper": key}."""
    _check_threshold(threshold)
    if isinstance(grid, (str, list, tuple)):
        try:
            grid = parse_grid(grid)
        except ValueError as e:
            raise FitError(f"--grid: {e}") from None
    for k, vals in grid.items():
        for v in vals:
            if k in ("d", "T", "B") and (not math.isfinite(v) or v < 1 or float(v) != int(v)):
                raise FitError(f"--grid: {k} must be a positive integer, got {v:g}")
            if k == "p" and not 0.0 <= v <= 1.0:
                raise FitError(f"--grid: p must be in [0, 1], got {v:g}")
    g = expand_grid(grid)
    if np.any(g["B"] > g["T"]):
        raise FitError("--grid: B must be <= T at every point")
    cmp = compare_closed_form(grid, threshold=threshold)
    rows = cmp["rows"]
    for r in rows:
        r["f"] = float(f_rep(r["p"], r["d"]))
        r["scale"] = math.sqrt(r["d"]) * r["T"] / (r["B"] * r["f"])
    variables = [k for k in ("d", "T", "B") if len({r[k] for r in rows}) > 1]
    if len({r["p"] for r in rows}) > 1:
        variables.append("f")
    fit = fit_error = key = None
    comparison: list[dict[str, Any]] = []
    if variables:
        # 'auto': the reduced flow's own figure, Fig. 2 right when p varies (f), else Fig. 2 left
        key = ("fig2_right" if "f" in variables else "fig2_left") if paper == "auto" else paper
        try:
            fit = fit_power_law(rows, variables, target="plateau")
            comparison = compare_to_theory(fit, paper=key)
        except FitError as e:
            fit_error = str(e)
    else:
        fit_error = "a single point: nothing to fit"
    return {"rows": rows, "threshold": threshold,
            "ranges": {k: cmp[k] for k in ("ratio_arcsinh", "ratio_log", "ratio_scale")},
            "variables": variables, "fit": fit, "fit_error": fit_error, "comparison": comparison, "paper": key}


def format_theory_grid(out: Mapping[str, Any]) -> str:
    rows = out["rows"]
    show_p = any(r["p"] for r in rows)
    head = f"{'d':>6} {'T':>6} {'B':>4} " + (f"{'p':>6} " if show_p else "")
    head += (f"{'plateau':>11} {'sqrt(d)T/Bf':>11} {'pl/scale':>8} {'arcsinh':>11} {'arcsinh/pl':>10} "
             f"{'log':>11} {'log/pl':>7}")
    lines = [f"integrated plateau (test loss to {out['threshold']:g} x 0.5) vs the linearised closed forms "
             "(App. A.3.2) and the time scale sqrt(d)·T/(B·f)", head]
    for r in rows:
        s = f"{r['d']:>6g} {r['T']:>6g} {r['B']:>4g} " + (f"{r['p']:>6g} " if show_p else "")
        s += (f"{_fmt(r['plateau'], '.5g'):>11} {_fmt(r['scale'], '.5g'):>11} {_fmt(r['ratio_scale'], '.3f'):>8} "
              f"{_fmt(r['arcsinh'], '.5g'):>11} {_fmt(r['ratio_arcsinh'], '.3f'):>10} {_fmt(r['log'], '.5g'):>11} "
              f"{_fmt(r['ratio_log'], '.3f'):>7}")
        lines.append(s)
    rg = out["ranges"]
    lines.append(f"closed form / integrated: arcsinh {rg['ratio_arcsinh'][0]:.2f} .. {rg['ratio_arcsinh'][1]:.2f}, "
                 f"log {rg['ratio_log'][0]:.2f} .. {rg['ratio_log'][1]:.2f}; integrated / time scale "
                 f"{rg['ratio_scale'][0]:.2f} .. {rg['ratio_scale'][1]:.2f}")
    lines.append("")
    fit: FitResult | None = out["fit"]
    if fit is None:
        lines.append(f"power-law fit: not done ({out['fit_error']})")
        return "\n".join(lines)
    lines += ["power-law fit of the integrated plateaus (App. D.2, least squares on logs):", fit.summary()]
    pf = PAPER_FITS.get(out["paper"]) if out.get("paper") else None
    head = "exponents vs the forecast sqrt(d)·T/(B·f) (d +0.5, T +1, B -1, f -1)"
    if pf is not None:
        head += f" and the paper's {pf.figure} fit ({law_text(pf)})"
    lines += [head + ":", format_comparison(out["comparison"])]
    return "\n".join(lines)


def theory_grid_dict(out: Mapping[str, Any]) -> dict[str, Any]:
    """``theory_grid`` output as JSON-ready data."""
    fit = out["fit"]
    pf = PAPER_FITS.get(out["paper"]) if out.get("paper") else None
    return json_safe({
        "threshold": out["threshold"], "rows": out["rows"], "ranges": out["ranges"], "variables": out["variables"],
        "fit": None if fit is None else fit.to_dict(), "formula": None if fit is None else fit.formula(),
        "fit_error": out["fit_error"], "comparison": out["comparison"], "forecast": forecast_exponents(),
        "paper": None if pf is None else {"key": pf.key, "figure": pf.figure, "C": pf.C, "exponents": pf.exponents,
                                          "r2": pf.r2},
    })
