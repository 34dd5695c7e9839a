"""The figures of the console's panels (written with ``p`` / ``P``): the Phase panel's diagram (``phase_figure``,
whose panel ``reports.entries.blog6_phase`` draws too) and the Scatter panel's plot (``scatter_figure``).
matplotlib imported inside the functions, never at module import."""

from __future__ import annotations

import textwrap
from typing import Any, Sequence

import numpy as np

from sparse_tui.base.numbers import fmt_plain
from sparse_tui.reports.base import FigureError, _fig, figure_writer


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
    for set_ticks, vs in ((ax.set_xticks, xs), (ax.set_yticks, ys)):
        set_ticks(range(len(vs)), [fmt_plain(v, 'g') if isinstance(v, (int, float)) else str(v) for v in vs])
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
    fig.suptitle(f"{head}   ({note})" if note else head)
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
    fig.suptitle(textwrap.fill("; ".join([head, *filter(None, left)]), int(13 * fig.get_figwidth())))
    return fig
