"""The curves of runs as a publication-style figure (``sparse-tui show RUN --plot FILE``, the console's Curves
panel; reports/figures.py: the fit figure; matplotlib imported inside the functions, never at module import).

* ``curves_figure``: loss and accuracy curves of one or more runs against the step, with each run's plateau (App.
  D.1: the first evaluated step at which the watched metric crosses its threshold) marked by a vertical line and the
  threshold by a horizontal one on the watched metric's panel."""

from __future__ import annotations

import math
import textwrap
from typing import Any, Mapping, Sequence

from sparse_tui.reports.base import FigureError, _fig, figure_writer
from sparse_tui.reports.figures import _decades

__all__ = ["curves_figure"]


def _threshold(rec: Any, series: Mapping[str, tuple[Sequence[int], Sequence[float]]]) -> tuple[str, float] | None:
    """The watched metric and its absolute threshold (App. D.1): for ``fraction`` the value times the first
    evaluated value of the metric."""
    pc = _plateau(rec)
    if pc is None or pc.metric not in series:
        return None
    if pc.mode != "fraction":
        return pc.metric, float(pc.value)
    vals = [v for v in series[pc.metric][1] if v is not None and math.isfinite(v)]
    return (pc.metric, float(pc.value) * vals[0]) if vals else None


def _plateau(rec: Any) -> Any:
    """The run's ``[plateau]`` (typed), None when its stored config no longer validates."""
    return rec.run_config.plateau if rec.run_config is not None else None


def _plateau_rule(rec: Any) -> str:
    """The run's plateau rule for a figure's title ('plateau: test/loss fraction 0.2'), "" without one."""
    pc = _plateau(rec)
    return f"plateau: {pc.metric} {pc.mode} {pc.value}" if pc is not None else ""


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
    recs = [store.get(r) for r in run_ids]
    data = [(rec, store.metrics(rec.run_id)) for rec in recs]
    if not any(series for _, series in data):
        raise FigureError("the run(s) logged no metrics yet")
    def order(rec: Any) -> tuple:  # sweep points in the order of their values (numbers as numbers)
        return tuple(_value_order(v) for k, v in (rec.swept or {}).items() if k != "seed")

    points = list(dict.fromkeys(run_key(rec) for rec in sorted(recs, key=order)))
    if facet is None:
        facet = len(recs) > 1 and 2 <= len(points) <= 16 and not groups
    if facet or len(recs) > 1:
        fig = _facet_figure(data, points, title) if facet else _overlay_figure(
            sorted(data, key=lambda d: order(d[0])), title, groups, size)
    else:
        fig = _run_figure(*data[0], title)
    if size:
        fig.set_size_inches(*size)
    return fig


def _finite(curve: tuple[Sequence[int], Sequence[float]], log_y: bool) -> tuple[list, list]:
    """A logged curve's steps and values where the value is finite (and > 0 on a log axis)."""
    pts = [(x, v) for x, v in zip(*curve) if v is not None and math.isfinite(v) and (v > 0 or not log_y)]
    return [p[0] for p in pts], [p[1] for p in pts]


