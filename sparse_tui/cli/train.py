"""Training commands: ``run`` (here, detached or in the console), ``resume``, and the hidden ``work`` / ``worker``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from sparse_tui.base.exitcodes import ExitCode
from sparse_tui.cli.common import (
    DeviceOpt,
    RunsDirOpt,
    WorkersOpt,
    _cell,
    _device_flag,
    _esc,
    _exit_now,
    _one_of,
    _open_store,
    _open_tui,
    _preflight,
    _preset_refused,
    _presets_dir,
    _refused,
    _run_table,
    _runs_dir,
    _say,
    _store_if_any,
    _train_batch,
    _workers_flag,
    app,
    executor_flags,
    fail,
    out,
)

ExecutorOpt = typer.Option(
    "local", "--executor", help="Where the stacks train: local (this machine) or ray (a Ray cluster: docs/CLUSTER.md)."
)


def _add_tags(loaded, tags: list[str], preset: Path):
    """The preset's ``tags`` followed by the ``--tag`` ones (a tag already in the preset is not repeated)."""
    from sparse_tui.presets.errors import PresetError
    from sparse_tui.presets.loading import validate_preset_data

    raw = dict(loaded.raw)
    old = raw.get("tags") or []
    raw["tags"] = list(old) + [t for t in tags if t not in old]
    try:
        out = validate_preset_data(raw, preset.name, path=loaded.path)
    except PresetError as e:  # e.g. more than MAX_TAGS in all
        raise fail(f"--tag: {e.lines[0]}") from None
    out.file_raw = loaded.file_raw
    return out


def _load(preset: Path, overrides: list[str]):
    from sparse_tui.presets.loading import load_preset

    with _preset_refused():
        return load_preset(preset, overrides)


@app.command(short_help="Run a preset's runs (sweep x seeds) here, in the background, or in the console.")
@executor_flags
def run(
    preset: Path = typer.Argument(..., help="Preset TOML file.", show_default=False),
    headless: bool = typer.Option(False, "--headless", help="Train here, without the console; progress on stderr."),
    set_: List[str] = typer.Option([], "--set", help="Override a key: --set train.lr=1e-3 (repeatable)."),
    runs_dir: Optional[Path] = RunsDirOpt,
    presets_dir: Optional[Path] = typer.Option(None, "--presets-dir", help="Your own preset files: a bare PRESET "
                                               "name is looked up there before the bundled presets; the console "
                                               "lists them (default ./presets).", show_default=False),
    device: Optional[str] = DeviceOpt,
    workers: str = typer.Option(
        "auto", "--workers", help="Worker processes: a number, or auto (the sweep scheduler decides)."
    ),
    detach: bool = typer.Option(False, "--detach", help="Start the runs in the background and return at once."),
    schedule: str = typer.Option(
        "auto",
        "--schedule",
        help="How a sweep is trained: auto, sequential, processes (one per core) or stacked (same-shape runs as one "
        "stacked model; the GPU default). See docs/PERFORMANCE.md.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and list the runs, train nothing."),
    budget: Optional[str] = typer.Option(None, "--budget", help="Spend this much time (30m, 1h, 90s) where it buys the "
                                         "most precision on the law's exponents: chosen runs and seeds, in order, "
                                         "steps capped at the forecast (lifecycle/budget.py); --dry-run prints the "
                                         "plan.", show_default=False),
    tag: List[str] = typer.Option([], "--tag", help="Add a tag to every run (repeatable; after the preset's tags)."),
    executor: str = ExecutorOpt,
    verbose: bool = typer.Option(False, "--verbose", help="Print each training process's start-up phases (imports, "
                                 "CUDA context, trial step, first capture) in the batch log."),
) -> None:
    """Run every run of a preset (sweep x seeds), recording them in the run store."""
    if verbose:  # read by every process that trains (workers and a detached coordinator inherit it): startup.py
        os.environ["SPARSE_TUI_VERBOSE"] = "1"
    overrides = list(set_)
    _tag_flags(tag)
    if device is not None:
        overrides.append(f"train.device={json.dumps(device)}")
    presets_dir = _presets_dir(presets_dir)
    preset = _preset_file(preset, presets_dir)
    loaded = _load(preset, overrides)
    if tag:
        loaded = _add_tags(loaded, list(tag), preset)
    if budget is not None and detach:
        raise fail("--budget trains here, re-planning as runs end: not with --detach")
    if not headless and not dry_run and not detach and budget is None:
        _open_tui(_runs_dir(runs_dir), presets_dir, preset, list(set_), executor)
    n_workers = _workers_flag(workers)
    from sparse_tui.training.scheduler import SCHEDULES

    _one_of("--schedule", schedule, SCHEDULES)
    from sparse_tui.lifecycle import runner
    from sparse_tui.presets.loading import expand

    specs = expand(loaded)
    if budget is not None:
        _run_budget(specs, loaded.name, budget, dry_run, runs_dir, device, executor, preset.name)
    if dry_run:  # the preset on this machine; no cluster is asked
        _preflight(None, specs, device, preset.name)
        _dry_run(loaded.name, specs, schedule, n_workers, device)
        raise typer.Exit(0)

    # The executor is checked before the store is opened: nothing is written when it refuses.
    ex = _preflight(executor, specs, device, preset.name, detached=detach)
    store = _open_store(runs_dir, create=True)
    if detach:
        batch_id, ids, pid = runner.start_detached(
            store, specs, schedule=schedule, workers=n_workers or None, device=device, executor=executor,
        )
        out.print(f"batch {batch_id}: {len(ids)} run(s) started in the background (pid {pid})")
        out.print(f"log: {runner.log_path(store, batch_id)} (its first line is the schedule the coordinator chose)")
        raise typer.Exit(0)
    _train_batch(store, ex, specs, schedule=schedule, workers=n_workers, device=device)


