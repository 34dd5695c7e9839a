"""Blog 6's suggested phase diagram: N × lr, where recall emerges."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from sparse_tui.atlas import Entry
from sparse_tui.reports.base import Claim, FigureError, Report, _fig, _num, figure_writer, make_report
from sparse_tui.reports.panels import _phase_panel
from sparse_tui.science.phase import cell_note, phase_grid, sweep_axes


@dataclass
class PhaseData:
    x: str  # the swept parameters (phase.sweep_axes)
    y: str
    cells: list[dict[str, Any]]  # per cell: its x and y values, plateau, final accuracy, runs


def phase_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Blog 6's suggested phase diagram: over the two swept parameters (``phase.sweep_axes``, e.g. N × lr) the
    plateau step (first evaluation at the preset's threshold; — never) and the final test accuracy, each cell the
    mean over its seeds (``phase.phase_grid``, as the console's Phase panel and ``phase_entry_figure``)."""
    recs = [store.get(r) for r in run_ids]
    x, y = sweep_axes(recs)
    xs, ys, plateau, counts = phase_grid(recs, x, y, "plateau")
    acc = phase_grid(recs, x, y, "acc")[2]
    lines = [f"  blog: 'it would be interesting to draw phase diagrams'; rows {y}, columns {x}; {cell_note(counts)}",
             "  plateau step (— never) / final test accuracy",
             "  " + f"{y:>14}" + "".join(f"{format(v, 'g'):>16}" for v in xs)]
    for j, yv in enumerate(ys):
        lines.append("  " + f"{format(yv, 'g'):>14}" + "".join(
            f"{_num(None if math.isnan(p) else p, '6.0f')} / {_num(None if math.isnan(a) else a, '5.3f')}".rjust(16)
            for p, a in zip(plateau[j], acc[j])))
    cells = [{x: xv, y: yv, "plateau": None if math.isnan(plateau[j][i]) else plateau[j][i],
              "acc": None if math.isnan(acc[j][i]) else acc[j][i], "n": counts[j][i]}
             for j, yv in enumerate(ys) for i, xv in enumerate(xs)]
    return make_report(entry, run_ids, lines, PhaseData(x, y, cells))


@figure_writer()
def phase_entry_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None) -> Any:
    """The phase diagram the blog "Sparse attention 6 – In-context associative recall" suggests, of runs that sweep
    two parameters (``phase.sweep_axes``: e.g. N × lr): the plateau step (log colours; blank: never emerged) beside
    the final test accuracy, each cell the mean over its seeds (``phase.phase_grid``, the console's Phase panel's)."""
    recs = [store.get(r) for r in run_ids]
    x_key, y_key = sweep_axes(recs)
    xs, ys, _, counts = phase_grid(recs, x_key, y_key, "acc")
    fig, axes = _fig(2, 1.6 + 0.6 * len(xs), 1.4 + 0.45 * len(ys))
    for ax, value in zip(axes, ("plateau", "acc")):
        xs, ys, grid, _ = phase_grid(recs, x_key, y_key, value)
        try:
            _phase_panel(fig, ax, x_key, y_key, xs, ys, grid, value)
        except FigureError:  # no run emerged: the panel says so
            ax.text(0.5, 0.5, f"no {value} value", ha="center", va="center", transform=ax.transAxes)
        ax.set_title({"plateau": "plateau step (blank: never emerged)", "acc": "final test accuracy"}[value])
    head = title or f"phase diagram: {y_key} × {x_key}"
    fig.suptitle(f"{head}   ({cell_note(counts)})")
    return fig


def _check_phase(store, rep):
    """Blog 6 only suggests drawing the N × lr plane: no claim to hold, the cells are described (issue 42: "recall
    emerges in part of the plane" held almost by construction)."""
    cells = rep.data.cells
    on = [c for c in cells if c["acc"] is not None and c["acc"] >= 0.5]
    return "no claim", (f"{len(on)} of {len(cells)} cells end at test accuracy ≥ 0.5 (a description: the blog "
                        "claims nothing here)")


CLAIM = Claim("none: the blog suggests drawing the N × lr plane", _check_phase, phase_report, phase_entry_figure)
