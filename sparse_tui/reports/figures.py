"""Publication-style figures with matplotlib (``sparse-tui fit --plot FILE``, ``sparse-tui show RUN --plot FILE``, the
console's Curves, Fit, Scatter and Phase panels): the generic kinds' figures. A figure of one atlas entry lives in
its module (reports/entries/); the writer every figure is, ``figure_writer``, and ``FigureError`` live in
reports/base.py (matplotlib imported inside the functions, never at module import; written atomically).

* ``fit_figure``: the plateau length against each fitted variable on log-log axes (App. D.2): one panel per
  variable, runs coloured by the values of the other variables, the fitted law as solid lines, the paper's law
  (``theory.PAPER_FITS``) as dashed lines, censored runs (no plateau within their budget) as open triangles at their
  last step, a lower bound.
* ``curves_figure``: loss and accuracy curves of one or more runs against the step, with each run's plateau (App.
  D.1: the first evaluated step at which the watched metric crosses its threshold) marked by a vertical line and the
  threshold by a horizontal one on the watched metric's panel.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any, Mapping, Sequence

import numpy as np

from sparse_tui.base.numbers import fmt_plain
from sparse_tui.base.plotting import fmt_r2
from sparse_tui.presets.loading import config_get
from sparse_tui.reports.base import FigureError, _fig, figure_writer

__all__ = ["FigureError", "fit_figure", "curves_figure", "phase_figure"]


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
    fig, axes = _fig(len(variables), 4.4, 3.1)
    partial_any = False
    for ax, v in zip(axes, variables):
        others = [o for o in variables if o != v]
        groups = sorted({tuple(x[o] for o in others) for x in xs})
        if len(groups) > 8:
            # The other variables take too many values (a derived variable such as f(p, d)): plot the partial
            # residual, the plateau with the other variables' fitted effect divided out, against v.
            partial_any = True
            _partial_panel(ax, v, others, xs, ys, cens, res, paper)
            _finish_axis(ax, v, xs, res, paper, ylabel=f"{res.target.replace('_', ' ')} / others' fitted effect")
            continue
        cmap = mpl.colormaps["viridis"]
        colour = {g: cmap(0.1 + 0.75 * (k / max(1, len(groups) - 1))) for k, g in enumerate(groups)}
        vmin = min(x[v] for x in xs)
        vmax = max(x[v] for x in xs)
        grid = np.geomspace(vmin / 1.15, vmax * 1.15, 50)
        for g in groups:
            sel = [i for i, x in enumerate(xs) if tuple(x[o] for o in others) == g]
            c = colour[g]
            fx = [xs[i][v] for i in sel if not cens[i]]
            fy = [ys[i] for i in sel if not cens[i]]
            ax.scatter(fx, fy, s=16, color=c, zorder=3, linewidths=0)
            cx = [xs[i][v] for i in sel if cens[i]]
            cy = [ys[i] for i in sel if cens[i]]
            if cx:
                ax.scatter(cx, cy, s=22, marker="^", facecolors="none", edgecolors=[c], zorder=3,
                           linewidths=0.9)
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
        _finish_axis(ax, v, xs, res, paper, ylabel=res.target.replace("_", " "))
        if others and len(groups) > 1:
            handles = [Line2D([], [], color=colour[g], marker="o", ms=3.5, lw=1.0,
                              label=", ".join(f"{o}={fmt_plain(val, 'g')}" for o, val in zip(others, g)))
                       for g in groups]
            if len(handles) > 8:
                handles = handles[:: math.ceil(len(handles) / 8)]
            # beside the panel: inside, "best" still covered points (it only avoids lines)
            ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
                      handlelength=1.4, borderaxespad=0.0)
    key = [Line2D([], [], color="0.2", lw=1.2, label=f"fit {res.formula()}")]
    if paper is not None:
        pf, _, const = paper
        expo = " · ".join(f"{k}^{val:g}" for k, val in pf.exponents.items())
        at = f" at {', '.join(f'{k} = ' + fmt_plain(c, 'g') for k, c in const.items())}" if const else ""
        key.append(Line2D([], [], color="0.2", lw=1.0, ls=(0, (4, 2.5)),
                          label=f"paper {pf.figure}: {pf.C:g} · {expo}{at}"))
    if any(cens):
        key.append(Line2D([], [], color="0.2", marker="^", mfc="none", ls="",
                          label="censored: no plateau by the last step (lower bound)"))
    if partial_any and paper is not None:
        key.append(Line2D([], [], color="0.5", lw=1.0, ls=(0, (1.5, 1.5)),
                          label="paper's slope through the data's centre (partial panels)"))
    fig.legend(handles=key, loc="outside lower center", ncol=len(key), frameon=False)
    presets = ", ".join(rep.selection.presets) or "runs"
    head = title or f"{presets}: {res.formula()}"  # what was fitted, not the selection's log line
    reread = getattr(rep, "reread", None)  # plateaus re-read at another threshold (fit --threshold X)
    at = f", plateau at {'; '.join(reread.used)} (re-read)" if reread is not None else ""
    fig.suptitle(f"{head}   (R² = {fmt_r2(res.r2)}, n = {res.n}, censored = {res.n_censored}{at})", fontsize=8.5)
    return fig


def _finish_axis(ax: Any, v: str, xs: Sequence[Mapping[str, float]], res: Any, paper: Any, ylabel: str) -> None:
    """Log-log axes, readable ticks, and the fitted (and paper's) slope in a box."""
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
    # above the panel, not inside it: a box in a corner hid the points (and censored triangles) under it
    ax.set_title(txt, fontsize=7.5, loc="left")


def _partial_panel(ax: Any, v: str, others: Sequence[str], xs: Sequence[Mapping[str, float]], ys: Sequence[float],
                   cens: Sequence[bool], res: Any, paper: Any) -> None:
    """Partial-residual panel: y / prod_o x_o^beta_o against v, the fitted C v^beta_v, and the paper's slope drawn
    through the geometric centre of the fitted points (its prefactor does not apply to this adjusted axis)."""
    adj = [y / math.prod(x[o] ** res.exponents[o] for o in others) for x, y in zip(xs, ys)]
    fx = [x[v] for x, c in zip(xs, cens) if not c]
    fy = [a for a, c in zip(adj, cens) if not c]
    ax.scatter(fx, fy, s=16, color="#3b528b", zorder=3, linewidths=0)
    cx = [x[v] for x, c in zip(xs, cens) if c]
    if cx:
        ax.scatter(cx, [a for a, c in zip(adj, cens) if c], s=22, marker="^", facecolors="none",
                   edgecolors=["#3b528b"], zorder=3, linewidths=0.9)
    vals = [x[v] for x in xs]
    grid = np.geomspace(min(vals) / 1.15, max(vals) * 1.15, 50)
    ax.plot(grid, [res.C * t ** res.exponents[v] for t in grid], color="0.2", lw=1.2)
    if paper is not None and fx:
        pf, mp, _ = paper
        pv = next((k for k, fv in mp.items() if fv == v), None)
        if pv is not None:
            lx, ly = np.mean(np.log(fx)), np.mean(np.log(fy))
            ax.plot(grid, [math.exp(ly + pf.exponents[pv] * (math.log(t) - lx)) for t in grid], color="0.5",
                    lw=1.0, ls=(0, (1.5, 1.5)))


# ---------------------------------------------------------------------------------------------------------------
# Curves of runs (show --plot)
# ---------------------------------------------------------------------------------------------------------------


def _threshold(rec: Any, series: Mapping[str, tuple[Sequence[int], Sequence[float]]]) -> tuple[str, float] | None:
    """The watched metric and its absolute threshold (App. D.1): for ``fraction`` the value times the first
    evaluated value of the metric."""
    metric, mode, value = (config_get(rec.config, f"plateau.{k}") for k in ("metric", "mode", "value"))
    if not metric or value is None or metric not in series:
        return None
    if mode == "fraction":
        vals = [v for v in series[metric][1] if v is not None and math.isfinite(v)]
        if not vals:
            return None
        return metric, float(value) * vals[0]
    return metric, float(value)


def _plateau_rule(rec: Any) -> str:
    """The run's plateau rule for a figure's title ('plateau: test/loss fraction 0.2'), "" without one."""
    pc = config_get(rec.config, "plateau") or {}
    return f"plateau: {pc.get('metric')} {pc.get('mode')} {pc.get('value')}" if pc else ""


def run_key(rec: Any) -> str:
    """A run's sweep point without its seed ('d_model=24'), or its label / id."""
    swept = {k: v for k, v in (rec.swept or {}).items() if k != "seed"}
    return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in swept.items()) or rec.label or rec.run_id


