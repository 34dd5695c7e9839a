"""Step 7 of the run lifecycle (lifecycle/runner.py): which runs ``resume`` continues, what it checks before
anything is written, and the detached resume of the console and ``resume --detach``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from sparse_tui.lifecycle import runner
from sparse_tui.lifecycle.runner import ExecutorOptions, requeue_for_resume, stored_configs
from sparse_tui.store import RunStore, StoreError
from sparse_tui.training.checkpoint import CheckpointError, check, fingerprint

if TYPE_CHECKING:
    from sparse_tui.presets.loading import RunSpec

RESUMABLE = ("failed", "interrupted", "queued")


def resume_targets(store: RunStore, target: str) -> tuple[str, list[str]]:
    """The runs ``sparse-tui resume TARGET`` continues: TARGET is a batch id or a run id, or a unique prefix of
    either (``store.find``, the resolver every command shares). Returns (batch_id, run_ids) of its failed,
    interrupted and queued runs; StoreError (one line) when there are none, or TARGET names nothing or several
    runs or batches."""
    store.reap()
    kind, found = store.find(target, ("run", "batch"), what="run or batch id")
    if kind == "batch":
        batch_id, recs = found, store.runs(batch_id=found)
    else:
        rec = store.get(found)
        batch_id, recs = rec.batch_id, [rec]
    live = [r for r in recs if r.status == "running"]
    todo = [r for r in recs if r.status in RESUMABLE]
    if not todo:
        states = ", ".join(sorted({r.status for r in recs}))
        extra = f" ({len(live)} still running)" if live else ""
        raise StoreError(f"nothing to resume in {kind} {found}: {states}{extra}")
    return batch_id, [r.run_id for r in sorted(todo, key=lambda r: r.position)]


def check_resumable(store: RunStore, run_ids: list[str]) -> list[RunSpec]:
    """What ``resume`` checks before anything is written: the store can be written, each run's stored config still
    validates, and each run's checkpoint is data (``checkpoint.check``: a planted pickle is refused, never run).
    Returns the runs as specs (what the executor's preflight and plan read); StoreError (one line, naming the file
    or the run) otherwise."""
    from sparse_tui.presets.loading import RunSpec

    if store.read_only or not os.access(store.path, os.W_OK) or not os.access(store.runs_dir, os.W_OK):
        raise StoreError(f"{store.path}: the run store is read-only (file system or permissions); cannot resume"
                         " runs in it (copy it to a writable directory)")
    recs = [store.get(r) for r in run_ids]
    for r in recs:  # a run of the user's own script (sparse_tui.init, track.py): only that script can continue it
        if (r.versions or {}).get("logged_by"):
            raise StoreError(f"run {r.run_id} was logged by its own script ({r.versions.get('script') or 'a script'})"
                             " through sparse_tui.init; sparse-tui cannot train it (run the script again)")
    cfgs, bad = stored_configs(recs)
    if bad:
        raise StoreError(next(iter(bad.values())))
    for r in recs:
        try:
            check(store.runs_dir, r.run_id, fingerprint(r.run_id, cfgs[r.run_id]))
        except CheckpointError as e:
            raise StoreError(str(e)) from None
    return [RunSpec(r.preset, r.preset_path or "", cfgs[r.run_id], r.swept) for r in recs]


def resume_runs_detached(store: RunStore, run_ids: list[str], *, schedule: str = "auto", workers: int | None = None,
                         device: str | None = None,
                         executor: ExecutorOptions | None = None) -> list[tuple[str, list[str], int]]:
    """``sparse-tui resume RUN --detach``, and the console's for its selected or marked runs: the resumable ones
    (failed, interrupted, queued) are re-queued per batch, with one detached coordinator per batch. Returns
    [(batch_id, run_ids, pid)]; StoreError when none of them can be resumed. ``executor``: where the
    coordinators train (None: this machine)."""
    store.reap()
    recs = [store.get(r) for r in run_ids]
    todo = [r for r in recs if r.status in RESUMABLE]
    if not todo:
        states = ", ".join(sorted({r.status for r in recs})) or "no runs"
        raise StoreError(f"nothing to resume: only failed, interrupted or queued runs can be ({states})")
    check_resumable(store, [r.run_id for r in todo])
    out = []
    for batch_id in dict.fromkeys(r.batch_id for r in todo):
        ids = [r.run_id for r in sorted(todo, key=lambda r: r.position) if r.batch_id == batch_id]
        requeue_for_resume(store, batch_id, ids)
        pid = runner.detach(store, batch_id, workers=workers or 0, device=device, schedule=schedule, executor=executor)
        out.append((batch_id, ids, pid))
    return out
