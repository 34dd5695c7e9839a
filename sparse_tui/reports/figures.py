"""Publication-style figures with matplotlib (``sparse-tui fit --plot FILE``, ``sparse-tui show RUN --plot FILE``, the
console's Curves, Fit, Scatter and Phase panels): the generic kinds' figures. A figure of one atlas entry lives in
its module (reports/entries/); the writer every figure is, ``figure_writer``, and ``FigureError`` live in
reports/base.py (matplotlib imported inside the functions, never at module import; written atomically).

* ``fit_figure``: the plateau length against each fitted variable on log-log axes (App. D.2): one panel per
  variable, runs coloured by the values of the other variables, the fitted law as solid lines, the paper's law
  (``theory.PAPER_FITS``) as dashed lines, censored runs (no plateau within their budget) as open triangles at their
  last step, a lower bound.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from sparse_tui.base.numbers import fmt_plain
from sparse_tui.base.plotting import fmt_r2
from sparse_tui.reports.base import FigureError, _fig, figure_writer

__all__ = ["fit_figure"]


def _decades(ax: Any) -> float:
    lo, hi = ax.get_ylim()
    return math.log10(hi / lo) if lo > 0 and hi > 0 else 0.0


def _tick(t: float) -> str:
    return f"{t:,.0f}" if t >= 100 else f"{t:.3g}"


# ---------------------------------------------------------------------------------------------------------------
# Plateau against each variable (fit --plot)
# ---------------------------------------------------------------------------------------------------------------


def _fit_points(rep: Any) -> tuple[list[dict[str, float]], list[float], list[bool]]:
    """Per run of the fit: the variables' values, the target (or, when censored, its lower bound) and whether the
    run is censored. Read with the same resolver the fit used (``fitting.Resolver``)."""
    from sparse_tui.reports.fitreport import with_time_target
    from sparse_tui.science.fitting import Resolver, flat_rows, is_missing

    res = rep.result
    rows = rep.selection.rows
    if res.target == "plateau_time":
        rows = with_time_target(rows)
    rows = flat_rows(rows)
    resolver = Resolver(rows)
    bounds = {c["row"]: c.get("lower_bound") for c in res.censored}
    xs, ys, cens = [], [], []
    for i, r in enumerate(rows):
        if i in bounds:
            y, c = bounds[i], True
            if res.target == "plateau_time" and y is not None:
                y = float(y) * float(r.get("params.train.lr", 1.0))
        else:
            tv = next((r[k] for k in (res.target, "params." + res.target, "summary." + res.target) if k in r), None)
            y, c = (None if is_missing(tv) else float(tv)), False
        if y is None or not y > 0:
            continue
        try:
            x = {v: resolver.value(r, v, i) for v in res.variables}
        except Exception:  # a row the fit could not use either
            continue
        if any(not (val > 0) for val in x.values()):
            continue
        xs.append(x)
        ys.append(float(y))
        cens.append(c)
    return xs, ys, cens


def _paper_law(rep: Any) -> tuple[Any, dict[str, str], dict[str, float]] | None:
    """The paper's fit compared with (``rep.paper``), when each of its variables is either fitted or takes one value
    over the runs (read from the rows, e.g. T = 4096 in Fig. 2 left): the fit, a map paper variable -> fitted
    variable, and the constant values of the others. None when a variable is missing or varies without being fitted."""
    from sparse_tui.science.fitting import Resolver, flat_rows, short_name
    from sparse_tui.science.theory import PAPER_FITS

    pf = PAPER_FITS.get(rep.paper) if rep.paper else None
    if pf is None:
        return None
    names = {short_name(v): v for v in rep.result.variables}
    rows = flat_rows(rep.selection.rows)
    resolver = Resolver(rows)
    mapping: dict[str, str] = {}
    fixed: dict[str, float] = {}
    for pv in pf.exponents:
        if pv in names:
            mapping[pv] = names[pv]
            continue
        try:
            vals = {resolver.value(r, pv, i) for i, r in enumerate(rows)} if resolver.known(pv) else set()
        except Exception:
            return None
        if len(vals) != 1 or not next(iter(vals)) > 0:
            return None
        fixed[pv] = next(iter(vals))
    return pf, mapping, fixed


@figure_writer()
def fit_figure(rep: Any, *, title: str | None = None) -> Any:
    """Write the plateau-vs-variable figure of a fit report (``fitreport.FitReport``) to ``path``; see the module
    docstring. Raises ``FigureError``."""
    import matplotlib as mpl
    from matplotlib.lines import Line2D

    res = rep.result
    xs, ys, cens = _fit_points(rep)
    if not xs:
        raise FigureError("no run with a positive plateau (or lower bound) to plot")
    variables = list(res.variables)
    paper = _paper_law(rep)
    theory = {r["variable"]: r["forecast"] for r in rep.comparison if r.get("forecast") is not None}
    fig, axes = _fig(len(variables), 4.4, 3.1)
    partial_any = False
    for ax, v in zip(axes, variables):
        others = [o for o in variables if o != v]
        groups = sorted({tuple(x[o] for o in others) for x in xs})
        grid = np.geomspace(min(x[v] for x in xs) / 1.15, max(x[v] for x in xs) * 1.15, 50)
        if len(groups) > 8:
            # The other variables take too many values (a derived variable such as f(p, d)): plot the partial
            # residual, the plateau with the other variables' fitted effect divided out, against v.
            partial_any = True
            _partial_panel(ax, v, others, xs, ys, cens, res, paper, grid, theory.get(v))
            _finish_axis(ax, v, xs, res, paper, ylabel=f"{res.target.replace('_', ' ')} / others' fitted effect",
                         theory=theory.get(v))
            continue
        cmap = mpl.colormaps["viridis"]
        colour = {g: cmap(0.1 + 0.75 * (k / max(1, len(groups) - 1))) for k, g in enumerate(groups)}
        for g in groups:
            sel = [i for i, x in enumerate(xs) if tuple(x[o] for o in others) == g]
            c = colour[g]
            fx, fy = _points(ax, [xs[i][v] for i in sel], [ys[i] for i in sel], [cens[i] for i in sel], c)
            fixed = dict(zip(others, g))
            ax.plot(grid, [res.predict(**{**fixed, v: t}) for t in grid], color=c, lw=1.2)
            if paper is not None:
                pf, mp, const = paper

                def law(t: float, fixed: dict = fixed) -> float:
                    out = pf.C
                    for pv, e in pf.exponents.items():
                        fv = mp.get(pv)
                        out *= (t if fv == v else fixed[fv] if fv is not None else const[pv]) ** e
                    return out

                ax.plot(grid, [law(t) for t in grid], color=c, lw=1.0, ls=(0, (4, 2.5)), alpha=0.8)
            _slope_line(ax, grid, fx, fy, theory.get(v), color=c, lw=0.9, ls="-.", alpha=0.8)
        _finish_axis(ax, v, xs, res, paper, ylabel=res.target.replace("_", " "), theory=theory.get(v))
        if others and len(groups) > 1:
            handles = [Line2D([], [], color=colour[g], marker="o", ms=3.5, lw=1.0,
                              label=", ".join(f"{o}={fmt_plain(val, 'g')}" for o, val in zip(others, g)))
                       for g in groups]
            if len(handles) > 8:
                handles = handles[:: math.ceil(len(handles) / 8)]
            # beside the panel: inside, "best" still covered points (it only avoids lines)
            ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      handlelength=1.4, borderaxespad=0.0)
    key = _fit_key(res, paper, theory, any(cens), partial_any)
    fig.legend(handles=key, loc="outside lower center", ncol=len(key))
    presets = ", ".join(rep.selection.presets) or "runs"
    head = title or f"{presets}: {res.formula()}"  # what was fitted, not the selection's log line
    reread = getattr(rep, "reread", None)  # plateaus re-read at another threshold (fit --threshold X)
    at = f", plateau at {'; '.join(reread.used)} (re-read)" if reread is not None else ""
    fig.suptitle(f"{head}   (R² = {fmt_r2(res.r2)}, n = {res.n}, censored = {res.n_censored}{at})")
    return fig


def _fit_key(res: Any, paper: Any, theory: Mapping[str, float], censored: bool, partial: bool) -> list[Any]:
    """``fit_figure``'s key below the panels: the fit, the paper's law, the theory's slopes, the censored marker,
    the partial slope."""
    from matplotlib.lines import Line2D

    from sparse_tui.reports.fitreport import law_text

    key = [Line2D([], [], color="0.2", lw=1.2, label=f"fit {res.formula()}")]
    if paper is not None:
        pf, _, const = paper
        at = f" at {', '.join(f'{k} = ' + fmt_plain(c, 'g') for k, c in const.items())}" if const else ""
        key.append(Line2D([], [], color="0.2", lw=1.0, ls=(0, (4, 2.5)),
                          label=f"paper {pf.figure}: {law_text(pf)}{at}"))
    if theory:
        slopes = ", ".join(f"{v} {e:+g}" for v, e in theory.items())
        key.append(Line2D([], [], color="0.2", lw=1.0, ls="-.",
                          label=f"theory forecast √d·T/B (App. A.3.2): slopes {slopes}, through the data"))
    if censored:
        key.append(Line2D([], [], color="0.2", marker="^", mfc="none", ls="",
                          label="censored: no plateau by the last step (lower bound)"))
    if partial and paper is not None:
        key.append(Line2D([], [], color="0.5", lw=1.0, ls=(0, (1.5, 1.5)),
                          label="paper's slope through the data's centre (partial panels)"))
    return key


def _points(ax: Any, x: Sequence[float], y: Sequence[float], cens: Sequence[bool], colour: Any
            ) -> tuple[list[float], list[float]]:
    """The runs as dots, the censored ones as open triangles (a lower bound); returns the dots' x and y."""
    fx = [a for a, c in zip(x, cens) if not c]
    fy = [b for b, c in zip(y, cens) if not c]
    ax.scatter(fx, fy, s=16, color=colour, zorder=3, linewidths=0)
    if any(cens):
        ax.scatter([a for a, c in zip(x, cens) if c], [b for b, c in zip(y, cens) if c], s=22, marker="^",
                   facecolors="none", edgecolors=[colour], zorder=3, linewidths=0.9)
    return fx, fy