def _budget_plan(specs, name: str, budget: str, device, store=None, taken=()):
    """The budget in seconds, the cost of a step (``run --dry-run``'s cost model) and the plan."""
    from sparse_tui.lifecycle import budget as bd
    from sparse_tui.lifecycle.estimate import step_seconds

    with _refused(bd.BudgetError):
        seconds = bd.parse_budget(budget)
    step_s, source = step_seconds(specs, device)
    ended = [r for r in store.runs(preset=name) if r.status == "finished"] if store is not None else []
    return seconds, step_s, source, bd.plan(specs, seconds, step_s, name, ended, taken)


def _run_budget(specs, name: str, budget: str, dry_run: bool, runs_dir, device, executor, file_name: str,
                then_exit: bool = True, taken: list[int] | None = None) -> list[str]:
    """``run PRESET --budget T`` (and ``reproduce KEY --budget T``): print the plan (--dry-run), or train it,
    re-planned as each run ends; returns the run ids trained (``then_exit`` False) or exits."""
    from sparse_tui.lifecycle import budget as bd

    store = _store_if_any(runs_dir) if dry_run else None
    seconds, step_s, source, p = _budget_plan(specs, name, budget, device, store, taken or [])
    for line in bd.lines(p, name):
        out.print(_esc(line), markup=False)
    out.print(f"cost model: {source}", markup=False)
    if dry_run:
        if not then_exit:
            return []
        raise typer.Exit(0)
    ex = _preflight(executor, specs, device, file_name)
    store = _open_store(runs_dir, create=True)
    ids = bd.spend(store, specs, seconds, step_s, name,
                   lambda spec: _trained(store, ex, spec, device), say=_say, taken=taken or [])
    if not then_exit:
        return ids
    _run_table(f"{len(ids)} run(s) trained within the budget", [store.get(i) for i in ids],
               ("run_id", "run", "status", "plateau", "test/loss", "test/acc", "time"))
    raise typer.Exit(0)


def _trained(store, ex, spec, device) -> list[str]:
    """Train one run here; its run id (the batch's)."""
    from sparse_tui.base.exitcodes import ExitCode

    before = {r.run_id for r in store.runs()}
    code = _train_batch(store, ex, [spec], workers=1, device=device, then_exit=False, table=False)
    if code == ExitCode.INTERRUPTED:
        raise typer.Exit(int(code))
    return [r.run_id for r in store.runs() if r.run_id not in before]


def _preset_file(preset: Path, local_dir: Optional[Path] = None) -> Path:
    """The file a preset argument names (``catalog.resolve``: a path, else your ./presets/NAME.toml, else the
    bundled NAME.toml); a name resolved to a file says which, in one line on stderr."""
    from sparse_tui.presets.catalog import CatalogError, resolve, shadow_note

    with _refused(CatalogError):
        found = resolve(preset, local_dir)
    if found.origin != "file":
        _say(found.line())
        if note := shadow_note(str(preset), local_dir):
            _say(f"warning: {note}")
    return found.path


def _tag_flags(tag: List[str]) -> None:
    """``--tag``: each a valid tag, none twice (exit 2, one line)."""
    if not tag:
        return
    from sparse_tui.presets.schema import tag_problem

    for t in tag:
        problem = tag_problem(t)
        if problem:
            raise fail(f"--tag: {problem}")
    if len(set(tag)) != len(tag):
        raise fail(f"--tag: {next(t for t in tag if tag.count(t) > 1)!r} given twice")


