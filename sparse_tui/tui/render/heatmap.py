"""Colour heatmaps in Rich ``Text``: a perceptual (viridis-like) ramp, a scale bar, and a labelled grid of cells
(the attention map and the phase diagram draw with it)."""

from __future__ import annotations

import math
from typing import Callable, Sequence

from rich.style import Style
from rich.text import Text

from sparse_tui.base.numbers import fmt_fit, fmt_num
from sparse_tui.base.plotting import ramp
from sparse_tui.tui.render.names import cut_end


def _bg(rgb: tuple[int, int, int]) -> Style:
    lum = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]
    return Style(bgcolor=f"rgb({rgb[0]},{rgb[1]},{rgb[2]})", color="black" if lum > 140 else "white")


def scale_bar(vmin: float, vmax: float, width: int = 20, label: str = "", log: bool = False) -> Text:
    t = Text()
    if label:
        t.append(label + " ")
    t.append(fmt_num(vmin) + " ")
    for i in range(width):
        t.append(" ", style=_bg(ramp(i / max(1, width - 1))))
    t.append(" " + fmt_num(vmax))
    if log:
        t.append(" (log)")
    return t


def heatmap(matrix: Sequence[Sequence[float]], row_labels: Sequence[str], col_labels: Sequence[str], *,
            vmin: float | None = None, vmax: float | None = None, cell: int = 2,
            marks: dict[tuple[int, int], str] | None = None, values: bool = False, log: bool = False,
            ruler: int = 0) -> Text:
    """A colour heatmap as Rich text: one coloured cell per entry, row labels left, column labels on top.

    ``marks`` puts a character into given cells (e.g. the copy/selection targets); ``values`` prints the numbers."""
    flat = [v for row in matrix for v in row if v is not None and math.isfinite(v) and (not log or v > 0)]
    tr: Callable[[float], float] = (lambda v: math.log10(v)) if log else (lambda v: v)
    lo = tr(vmin) if vmin is not None else (tr(min(flat)) if flat else 0.0)
    hi = tr(vmax) if vmax is not None else (tr(max(flat)) if flat else 1.0)
    span = hi - lo if hi > lo else 1.0
    lw = max((len(s) for s in row_labels), default=0)
    out = Text(no_wrap=True, overflow="crop")
    # column header: labels truncated to the cell width, or (``ruler`` = k, cells too narrow for labels) the column
    # index at every k-th column
    out.append(" " * (lw + 1))
    if ruler:
        line = [" "] * (len(col_labels) * cell)
        for j in range(0, len(col_labels), ruler):
            lab = str(j)
            if j * cell + len(lab) <= len(line):
                line[j * cell:j * cell + len(lab)] = lab
        out.append("".join(line), style="dim")
    else:
        for lab in col_labels:
            out.append(cut_end(str(lab), cell).rjust(cell), style="dim")  # fitted by the caller: never cut
    out.append("\n")
    marks = marks or {}
    for i, row in enumerate(matrix):
        out.append(str(row_labels[i]).rjust(lw) + " ", style="dim")
        for j, v in enumerate(row):
            ok = v is not None and math.isfinite(v) and (not log or v > 0)
            rgb = ramp((tr(v) - lo) / span) if ok else (40, 40, 40)
            if values and ok:
                txt = fmt_fit(v, cell, ".3g").rjust(cell)  # 1234 in 4 columns: 1234, never "1.23"
            else:
                txt = marks.get((i, j), "").center(cell)[:cell] if (i, j) in marks else " " * cell
                if not ok and (i, j) not in marks:
                    txt = "·".center(cell)
            out.append(txt, style=_bg(rgb))
        out.append("\n")
    return out
