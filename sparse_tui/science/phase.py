"""Phase-diagram grids: a value (plateau step, final accuracy / loss, emerged fraction) averaged over seeds for
runs that differ in two parameters (the phase diagrams the blog "Sparse attention 6 – In-context associative recall"
suggests: N × lr, N × data size). One owner for the console's Phase panel, ``reports.entries.blog6_phase.phase_entry_figure`` and
``sparse-tui reproduce``'s phase report; no Textual here."""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from sparse_tui.store import RunRecord


def final_metric(rec: RunRecord, last: dict | None, names: Sequence[str]) -> float | None:
    """A run's final value of the first of ``names`` it has (its summary's, else its last logged values)."""
    src = rec.final or last or {}
    for n in names:
        if n in src and src[n] is not None:
            return src[n]
    return None


def _sortable(v: Any) -> tuple:
    return (0, float(v), "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0.0, str(v))


PHASE_VALUES = {
    "plateau": "plateau step (runs that never left the plateau are left out)",
    "acc": "final test accuracy",
    "loss": "final test loss",
    "emerged": "fraction of the runs whose plateau ended",
}


def cell_note(counts: list[list[int]]) -> str:
    """How a cell's value comes about: one run per cell, or the mean over the runs of a cell (say how many)."""
    ns = sorted({n for row in counts for n in row if n})
    if not ns or ns == [1]:
        return "one run per cell"
    return f"mean over the {ns[0]} runs of a cell" if len(ns) == 1 else f"mean over the {ns[0]}-{ns[-1]} runs of a cell"


def phase_grid(records: Iterable[RunRecord], x_key: str, y_key: str, value: str = "plateau",
               last: dict[str, dict] | None = None) -> tuple[list[Any], list[Any], list[list[float]], list[list[int]]]:
    """Grid of a value over two params: (xs, ys, values[y][x], counts[y][x]). A run still queued or running counts
    with what it has so far (its plateau step, its latest accuracy or loss), except for "emerged", which it has not
    decided yet."""
    cells: dict[tuple[Any, Any], list[float]] = {}
    xs: set = set()
    ys: set = set()
    for r in records:
        if x_key not in r.params or y_key not in r.params:
            continue
        x, y = r.params[x_key], r.params[y_key]
        xs.add(x)
        ys.add(y)
        if value == "plateau":
            v = r.plateau_step if r.plateau_step is not None else math.nan
        elif value == "emerged":
            if r.status == "running" or r.status == "queued":
                continue
            v = 1.0 if r.plateau_step is not None else 0.0
        else:
            names = ("test/acc",) if value == "acc" else ("test/loss", "train/loss")
            v = final_metric(r, (last or {}).get(r.run_id), names)
            v = math.nan if v is None else v
        cells.setdefault((x, y), []).append(v)
    xs_l = sorted(xs, key=_sortable)
    ys_l = sorted(ys, key=_sortable)
    grid, counts = [], []
    for y in ys_l:
        row, crow = [], []
        for x in xs_l:
            vals = [v for v in cells.get((x, y), []) if math.isfinite(v)]
            row.append(sum(vals) / len(vals) if vals else math.nan)
            crow.append(len(cells.get((x, y), [])))
        grid.append(row)
        counts.append(crow)
    return xs_l, ys_l, grid, counts


def sweep_axes(records: Iterable[RunRecord]) -> tuple[str, str]:
    """The two parameters a set of runs sweeps (the seed aside), in the order the preset's ``[sweep]`` lists them
    (x first, y second); ``ValueError`` unless there are exactly two."""
    keys: list[str] = []
    for r in records:
        keys += [k for k in r.swept if k != "seed" and k not in keys]
    if len(keys) != 2:
        raise ValueError(f"a phase diagram needs runs that sweep two parameters, these sweep {keys or 'none'}")
    return keys[0], keys[1]