@figure_writer()
def curves_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None, facet: bool | None = None,
                  groups: Sequence[str] | None = None, size: tuple[float, float] | None = None) -> Any:
    """Write loss and accuracy curves of the runs ``run_ids`` (ids or unique prefixes in ``store``) to ``path``.

    One run: a loss panel (train and test, log y), an accuracy panel when the run logs ``test/acc``, and a panel of
    the attention on the relevant tokens when logged; the plateau step a vertical dotted line, the plateau threshold
    a horizontal grey line on the watched metric. Several runs: ``_overlay_figure`` (``groups``: mean ± std over
    the runs of each group of these keys' values, the seeds of a sweep point). ``facet`` (default: when the runs are
    2-16 sweep points and no ``groups``) draws small multiples instead: one panel per sweep point with the watched
    metric of its seeds, the threshold and the plateau steps. ``size``: (width, height) in inches. Raises
    ``FigureError``."""
    import matplotlib as mpl
    import matplotlib.ticker as mticker

    recs = [store.get(r) for r in run_ids]
    data = [(rec, store.metrics(rec.run_id)) for rec in recs]
    if not any(series for _, series in data):
        raise FigureError("the run(s) logged no metrics yet")
    def order(rec: Any) -> tuple:  # sweep points in the order of their values (numbers as numbers)
        vals = [v for k, v in (rec.swept or {}).items() if k != "seed"]
        return tuple((0, float(v), "") if isinstance(v, (int, float)) else (1, 0.0, str(v)) for v in vals)

    points = list(dict.fromkeys(run_key(rec) for rec in sorted(recs, key=order)))
    if facet is None:
        facet = len(recs) > 1 and 2 <= len(points) <= 16 and not groups
    if facet or len(recs) > 1:
        fig = _facet_figure(data, points, title) if facet else _overlay_figure(
            sorted(data, key=lambda d: order(d[0])), title, groups, size)
        if size:
            fig.set_size_inches(*size)
        return fig
    rec, series = data[0]
    have = set(series)
    panels: list[tuple[str, list[str], bool]] = []
    loss = [k for k in ("train/loss", "test/loss") if k in have]
    if loss:
        panels.append(("test loss" if loss == ["test/loss"] else "loss", loss, True))
    if "test/acc" in have:
        panels.append(("test accuracy", ["test/acc"], False))
    attn = sorted(k for k in have if k.startswith("attn/L") and "/H" not in k)
    if attn:
        panels.append(("attention on the relevant tokens", attn, False))
    other = sorted(k for k in have if k.startswith("toy/"))
    if other:
        panels.append(("toy model", other, False))
    if not panels:
        panels.append(("metrics", sorted(have)[:4], False))
    fig, axes = _fig(len(panels), 3.4, 2.9)
    for ax, (name, metrics, log_y) in zip(axes, panels):
        for j, m in enumerate(metrics):
            if m not in series:
                continue
            st, vals = series[m]
            pts = [(x, v) for x, v in zip(st, vals) if v is not None and math.isfinite(v) and (v > 0 or not log_y)]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=mpl.colormaps["tab10"](j), lw=1.1,
                        label=m)
        thr = _threshold(rec, series)
        if thr and thr[0] in metrics and (thr[1] > 0 or not log_y):
            ax.axhline(thr[1], color="0.55", lw=0.7, ls="-", zorder=1)
        if rec.plateau_step is not None:
            ax.axvline(rec.plateau_step, color="0.3", lw=0.8, ls=":", zorder=1)
        if log_y:
            ax.set_yscale("log")
            fmt = mticker.FuncFormatter(lambda v, _: f"{v:g}")
            ax.yaxis.set_major_formatter(fmt)
            ax.yaxis.set_minor_formatter(mticker.FuncFormatter(lambda v, _, ax=ax: f"{v:g}" if _decades(ax) < 1
                                                               else ""))
        ax.set_xlabel("step")
        ax.set_title(name)
        ax.legend(frameon=False, loc="best")
    how = _plateau_rule(rec)
    if title is None:
        ps = "none" if rec.plateau_step is None else f"{rec.plateau_step:g}"
        title = f"{rec.preset} · {rec.label} · plateau step {ps}"
    fig.suptitle(f"{title}   ({how}; dotted: plateau step)" if how else title, fontsize=8.5)
    if size:
        fig.set_size_inches(*size)
    return fig