def _dry_run(name: str, specs: list, schedule: str, n_workers, device: Optional[str]) -> None:
    """``run --dry-run``: the runs as a table, the time estimate here and the GPU projections (the lent card's range,
    and any card calibrated here)."""
    from sparse_tui.lifecycle.estimate import projections, time_estimate

    t = Table(title=_esc(f"{name}: {len(specs)} run(s)"))
    for col in ("#", "run", "task", "model", "steps", "device"):
        t.add_column(col)
    for i, s in enumerate(specs):
        c = s.config
        t.add_row(str(i), _cell(s.label()), c.task.kind, c.model.kind, str(c.train.steps), c.train.device)
    out.print(t)
    line = time_estimate(specs, schedule, n_workers, device)
    if line:
        out.print(line, markup=False)
    for projection in projections(specs):
        out.print(projection.line(), markup=False)


@app.command(hidden=True)
@executor_flags
def work(
    batch_id: str = typer.Argument(...),
    runs_dir: Optional[Path] = RunsDirOpt,
    workers: int = typer.Option(0, "--workers", help="0: as the sweep scheduler plans."),
    device: Optional[str] = typer.Option(None, "--device"),
    group: int = typer.Option(0, "--group", help="Stacks of up to this many same-shape runs (0: as planned)."),
    schedule: str = typer.Option("auto", "--schedule"),
    executor: str = ExecutorOpt,
) -> None:
    """Coordinator of a detached batch (started by run --detach and by the console): plans when the runs start."""
    from sparse_tui.executors import ExecutorError, executor_for

    ex = executor_for(executor)
    store = _open_store(runs_dir)
    with _refused(ExecutorError):  # (the launcher checked this machine's device and memory)
        _train_batch(store, ex, batch_id=batch_id, schedule=schedule, workers=workers, group=group, device=device,
                     preflight=ex.options.kind != "local")


@app.command(hidden=True)
def worker(
    batch_id: str = typer.Argument(...),
    runs_dir: Optional[Path] = RunsDirOpt,
    device: Optional[str] = typer.Option(None, "--device"),
    threads: Optional[int] = typer.Option(None, "--threads"),
    group: int = typer.Option(1, "--group", help="Train up to this many same-shape runs stacked."),
) -> None:
    """A worker process: claims queued runs of a batch and trains them."""
    import torch

    from sparse_tui.lifecycle import runner
    from sparse_tui.lifecycle.signals import StopFlag, install_signal_handlers

    if threads:
        torch.set_num_threads(threads)
    store = _open_store(runs_dir)
    flag = StopFlag()
    install_signal_handlers(flag)
    try:
        runner.work(store, batch_id, device=device, should_stop=flag, group=group)
    except KeyboardInterrupt:
        _exit_now(ExitCode.INTERRUPTED)
    if flag.status:
        _exit_now(ExitCode.INTERRUPTED)
    raise typer.Exit(0)


@app.command(short_help="Continue failed and interrupted runs from their latest checkpoints.")
@executor_flags
def resume(
    target: str = typer.Argument(..., help="A run id or a batch id (or a unique prefix of either).",
                                 show_default=False),
    runs_dir: Optional[Path] = RunsDirOpt,
    device: Optional[str] = DeviceOpt,
    workers: str = WorkersOpt,
    schedule: str = typer.Option("auto", "--schedule", help="auto, sequential, processes or stacked."),
    detach: bool = typer.Option(False, "--detach", help="Continue in the background and return at once."),
    executor: str = ExecutorOpt,
) -> None:
    """Continue the failed and interrupted runs (and runs left queued) of a batch, or one run, from their latest
    checkpoints, through the same launch path as 'run'."""
    from sparse_tui.lifecycle import runner
    from sparse_tui.lifecycle.resume import check_resumable, resume_runs_detached, resume_targets
    from sparse_tui.store import StoreError
    from sparse_tui.training.scheduler import SCHEDULES

    n_workers = _workers_flag(workers)
    _one_of("--schedule", schedule, SCHEDULES)
    _device_flag(device)
    store = _open_store(runs_dir)
    with _refused(StoreError):
        batch_id, ids = resume_targets(store, target)
        specs = check_resumable(store, ids)
    ex = _preflight(executor, specs, device, specs[0].preset)
    if detach:
        [(batch_id, ids, pid)] = resume_runs_detached(store, ids, schedule=schedule, workers=n_workers,
                                                             device=device, executor=executor)
        out.print(f"batch {batch_id}: {len(ids)} run(s) resumed in the background (pid {pid})")
        out.print(f"log: {_esc(runner.log_path(store, batch_id))}")
        raise typer.Exit(0)
    _train_batch(store, ex, specs, batch_id=batch_id, resume=ids, schedule=schedule, workers=n_workers,
                 device=device)
