"""Phase-diagram grids: a value (plateau step, final accuracy / loss, emerged fraction) averaged over seeds for
runs that differ in two parameters (the phase diagrams the blog "Sparse attention 6 – In-context associative recall"
suggests: N × lr, N × data size). One owner for the console's Phase panel,
``reports.entries.blog6_phase.phase_entry_figure`` and
``sparse-tui reproduce``'s phase report; no Textual here."""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

RunRecord = Any  # a store.RunRecord (anything with its fields): read, not imported (science sits below the store)


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


# Keys that say how a run was carried out or logged, not what was trained: runs that differ only in these still
# pool (their results agree), and Fit never proposes them as variables.
BOOKKEEPING = frozenset({
    "train.device", "train.checkpoint_every", "train.cuda_graph", "train.flush_denormal", "eval.snapshot_every",
    "eval.snapshot_examples", "eval.every", "eval.train_every", "plateau.stop_after",
})


# How long a run trains and how it is evaluated: never a power-law variable (a longer run only censors fewer), and
# never pooled over by choice (a grouping by one swept key still splits runs of other lengths).
LENGTH = ("train.steps", "train.warmup_steps", "eval.", "plateau.")


def is_length(key: str) -> bool:
    return key.startswith(LENGTH)


def _value(v: Any) -> Any:
    """One value for 1 and 1.0 (a config read back from JSON may hold either)."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else (
        repr(v) if isinstance(v, (list, dict)) else v)


def differing_keys(records: Sequence[RunRecord], leave: Iterable[str] = ()) -> list[str]:
    """The config keys (seed, ``leave`` and ``BOOKKEEPING`` aside) in which these runs do not all agree, in sorted
    order: what keeps them from being pooled as seeds of one experiment."""
    skip = {"seed", "name", "description", *leave, *BOOKKEEPING}
    keys = sorted({k for r in records for k in r.params if k not in skip})
    return [k for k in keys if len({_value(r.params.get(k)) for r in records}) > 1]


def like_slices(records: Sequence[RunRecord], leave: Iterable[str] = ()) -> tuple[list[str], list[tuple[dict, list]]]:
    """The runs split into sets that agree in every key but the seed and ``leave`` (a phase diagram's two axes, a
    grouping's keys): (the keys that split them, [(their values in a set, its runs)]), the largest set first."""
    keys = differing_keys(records, leave)
    by: dict[tuple, list[RunRecord]] = {}
    for r in records:
        by.setdefault(tuple(_value(r.params.get(k)) for k in keys), []).append(r)
    slices = [({k: recs[0].params.get(k) for k in keys}, recs) for recs in by.values()]
    slices.sort(key=lambda s: -len(s[1]))
    return keys, slices


def slice_text(values: dict) -> str:
    """``steps=200 lr=0.001`` (the short keys)."""
    return " ".join(f"{k.split('.')[-1]}={v}" for k, v in values.items())


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


def phase_slice(records: Sequence[RunRecord], x_key: str, y_key: str, index: int = 0,
                current: str | None = None) -> tuple[list[RunRecord], str]:
    """The runs a phase diagram of ``x_key`` × ``y_key`` pools: one set of runs that agree in every other key but
    the seed (``like_slices``): the ``index``-th, counted from the one holding the ``current`` run (else the
    largest); and a line saying which keys split the runs and which set is shown ("" when none do)."""
    keys, slices = like_slices(records, (x_key, y_key))
    if len(slices) <= 1:
        return list(records), ""
    start = next((i for i, (_, recs) in enumerate(slices) if any(r.run_id == current for r in recs)), 0)
    values, recs = slices[(start + index) % len(slices)]
    others = [f"{slice_text(v)} ({len(r)})" for v, r in slices if v != values]
    return recs, (f"these runs also differ in {', '.join(k.split('.')[-1] for k in keys)}: showing "
                  f"{slice_text(values)} ({len(recs)} run(s)); s: next of {len(slices)} ({'; '.join(others[:3])}"
                  + (" …" if len(others) > 3 else "") + ")")