def _value_order(v: Any) -> tuple:
    """Numbers by value, then texts (a swept key's values in a legend)."""
    return (0, float(v), "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0.0, str(v))


def _overlay_figure(data: Sequence[tuple[Any, Mapping]], title: str | None, groups: Sequence[str] | None,
                    size: tuple[float, float] | None) -> Any:
    """Several runs in one figure a paper can use (issue 34): the test loss (and the accuracy when logged) of each
    run, or with ``groups`` the mean ± std over the runs of each group (the seeds of a sweep point, as the console's
    Runs grouping), coloured by the swept value (a colour bar when one key varies over more than 6 values, else a
    legend inside the axes, or below them when long), the plateau step as one marker per run (per group: at the
    mean plateau, its std as a bar) on its curve, and a log step axis when the plateaus span a decade or more."""
    import matplotlib as mpl
    import numpy as np
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from sparse_tui.base.plotting import mean_band

    have = set().union(*(s.keys() for _, s in data))
    metrics = [m for m in ("test/loss", "test/acc") if m in have] or [min(have)]
    recs = [rec for rec, _ in data]
    keys = list(groups or [])
    unknown = [k for k in keys if all(k not in r.params for r in recs)]
    if unknown:
        known = ", ".join(sorted({k for r in recs for k in r.params if k not in ("name", "description")}))
        raise FigureError(f"--mean-by {','.join(unknown)}: no run has this key (theirs: {known})")
    units: dict[Any, list[tuple[Any, Mapping]]] = {}
    for rec, series in data:
        units.setdefault(tuple(repr(rec.params.get(k)) for k in keys) if keys else rec.run_id, []).append((rec, series))
    varying = [k for k in dict.fromkeys(k for r in recs for k in r.params)
               if k not in ("seed", "name", "description") and len({repr(r.params.get(k)) for r in recs}) > 1]
    dims = keys or varying  # what tells the curves apart
    distinct = {k: sorted({repr(r.params.get(k)): r.params.get(k) for r in recs}.values(), key=_value_order)
                for k in dims}
    skey = min(dims, key=lambda k: len(distinct[k])) if len(dims) == 2 else None  # line style: the shorter key
    skey = skey if skey is not None and len(distinct[skey]) <= 4 else None
    ckey = dims[0] if len(dims) == 1 else next((k for k in dims if k != skey), None) if skey else None
    first = {u: members[0][0] for u, members in units.items()}
    cvals = distinct[ckey] if ckey else []
    ramp = len(cvals) > 6 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in cvals)
    if ramp:
        lo, hi = min(cvals), max(cvals)
        norm = (mpl.colors.LogNorm if lo > 0 and hi >= 10 * lo else mpl.colors.Normalize)(lo, hi)
        cmap = mpl.colormaps["viridis"]
        by_value = {repr(v): cmap(0.92 * norm(v)) for v in cvals}
    else:
        by_value = {repr(v): mpl.colormaps["tab10"](i % 10) for i, v in enumerate(cvals)}
    colour = {u: by_value[repr(first[u].params.get(ckey))] if ckey else mpl.colormaps["tab10"](i % 10)
              for i, u in enumerate(units)}
    styles = ["-", "--", ":", "-."]
    style = {u: styles[[repr(v) for v in distinct[skey]].index(repr(first[u].params.get(skey)))] if skey else "-"
             for u in units}
    short = {k: k.split(".")[-1] for k in dims}

    def label(u: Any) -> str:
        rec = first[u]
        text = ", ".join(f"{short[k]}={rec.params.get(k)}" for k in (keys or varying)) or rec.label or rec.run_id
        return f"{text} (n={len(units[u])})" if keys else text

    plateaus = [r.plateau_step for r in recs if r.plateau_step and r.plateau_step > 0]
    log_x = len(plateaus) > 1 and max(plateaus) >= 10 * min(plateaus)
    fig = Figure(figsize=size or (3.6 * len(metrics) + (0.9 if ramp else 0), 3.0), layout="constrained")
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, metric in zip(axes, metrics):
        log_y = metric.endswith("loss")
        for u, members in units.items():
            curves = [series[metric] for _, series in members if metric in series]
            if not curves:
                continue
            if keys:
                xs, ys, sd, _ = (np.asarray(a, dtype=float) for a in mean_band(curves))
            else:
                xs, ys = (np.asarray(a, dtype=float) for a in curves[0])
            ok = np.isfinite(ys) & ((xs > 0) if log_x else True) & ((ys > 0) if log_y else True)
            ax.plot(xs[ok], ys[ok], color=colour[u], ls=style[u], lw=1.2, label=None if ckey else label(u))
            if keys and len(curves) > 1:
                lo = ys - sd
                ax.fill_between(xs[ok], np.where(lo > 0, lo, np.nan)[ok] if log_y else lo[ok], (ys + sd)[ok],
                                color=colour[u], alpha=0.18, lw=0)
            ps = [r.plateau_step for r, _ in members if r.plateau_step is not None]
            fin = np.isfinite(ys)  # the marker sits on the curve, also where a log axis cannot show it (step 0)
            if ps and ok.any():
                at = [float(np.mean(ps))] if keys else ps
                ax.errorbar(at, np.interp(at, xs[fin], ys[fin]), xerr=[float(np.std(ps, ddof=1))] if keys and
                            len(ps) > 1 else None, fmt="o", ms=3.5, color=colour[u], mec="white", mew=0.5,
                            capsize=2, lw=0.8, zorder=3)
        if log_y:
            ax.set_yscale("log")
        if log_x:
            ax.set_xscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel(metric)
    extra = [Line2D([], [], color="0.3", marker="o", ls="", ms=3.5, label="plateau step" + (" (mean ± std)" if keys
                                                                                            else ""))]
    if keys:
        extra.append(Patch(color="0.3", alpha=0.25, label="± std over the group's runs"))
    if ramp:
        sm = mpl.cm.ScalarMappable(norm=norm, cmap=mpl.colors.ListedColormap(cmap(np.linspace(0, 0.92, 256))))
        fig.colorbar(sm, ax=list(axes), label=short[ckey], pad=0.02, fraction=0.05)
        styled = [Line2D([], [], color="0.3", ls=styles[i], lw=1.2, label=f"{short[skey]}={v}")
                  for i, v in enumerate(distinct[skey])] if skey else []
        axes[0].legend(handles=styled + extra, frameon=False, loc="best")
    else:
        handles = axes[0].get_legend_handles_labels()[0]
        if ckey:  # one entry per colour (a group's with its n), then per line style
            shown = {repr(first[u].params.get(ckey)): u for u in reversed(list(units))}
            handles = [Line2D([], [], color=by_value[repr(v)], lw=1.4, label=label(shown[repr(v)]) if len(dims) == 1
                              else f"{short[ckey]}={v}") for v in cvals]
        if skey:
            handles += [Line2D([], [], color="0.3", ls=styles[i], lw=1.2, label=f"{short[skey]}={v}")
                        for i, v in enumerate(distinct[skey])]
        handles += extra
        if len(handles) <= 7:
            axes[0].legend(handles=handles, frameon=False, loc="best")
        else:
            fig.legend(handles=handles, loc="outside lower center", ncol=min(4, len(handles)), frameon=False)
    presets = sorted({r.preset for r in recs})
    head = title or f"{', '.join(presets)}: {len(recs)} runs" + (
        f", mean ± std over the runs of each {', '.join(short[k] for k in keys)}" if keys else "")
    how = _plateau_rule(recs[0])
    fig.suptitle(textwrap.fill(f"{head}   ({how})" if how else head, int(13 * fig.get_figwidth())), fontsize=8.5)
    return fig