def _run_figure(rec: Any, series: Mapping[str, Any], title: str | None) -> Any:
    """One run: ``curves_figure``'s panels of loss, accuracy, attention and toy-model metrics."""
    import matplotlib as mpl
    import matplotlib.ticker as mticker

    have = set(series)
    loss = [k for k in ("train/loss", "test/loss") if k in have]
    panels = [(name, metrics, log_y) for name, metrics, log_y in (
        ("test loss" if loss == ["test/loss"] else "loss", loss, True),
        ("test accuracy", [k for k in ("test/acc",) if k in have], False),
        ("attention on the relevant tokens", sorted(k for k in have if k.startswith("attn/L") and "/H" not in k),
         False),
        ("toy model", sorted(k for k in have if k.startswith("toy/")), False)) if metrics]
    panels = panels or [("metrics", sorted(have)[:4], False)]
    fig, axes = _fig(len(panels), 3.4, 2.9)
    for ax, (name, metrics, log_y) in zip(axes, panels):
        for j, m in enumerate(metrics):
            xs, ys = _finite(series[m], log_y)
            if xs:
                ax.plot(xs, ys, color=mpl.colormaps["tab10"](j), lw=1.1, label=m)
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
        ax.legend(loc="best")
    how = _plateau_rule(rec)
    if title is None:
        ps = "none" if rec.plateau_step is None else f"{rec.plateau_step:g}"
        title = f"{rec.preset} · {rec.label} · plateau step {ps}"
    fig.suptitle(f"{title}   ({how}; dotted: plateau step)" if how else title)
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

    have = set().union(*(s.keys() for _, s in data))
    metrics = [m for m in ("test/loss", "test/acc") if m in have] or [min(have)]
    recs = [rec for rec, _ in data]
    keys = list(groups or [])
    units, varying = _overlay_units(data, keys)
    dims = keys or varying  # what tells the curves apart
    distinct = {k: sorted({repr(r.params.get(k)): r.params.get(k) for r in recs}.values(), key=_value_order)
                for k in dims}
    skey = min(dims, key=lambda k: len(distinct[k])) if len(dims) == 2 else None  # line style: the shorter key
    skey = skey if skey is not None and len(distinct[skey]) <= 4 else None
    ckey = dims[0] if len(dims) == 1 else next((k for k in dims if k != skey), None) if skey else None
    first = {u: members[0][0] for u, members in units.items()}
    cvals = distinct[ckey] if ckey else []
    ramp, norm, cmap, by_value = _value_colours(cvals)
    colour = {u: by_value[repr(first[u].params.get(ckey))] if ckey else mpl.colormaps["tab10"](i % 10)
              for i, u in enumerate(units)}
    styles = ["-", "--", ":", "-."]
    style = {u: styles[[repr(v) for v in distinct[skey]].index(repr(first[u].params.get(skey)))] if skey else "-"
             for u in units}
    short = {k: k.split(".")[-1] for k in dims}

    def label(u: Any) -> str:
        rec = first[u]
        text = ", ".join(f"{short[k]}={rec.params.get(k)}" for k in dims) or rec.label or rec.run_id
        censored = sum(1 for r, _ in units[u] if r.plateau_step is None)  # counted in n, and said
        return f"{text} (n={len(units[u])}" + (f", {censored} censored" if censored else "") + ")" if keys else text

    plateaus = [r.plateau_step for r in recs if r.plateau_step and r.plateau_step > 0]
    log_x = len(plateaus) > 1 and max(plateaus) >= 10 * min(plateaus)
    fig = Figure(figsize=size or (3.6 * len(metrics) + (0.9 if ramp else 0), 3.0), layout="constrained")
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, metric in zip(axes, metrics):
        log_y = metric.endswith("loss")
        for u, members in units.items():
            _overlay_unit(ax, metric, members, bool(keys), log_x, colour[u], style[u], None if ckey else label(u))
        if log_y:
            ax.set_yscale("log")
        if log_x:
            ax.set_xscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel(metric)
    extra = _marker_handles(bool(keys), recs)
    styled = [Line2D([], [], color="0.3", ls=styles[i], lw=1.2, label=f"{short[skey]}={v}")
              for i, v in enumerate(distinct[skey])] if skey else []
    if ramp:
        sm = mpl.cm.ScalarMappable(norm=norm, cmap=mpl.colors.ListedColormap(cmap(np.linspace(0, 0.92, 256))))
        fig.colorbar(sm, ax=list(axes), label=short[ckey], pad=0.02, fraction=0.05)
        axes[0].legend(handles=styled + extra, loc="best")
    else:
        handles = axes[0].get_legend_handles_labels()[0]
        if ckey:  # one entry per colour (a group's with its n), then per line style
            shown = {repr(first[u].params.get(ckey)): u for u in reversed(list(units))}
            handles = [Line2D([], [], color=by_value[repr(v)], lw=1.4, label=label(shown[repr(v)]) if len(dims) == 1
                              else f"{short[ckey]}={v}") for v in cvals]
        handles += styled + extra
        if len(handles) <= 7:
            axes[0].legend(handles=handles, loc="best")
        else:
            fig.legend(handles=handles, loc="outside lower center", ncol=min(4, len(handles)))
    mean = f", mean ± std over the runs of each {', '.join(short[k] for k in keys)}" if keys else ""
    return _titled(fig, title or f"{', '.join(sorted({r.preset for r in recs}))}: {len(recs)} runs" + mean, recs[0])


