"""A run's final token embedding as a labelled text scatter, shown under its attention map (the view of the blog
"Sparse attention 3 – inefficiency of extracting similar content": numerically close tokens sit close). The plane
and the order numbers come from ``sparse_tui.science.geometry``, as in ``reports.entries.blog3_geometry.geometry_figure``."""

from __future__ import annotations

import numpy as np
from rich.text import Text

from sparse_tui.base.plotting import ramp
from sparse_tui.science.geometry import order, plane


def render_geometry(E: np.ndarray, width: int = 76, height: int = 14) -> Text:
    """[V, D] -> a title line, then a ``height`` x ``width`` grid where token v's value is written at its place in the
    plane (coloured from dark to bright by value; a label that would cover another is drawn as a dot)."""
    pl, o = plane(E), order(E)
    V, D = E.shape
    width, height = max(20, width), max(4, height)
    axes = f"{pl.axes[0]}/{pl.axes[1]} ({pl.explained:.0%} of the variance)" if pl.axes[0] == "PC1" else "itself"
    out = Text(f"final token embedding, n_embd {D}, drawn {axes}: rho {o['rho']:.2f} (embedding distance vs value "
               f"distance), {o['neighbours']:.0%} of tokens nearest a numerical neighbour\n", style="bold")
    grid: list[list[tuple[str, str | None]]] = [[(" ", None)] * width for _ in range(height)]
    lo, hi = pl.xy.min(axis=0), pl.xy.max(axis=0)
    span = np.where(hi - lo > 0, hi - lo, 1.0)
    for v in range(V):
        label = str(v)
        col = int(round((pl.xy[v, 0] - lo[0]) / span[0] * (width - len(label))))
        row = height - 1 - int(round((pl.xy[v, 1] - lo[1]) / span[1] * (height - 1)))
        style = "#%02x%02x%02x" % ramp(v / max(1, V - 1))
        cells = range(col, col + len(label))
        if all(grid[row][c][0] == " " for c in cells):
            for c, ch in zip(cells, label):
                grid[row][c] = (ch, style)
        elif grid[row][col][0] == " ":
            grid[row][col] = ("·", style)
    for r, line in enumerate(grid):
        for ch, style in line:
            out.append(ch, style=style)
        if r < height - 1:
            out.append("\n")
    return out