def _facet_figure(data: Sequence[tuple[Any, Mapping]], points: Sequence[str], title: str | None) -> Any:
    """Small multiples: one panel per sweep point, the watched metric of each seed, threshold and plateau steps."""
    import matplotlib as mpl
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    have = set().union(*(s.keys() for _, s in data))
    metric = next((m for m in (config_get(r.config, "plateau.metric") for r, _ in data) if m in have), None)
    metric = metric or ("test/acc" if "test/acc" in have else "test/loss")
    log_y = metric.endswith("loss")
    seeds = sorted({rec.seed for rec, _ in data if rec.seed is not None})
    ncol = min(4, len(points))
    nrow = math.ceil(len(points) / ncol)
    cmap = mpl.colormaps["tab10"]
    fig = Figure(figsize=(2.2 * ncol + 0.9, 1.75 * nrow + 0.6), layout="constrained")
    axes = fig.subplots(nrow, ncol, squeeze=False, sharex=True, sharey=True)
    for k, ax in enumerate(axes.flat):
        if k >= len(points):
            ax.set_visible(False)
            continue
        key = points[k]
        for rec, series in data:
            if run_key(rec) != key or metric not in series:
                continue
            c = cmap(seeds.index(rec.seed) % 10 if rec.seed in seeds else 0)
            st, vals = series[metric]
            pts = [(x, v) for x, v in zip(st, vals) if v is not None and math.isfinite(v) and (v > 0 or not log_y)]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=c, lw=1.1)
            if rec.plateau_step is not None:
                ax.axvline(rec.plateau_step, color=c, lw=0.8, ls=":")
            thr = _threshold(rec, series)
            if thr and thr[0] == metric:
                ax.axhline(thr[1], color="0.55", lw=0.7, zorder=1)
        if log_y:
            ax.set_yscale("log")
        # one line per swept key when the point is wider than its panel (about 28 characters at 8 pt)
        ax.set_title(key.replace(", ", "\n") if len(key) > 28 else key, fontsize=8)
        if k % ncol == 0:
            ax.set_ylabel(metric)
        if k // ncol == nrow - 1 or k + ncol >= len(points):
            ax.set_xlabel("step")
    handles = [Line2D([], [], color=cmap(i % 10), lw=1.3, label=f"seed {s}") for i, s in enumerate(seeds)]
    handles.append(Line2D([], [], color="0.3", lw=0.8, ls=":", label="plateau step"))
    fig.legend(handles=handles, loc="outside right center", frameon=False)
    how = _plateau_rule(data[0][0])
    presets = sorted({r.preset for r, _ in data})
    head = title or f"{', '.join(presets)}: {len(data)} runs"
    width = int(13 * (2.2 * ncol + 0.9))  # characters at 8.5 pt across the figure
    fig.suptitle(textwrap.fill(f"{head}   ({how})" if how else head, width), fontsize=8.5)
    return fig


