"""``sparse-tui reproduce`` and the console's atlas: one sequence, ``reproduce``. Each entry is planned against the
store (``planner.plan``: its preset's runs, those already stored, those to train, those to resume), what it lacks
is trained by the caller's ``train`` (the CLI: headless in this process through ``runner.run_headless``; the
console: ``launch_detached``, through ``runner.start_detached``), and what the store then holds is reported
(``library.report``: the paper beside the measurement, ending with the verdict).

No torch, no textual at import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from sparse_tui.atlas import AtlasError, Entry
from sparse_tui.reports.base import Report
from sparse_tui.reports.library import refits, report
from sparse_tui.reports.planner import Plan, plan, plan_run_ids, still_training


@dataclass
class Outcome:
    """One entry's pass: its plan, what ``train`` returned for it (None: nothing to train, or no ``train``), its
    report, or why there is none (``why``: nothing to report; ``error``: the report failed)."""

    plan: Plan
    trained: Any = None
    report: Report | None = None
    why: str = ""
    error: Exception | None = None
    elsewhere: list[str] = field(default_factory=list)  # its runs still training in another process at report time


def reproduce(store: Any, chosen: Sequence[Entry], size: str, *, presets_dir: Path | None = None,
              threshold: float | None = None, train: Callable[[Any, Plan], Any] | None = None,
              said: Callable[[Plan], None] | None = None, reports: bool = True, partial: bool = True,
              verdict_now: bool = False, waiting: Callable[[Entry], None] | None = None) -> list[Outcome]:
    """Plan each of ``chosen`` at ``size`` in turn (an entry reuses what an earlier one just trained: Fig. 5 and
    Fig. 16), tell ``said`` each plan, train what it lacks with ``train(store, plan)``, then report each entry over
    its runs with a result. ``threshold``: entries with a fitted law re-read their plateaus there (``refits``;
    the others report at their preset's). ``reports`` False: plan and train only; ``partial`` False: report only
    entries with every run stored. Raises ``AtlasError`` / ``presets.PresetError`` while planning.

    Two at once (issue 45): each entry is planned and trained holding the store's lock of that entry
    (``store.locks``: SQLite's, dropped by the OS when a process ends), so a second ``reproduce`` of it waits
    (``waiting(entry)`` is told once) and then finds the first one's runs stored: no point is trained twice. Runs
    of its points that another process is training without the lock (a console launch, ``run --detach``) are
    joined, never trained again (``Plan.elsewhere``); while some still train, the report says how many and gives
    no verdict, unless ``verdict_now``."""
    from contextlib import nullcontext

    from sparse_tui.store.locks import held

    outcomes = []
    for entry in chosen:
        tell = (lambda e=entry: waiting(e)) if waiting is not None else None
        # a pass that only reports trains nothing, so it takes no lock (the console's report never waits)
        with held(store.runs_dir, f"reproduce-{entry.key}", on_wait=tell) if train is not None else nullcontext():
            if train is not None and not getattr(store, "read_only", False):
                store.reap()  # a run whose process is gone is resumable, not "training elsewhere"
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
        out.elsewhere = still_training(store, out.plan)
        ids = plan_run_ids(store, out.plan)
        if not ids:
            out.why = "no finished run to report" + (f" ({_elsewhere_note(out)})" if out.elsewhere else "")
            continue
        entry = out.plan.entry
        withhold = bool(out.elsewhere) and not verdict_now
        try:
            out.report = report(store, entry, ids, threshold=threshold if refits(entry) else None,
                                verdict=not withhold)
        except (AtlasError, ValueError) as e:
            out.error = e
            continue
        if out.elsewhere:
            out.report.elsewhere = tuple(out.elsewhere)
            out.report.text += f"\n  {_elsewhere_note(out)}" + (
                "; no verdict until they end (reproduce again then, or --verdict-now)" if withhold else "")
    return outcomes


def _elsewhere_note(out: Outcome) -> str:
    n, total = len(out.elsewhere), len(out.plan.specs)
    shown = ", ".join(out.elsewhere[:4]) + (", ..." if n > 4 else "")
    return f"{n} of {total} point(s) still training elsewhere (runs {shown})"


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
    (``resume.resume_runs_detached``) and its missing runs started as a new batch (``runner.start_detached``),
    detached from this process, as ``sparse-tui run --detach``."""
    from sparse_tui.lifecycle import runner
    from sparse_tui.lifecycle.resume import resume_runs_detached

    todo = p.to_train()
    again = [r.run_id for r in p.resumable.values()]
    pids = [pid for _, _, pid in resume_runs_detached(store, again, executor=executor)] if again else []
    batch_id, ids, pid = runner.start_detached(store, todo, executor=executor) if todo else ("", [], None)
    return Launched(batch_id, ids, len(again), pids + ([pid] if todo else []))