def _slope_line(ax: Any, grid: Any, fx: Sequence[float], fy: Sequence[float], slope: float | None, **style: Any
                ) -> None:
    """A slope without a prefactor (the theory's forecast, ``theory.forecast_exponents``; the paper's on a partial
    panel) drawn through the geometric centre of the measured points ``fx``, ``fy``."""
    if slope is None or not fx:
        return
    lx, ly = np.mean(np.log(fx)), np.mean(np.log(fy))
    ax.plot(grid, [math.exp(ly + slope * (math.log(t) - lx)) for t in grid], **style)


def _finish_axis(ax: Any, v: str, xs: Sequence[Mapping[str, float]], res: Any, paper: Any, ylabel: str,
                 theory: float | None = None) -> None:
    """Log-log axes, readable ticks, and the fitted (the paper's, the theory's) slope in a box."""
    import matplotlib.ticker as mticker

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(v)
    ax.set_ylabel(ylabel)
    uniq = sorted({x[v] for x in xs})
    if len(uniq) <= 8 and all(float(u).is_integer() for u in uniq):
        ax.set_xticks(uniq)
        ax.set_xticklabels([fmt_plain(u, 'g') for u in uniq])
        ax.xaxis.set_minor_locator(mticker.NullLocator())
    else:
        fmt = mticker.FuncFormatter(lambda t, _: f"{t:g}")
        ax.xaxis.set_major_formatter(fmt)
        ax.xaxis.set_minor_formatter(fmt if max(uniq) / min(uniq) < 10 else mticker.NullFormatter())
    # a narrow log axis (under a decade) may have no major tick: then label the minor ones (decided at draw time)
    ax.yaxis.set_minor_formatter(mticker.FuncFormatter(lambda t, _: _tick(t) if _decades(ax) < 1 else ""))
    txt = f"fit: slope {res.exponents[v]:+.3f} ± {res.stderr.get(v, float('nan')):.3f}"
    if paper is not None:
        pf, mp, _ = paper
        pv = next((k for k, fv in mp.items() if fv == v), None)
        if pv is not None:
            txt += f"\npaper: slope {pf.exponents[pv]:+.2f}"
    if theory is not None:
        txt += f"\ntheory: slope {theory:+.2f}"
    # above the panel, not inside it: a box in a corner hid the points (and censored triangles) under it
    ax.set_title(txt, fontsize=7.5, loc="left")


def _partial_panel(ax: Any, v: str, others: Sequence[str], xs: Sequence[Mapping[str, float]], ys: Sequence[float],
                   cens: Sequence[bool], res: Any, paper: Any, grid: Any, theory: float | None) -> None:
    """Partial-residual panel: y / prod_o x_o^beta_o against v, the fitted C v^beta_v, and the paper's slope drawn
    through the geometric centre of the fitted points (its prefactor does not apply to this adjusted axis)."""
    adj = [y / math.prod(x[o] ** res.exponents[o] for o in others) for x, y in zip(xs, ys)]
    fx, fy = _points(ax, [x[v] for x in xs], adj, cens, "#3b528b")
    ax.plot(grid, [res.C * t ** res.exponents[v] for t in grid], color="0.2", lw=1.2)
    if paper is not None:
        pf, mp, _ = paper
        pv = next((k for k, fv in mp.items() if fv == v), None)
        _slope_line(ax, grid, fx, fy, None if pv is None else pf.exponents[pv], color="0.5", lw=1.0,
                    ls=(0, (1.5, 1.5)))
    _slope_line(ax, grid, fx, fy, theory, color="#3b528b", lw=0.9, ls="-.", alpha=0.8)