# ---------------------------------------------------------------------------------------------------------------
# Figures of the reduced dynamics (sparse-tui reproduce fig1a ... fig10 --plot FILE)
# ---------------------------------------------------------------------------------------------------------------
# Each draws the 'ode' runs of the entry's preset (their logged toy/w, toy/alpha, toy/w_tilde and losses) beside
# what theory.py computes for them (the landscape of Eq. 12, w_inf(alpha), the Hessian, the linearisation). The
# flows themselves are checked against independent scipy integrations in tests/test_theory.py.


# ---------------------------------------------------------------------------------------------------------------
# Phase diagram (the console's Phase panel, p)
# ---------------------------------------------------------------------------------------------------------------


def _phase_panel(fig: Any, ax: Any, x_key: str, y_key: str, xs: Sequence[Any], ys: Sequence[Any],
                 grid: Sequence[Sequence[float]], value: str) -> None:
    """One phase diagram on ``ax``: the cells coloured and annotated (empty ones blank), the plateau step on a log
    colour scale, accuracy and emerged fraction on [0, 1]. Raises ``FigureError`` when no cell has a value."""
    from matplotlib.colors import LogNorm, Normalize

    z = np.array([[np.nan if v is None else float(v) for v in row] for row in grid], dtype=float)
    finite = z[np.isfinite(z)]
    if finite.size == 0:
        raise FigureError(f"no {value} value in any cell to plot")
    log = value == "plateau" and finite.min() > 0
    norm = LogNorm(finite.min(), max(finite.max(), finite.min() * 1.0001)) if log else (
        Normalize(0.0, 1.0) if value in ("acc", "emerged") else Normalize(finite.min(), finite.max()))
    im = ax.imshow(np.ma.masked_invalid(z), origin="lower", aspect="auto", cmap="viridis", norm=norm)
    ax.set_xticks(range(len(xs)), [fmt_plain(v, 'g') if isinstance(v, (int, float)) else str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [fmt_plain(v, 'g') if isinstance(v, (int, float)) else str(v) for v in ys])
    ax.set_xlabel(x_key)
    ax.set_ylabel(y_key)
    ax.grid(False)
    for (i, j), v in np.ndenumerate(z):
        if np.isfinite(v):
            ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=6.5,
                    color="white" if norm(v) < 0.5 else "black")
    fig.colorbar(im, ax=ax, label=value)


