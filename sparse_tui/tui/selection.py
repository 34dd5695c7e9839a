"""Which runs the Fit panel (and, without marks, the Phase panel) means: the marked runs, else the runs of the current
run's preset, or the runs matching its filter words (the run table's filter). Pure functions of the app's UI state
(records, marked, current)."""

from __future__ import annotations

from typing import Any

from sparse_tui.science.fitting import short_name
from sparse_tui.science.phase import BOOKKEEPING, is_length
from sparse_tui.science.theory import forecast_exponents
from sparse_tui.store import RunRecord
from sparse_tui.tui.render.filters import matches
from sparse_tui.tui.render.fit import FitRequest, parse_fit_options
from sparse_tui.tui.render.runs import swept_keys, table_row


def chosen_runs(records: list[RunRecord], marked: list[str], current: str | None, query: str) -> list[RunRecord]:
    if not query and marked:
        ids = set(marked)
        return [r for r in records if r.run_id in ids]
    if not query:  # the runs of the current run's preset
        cur = next((r for r in records if r.run_id == current), None)
        if cur is None:
            return list(records)
        return [r for r in records if r.preset == cur.preset]
    return [r for r in records if matches(table_row(r, None, 0.0), query)]


def fit_selection_key(records: list[RunRecord], marked: list[str], current: str | None) -> tuple:
    """What the Fit panel's default runs are (marked runs, else the current run's preset): guessed variables are
    guessed again when this changes (a fit of the previous preset's variables fails: 'unknown variable')."""
    if marked:
        return ("marked", tuple(marked))
    cur = next((r for r in records if r.run_id == current), None)
    return ("preset", cur.preset if cur is not None else None)


def guess_fit_variables(records: list[RunRecord], marked: list[str], current: str | None,
                        query: str) -> tuple[list[str], str]:
    """The swept numeric parameters of the chosen runs worth a power law, by their short names (``d``, ``T``) where
    those are unique; those with a theory exponent (``theory.forecast_exponents``; recall's ``n_tokens`` and
    ``n_pairs`` by analogy) when there are any; and a line saying what was chosen and what was left out, why."""
    recs = chosen_runs(records, marked, current, query)
    keys = [k for k in swept_keys(recs)
            if all(isinstance(r.params.get(k), (int, float)) and not isinstance(r.params.get(k), bool)
                   for r in recs if k in r.params)]
    length = [k for k in keys if k in BOOKKEEPING or is_length(k)]
    keys = [k for k in keys if k not in length]
    theory = set(forecast_exponents()) | {"n_tokens", "n_pairs", "batch_size"}
    with_theory = [k for k in keys if short_name(k) in theory]
    others = [k for k in keys if k not in with_theory] if with_theory else []
    keys = with_theory or keys
    shorts = [short_name(k) for k in keys]
    chosen = [s if shorts.count(s) == 1 else k for s, k in zip(shorts, keys)]
    if not chosen:
        return [], ""
    why = "with a theory exponent" if with_theory else "no swept key has a theory exponent"
    left = [f"{', '.join(short_name(k) for k in length)} (training length, evaluation, bookkeeping)"] if length else []
    left += [f"{', '.join(short_name(k) for k in others)} (no theory exponent)"] if others else []
    return chosen, f"guessed {' '.join(chosen)} ({why})" + (f"; left out {'; '.join(left)}" if left else "")


def fit_request(records: list[RunRecord], marked: list[str], current: str | None, query: str,
                variables: list[str], options: str = "") -> Any:
    """The ``sparse-tui fit`` arguments for the panel's fields: the marked runs (their ids), else the runs of the
    current run's preset (--preset), else the runs matching the filter words (their ids); ``options`` adds --tie /
    --bootstrap / --seed / --target / --paper / --where / --preset / --batch. None when nothing matches. Raises
    ``FitError`` for a bad options line."""
    opts = parse_fit_options(options)
    req = FitRequest(list(variables), **opts)
    if not query and marked:
        req.run_ids = list(marked)
    elif not query:
        cur = next((r for r in records if r.run_id == current), None)
        if cur is not None and "preset" not in opts and cur.preset:
            req.preset = cur.preset
        elif cur is not None and not cur.preset:
            req.run_ids = [r.run_id for r in chosen_runs(records, marked, current, query)]
    else:
        req.run_ids = [r.run_id for r in chosen_runs(records, marked, current, query)]
        if not req.run_ids:
            return None
    return req
