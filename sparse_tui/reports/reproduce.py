"""``sparse-tui reproduce`` and the console's atlas: one sequence, ``reproduce``. Each entry is planned against the
store (``planner.plan``: its preset's runs, those already stored, those to train, those to resume), what it lacks
is trained by the caller's ``train`` (the CLI: headless in this process through ``runner.run_headless``; the
console: ``launch_detached``, through ``runner.start_detached``), and what the store then holds is reported
(``library.report``: the paper beside the measurement, ending with the verdict).

No torch, no textual at import.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from sparse_tui.atlas import AtlasError, Entry
from sparse_tui.reports.base import Report
from sparse_tui.reports.library import refits, report
from sparse_tui.reports.planner import Plan, plan, plan_run_ids


@dataclass
class Outcome:
    """One entry's pass: its plan, what ``train`` returned for it (None: nothing to train, or no ``train``), its
    report, or why there is none (``why``: nothing to report; ``error``: the report failed)."""

    plan: Plan
    trained: Any = None
    report: Report | None = None
    why: str = ""
    error: Exception | None = None


def reproduce(store: Any, chosen: Sequence[Entry], size: str, *, presets_dir: Path | None = None,
              threshold: float | None = None, train: Callable[[Any, Plan], Any] | None = None,
              said: Callable[[Plan], None] | None = None, reports: bool = True, partial: bool = True
              ) -> list[Outcome]:
    """Plan each of ``chosen`` at ``size`` in turn (an entry reuses what an earlier one just trained: Fig. 5 and
    Fig. 16), tell ``said`` each plan, train what it lacks with ``train(store, plan)``, then report each entry over
    its runs with a result. ``threshold``: entries with a fitted law re-read their plateaus there (``refits``;
    the others report at their preset's). ``reports`` False: plan and train only; ``partial`` False: report only
    entries with every run stored. Raises ``AtlasError`` / ``presets.PresetError`` while planning."""
    outcomes = []
    for entry in chosen:
        p = plan(store, entry, size, presets_dir)
        if said is not None:
            said(p)
        out = Outcome(p)
        if train is not None and (p.to_train() or p.resumable):
            out.trained = train(store, p)
        outcomes.append(out)
    for out in outcomes if reports else ():
        if out.plan.missing and not partial:
            continue
        ids = plan_run_ids(store, out.plan)
        if not ids:
            out.why = "no finished run to report"
            continue
        entry = out.plan.entry
        try:
            out.report = report(store, entry, ids, threshold=threshold if refits(entry) else None)
        except (AtlasError, ValueError) as e:
            out.error = e
    return outcomes


@dataclass
class Launched:
    """What ``launch_detached`` started: the new batch (``batch_id``, ``run_ids``), the resumed runs' count and
    every process it started."""

    batch_id: str
    run_ids: list[str]
    resumed: int
    pids: list[int]


def launch_detached(store: Any, p: Plan, executor: Any) -> Launched:
    """``reproduce``'s ``train`` for the console: the plan's interrupted or failed runs resumed in their own rows
    (``runner.resume_runs_detached``) and its missing runs started as a new batch (``runner.start_detached``),
    detached from this process, as ``sparse-tui run --detach``."""
    from sparse_tui.lifecycle import runner

    todo = p.to_train()
    again = [r.run_id for r in p.resumable.values()]
    pids = [pid for _, _, pid in runner.resume_runs_detached(store, again, executor=executor)] if again else []
    batch_id, ids, pid = runner.start_detached(store, todo, executor=executor) if todo else ("", [], None)
    return Launched(batch_id, ids, len(again), pids + ([pid] if todo else []))