@figure_writer("figure")
def phase_figure(x_key: str, y_key: str, xs: Sequence[Any], ys: Sequence[Any], grid: Sequence[Sequence[float]],
                 value: str, *, title: str | None = None, note: str = "") -> Any:
    """Write a phase diagram (a value over two swept parameters; empty cells blank, each cell annotated) to
    ``path``; the plateau step on a log colour scale. Raises ``FigureError``."""
    fig, (ax,) = _fig(1, 1.2 + 0.75 * len(xs), 1.0 + 0.45 * len(ys))
    _phase_panel(fig, ax, x_key, y_key, xs, ys, grid, value)
    head = title or f"{value}: {y_key} × {x_key}"
    fig.suptitle(f"{head}   ({note})" if note else head, fontsize=8.5)
    return fig


@figure_writer()
def scatter_figure(data: Any, *, title: str | None = None, size: tuple[float, float] | None = None) -> Any:
    """The console's Scatter panel as a figure (issue 34, TensorBoard HParams' scatter): one point per run, its
    plateau step or a final metric (``data.y``) against a hyperparameter (``data.x``), on the panel's axes (log
    where it shows log); the runs left out are counted in the title."""
    from matplotlib.figure import Figure

    if not data.points:
        raise FigureError("no run has both values")
    fig = Figure(figsize=size or (3.6, 3.0), layout="constrained")
    ax = fig.subplots()
    ax.scatter([p[0] for p in data.points], [p[1] for p in data.points], s=14, color="tab:blue", alpha=0.8,
               edgecolor="white", linewidth=0.4)
    if data.log_x:
        ax.set_xscale("log")
    if data.log_y:
        ax.set_yscale("log")
    ax.set_xlabel(data.x)
    ax.set_ylabel(data.y)
    left = [f"{data.censored} never left the plateau" if data.censored else "",
            f"{data.missing} without the value" if data.missing else ""]
    head = title or f"{data.y} against {data.x.split('.')[-1]}: {len(data.points)} runs"
    fig.suptitle(textwrap.fill("; ".join([head, *filter(None, left)]), int(13 * fig.get_figwidth())), fontsize=8.5)
    return fig