def _marker_handles(grouped: bool, recs: Sequence[Any]) -> list:
    """The overlay legend's entries for what is not a run: the plateau marker (a group's mean ± std), the band of
    a group, the censored runs' marker."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    extra = [Line2D([], [], color="0.3", marker="o", ls="", ms=3.5, label="plateau step" + (" (mean ± std)" if grouped
                                                                                            else ""))]
    if grouped:
        extra.append(Patch(color="0.3", alpha=0.25, label="± std over the group's runs (a loss: ×/÷ geometric std)"))
    if any(r.plateau_step is None for r in recs):
        extra.append(Line2D([], [], color="0.3", marker=">", ls="", ms=4, label="no plateau by the end (censored)"))
    return extra


def _titled(fig: Any, head: str, rec: Any) -> Any:
    """``fig`` with ``head`` and the run's plateau rule as its title, wrapped to the figure's width."""
    how = _plateau_rule(rec)
    fig.suptitle(textwrap.fill(f"{head}   ({how})" if how else head, int(13 * fig.get_figwidth())))
    return fig


def _overlay_units(data: Sequence[tuple[Any, Mapping]], keys: Sequence[str]) -> tuple[dict, list[str]]:
    """``_overlay_figure``'s curves: the runs by their values of ``keys`` (each run alone without keys), and the
    params that vary between the runs. ``FigureError`` for a key no run has."""
    recs = [rec for rec, _ in data]
    unknown = [k for k in keys if all(k not in r.params for r in recs)]
    if unknown:
        known = ", ".join(sorted({k for r in recs for k in r.params if k not in ("name", "description")}))
        raise FigureError(f"--mean-by {','.join(unknown)}: no run has this key (theirs: {known})")
    units: dict[Any, list[tuple[Any, Mapping]]] = {}
    for rec, series in data:
        units.setdefault(tuple(repr(rec.params.get(k)) for k in keys) if keys else rec.run_id, []).append((rec, series))
    varying = [k for k in dict.fromkeys(k for r in recs for k in r.params)
               if k not in ("seed", "name", "description") and len({repr(r.params.get(k)) for r in recs}) > 1]
    return units, varying


def _value_colours(cvals: Sequence[Any]) -> tuple[bool, Any, Any, dict[str, Any]]:
    """A colour per value: a ramp (viridis, log when the numbers span a decade) over more than 6 numbers, else
    tab10. Returns (ramp, its norm, its colormap, {repr(value): colour})."""
    import matplotlib as mpl

    ramp = len(cvals) > 6 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in cvals)
    if not ramp:
        return False, None, None, {repr(v): mpl.colormaps["tab10"](i % 10) for i, v in enumerate(cvals)}
    lo, hi = min(cvals), max(cvals)
    norm = (mpl.colors.LogNorm if lo > 0 and hi >= 10 * lo else mpl.colors.Normalize)(lo, hi)
    cmap = mpl.colormaps["viridis"]
    return True, norm, cmap, {repr(v): cmap(0.92 * norm(v)) for v in cvals}


def _overlay_unit(ax: Any, metric: str, members: Sequence[tuple[Any, Mapping]], mean: bool, log_x: bool,
                  colour: Any, style: str, label: str | None) -> None:
    """One curve of ``_overlay_figure`` on ``ax``: a run's ``metric`` (``mean``: the mean ± std band over the
    group's runs) and its plateau marker on the curve (a group's at the mean plateau, its std as a bar)."""
    import numpy as np

    from sparse_tui.base.plotting import band

    log_y = metric.endswith("loss")
    curves = [series[metric] for _, series in members if metric in series]
    if not curves:
        return
    if mean:  # the band inside the data's range: a loss in log space, an accuracy in [0, 1]
        xs, ys, lo, hi, _ = (np.asarray(a, dtype=float) for a in band(curves, metric))
    else:
        xs, ys = (np.asarray(a, dtype=float) for a in curves[0])
    ok = np.isfinite(ys) & ((xs > 0) if log_x else True) & ((ys > 0) if log_y else True)
    ax.plot(xs[ok], ys[ok], color=colour, ls=style, lw=1.2, label=label)
    if mean and len(curves) > 1:
        ax.fill_between(xs[ok], lo[ok], hi[ok], color=colour, alpha=0.18, lw=0)
    ps = [r.plateau_step for r, _ in members if r.plateau_step is not None]
    fin = np.isfinite(ys)  # the marker sits on the curve, also where a log axis cannot show it (step 0)
    if ps and ok.any():
        at = [float(np.mean(ps))] if mean else ps
        ax.errorbar(at, np.interp(at, xs[fin], ys[fin]), xerr=[float(np.std(ps, ddof=1))] if mean and
                    len(ps) > 1 else None, fmt="o", ms=3.5, color=colour, mec="white", mew=0.5,
                    capsize=2, lw=0.8, zorder=3)
    if ok.any() and any(r.plateau_step is None for r, _ in members):  # censored: a ▷ at the curve's end
        ax.plot([xs[ok][-1]], [ys[ok][-1]], ">", ms=4, color=colour, mec="0.2", mew=0.5, zorder=3)


def _facet_figure(data: Sequence[tuple[Any, Mapping]], points: Sequence[str], title: str | None) -> Any:
    """Small multiples: one panel per sweep point, the watched metric of each seed, threshold and plateau steps."""
    import matplotlib as mpl
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    have = set().union(*(s.keys() for _, s in data))
    metric = next((m for m in (pc.metric for pc in (_plateau(r) for r, _ in data) if pc) if m in have), None)
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
            ax.plot(*_finite(series[metric], log_y), color=c, lw=1.1)
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
    fig.legend(handles=handles, loc="outside right center")
    presets = sorted({r.preset for r, _ in data})
    return _titled(fig, title or f"{', '.join(presets)}: {len(data)} runs", data[0][0])
