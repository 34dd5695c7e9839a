"""The ``sparse-tui`` command line (Typer). Thin: every command imports its heavy modules (torch, textual) inside
its body, so ``sparse-tui --help`` stays light. Exit codes: see ``exitcodes.ExitCode``.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sparse_tui.exitcodes import ExitCode
from sparse_tui.numbers import fmt_or

_TRAINING_COMMANDS = ("run", "resume", "work", "worker")  # a full disk stops runs that 'resume' continues


class _Commands(typer.core.TyperGroup):
    """Every command's store and disk errors end as one line on stderr, never a traceback: a damaged, foreign or
    newer run store and an unreadable runs directory exit 2; a full disk exits 1."""

    def invoke(self, ctx):
        import sqlite3

        from sparse_tui.store import StoreError, is_disk_full

        try:
            return super().invoke(ctx)
        except StoreError as e:
            err.print(f"error: {_esc(str(e))}", markup=False)
            raise typer.Exit(int(ExitCode.RUN_FAILED if is_disk_full(e) or "disk full" in str(e) else ExitCode.USAGE))
        except (sqlite3.Error, OSError) as e:
            if isinstance(e, BrokenPipeError):  # `sparse-tui runs | head -1`: the reader left; nothing to say
                _silence_stdout()
                raise typer.Exit(0)
            if is_disk_full(e):
                trains = ctx.invoked_subcommand in _TRAINING_COMMANDS
                then = "'sparse-tui resume' continues the runs" if trains else "run the command again"
                err.print(f"error: disk full ({_esc(e)}); free space, then {then}", markup=False)
                raise typer.Exit(int(ExitCode.RUN_FAILED))
            where = getattr(e, "filename", None)
            err.print(f"error: {_esc(str(where) + ': ') if where else ''}{_esc(str(e))}", markup=False)
            raise typer.Exit(int(ExitCode.USAGE))


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _esc(text) -> str:
    """Text with control characters (terminal escape codes, newlines, tabs) escaped, so that a name never reaches
    the terminal raw."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _cell(text):
    """A table cell: escaped, and never read as rich markup."""
    return Text(_esc("" if text is None else text))


app = typer.Typer(
    cls=_Commands,
    name="sparse-tui",
    help=(
        "A terminal experiment console for studying how sparse attention emerges during training.\n\n"
        "Without a command, opens the console (TUI) on your ./presets, the bundled presets and the run store."
    ),
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)
if not out.is_terminal:  # tables into a file or a pipe: don't squeeze them into 80 columns
    out.width = max(out.width, 160)


def _runs_dir_flag(text: str) -> Path:
    """``--runs-dir DIR``: an empty DIR would silently mean the current directory; refused in one line."""
    if not text:
        raise fail("--runs-dir: must not be empty (leave the flag out for $SPARSE_TUI_RUNS or ./runs)")
    return Path(text)


RunsDirOpt = typer.Option(
    None,
    "--runs-dir",
    help="Run store directory (default: $SPARSE_TUI_RUNS or ./runs).",
    show_default=False,
    parser=_runs_dir_flag,
)

ExecutorOpt = typer.Option(
    "local", "--executor", help="Where the stacks train: local (this machine) or ray (a Ray cluster: docs/CLUSTER.md)."
)
RayAddressOpt = typer.Option(
    None, "--ray-address", help="With --executor ray: auto (the cluster 'ray start' runs here; default), local (a "
    "private Ray on this machine) or HOST:PORT of the head.", show_default=False,
)


def _runs_dir(value: Optional[Path]) -> Path:
    from sparse_tui.store import default_runs_dir

    return value if value is not None else default_runs_dir()


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> "typer.Exit":
    """Print a one-line error to stderr and return the exit to raise."""
    err.print(f"error: {_esc(message)}", markup=False)
    return typer.Exit(int(code))


@contextmanager
def _refused(*errors: type[Exception]):
    """One of ``errors`` (each a one-line refusal of its module: a preset key, a figure path, an executor) ends the
    command as that line, exit 2."""
    try:
        yield
    except errors as e:
        raise fail(str(e)) from None


def _one_of(flag: str, value: Optional[str], choices) -> None:
    """``flag VALUE``: one of ``choices`` (None: the flag left out), or exit 2 naming the flag."""
    if value is not None and value not in choices:
        raise fail(f"{flag}: must be one of {', '.join(choices)}, got {value!r}")


def _open_store(runs_dir: Optional[Path], *, create: bool = False):
    from sparse_tui.store import RunStore, StoreError

    with _refused(StoreError):
        return RunStore(_runs_dir(runs_dir), create=create)


@contextmanager
def _writing(store, what: str):
    """Edits of a store (tags, notes): a read-only store (media or permissions) is one line naming its file, both
    when it is known to be read-only before the write and when SQLite refuses the write."""
    import sqlite3

    if store.read_only or not os.access(store.path, os.W_OK) or not os.access(store.runs_dir, os.W_OK):
        raise fail(f"{store.path}: the run store is read-only (file system or permissions); cannot {what}")
    try:
        yield
    except sqlite3.OperationalError as e:
        raise fail(f"{store.path}: cannot {what}: {str(e).splitlines()[0]}") from None


def _add_tags(loaded, tags: list[str], preset: Path):
    """The preset's ``tags`` followed by the ``--tag`` ones (a tag already in the preset is not repeated)."""
    from sparse_tui.presets import PresetError, validate_preset_data

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
    from sparse_tui.presets import load_preset

    with _preset_refused():
        return load_preset(preset, overrides)


@contextmanager
def _preset_refused():
    """A preset that does not validate: its lines (each naming the file and the key), exit 2."""
    from sparse_tui.presets import PresetError

    try:
        yield
    except PresetError as e:
        for line in e.lines:
            err.print(_esc(line), markup=False)
        raise typer.Exit(int(ExitCode.USAGE)) from None


@app.callback()
def main_callback(
    ctx: typer.Context,
    runs_dir: Optional[Path] = RunsDirOpt,
    presets_dir: Path = typer.Option(Path("presets"), "--presets-dir", help="Your own preset files (the console "
                                     "lists them first, then the bundled presets)."),
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
    executor: str = typer.Option("local", "--executor", help="Where the console's launches train: local or ray."),
    address: Optional[str] = RayAddressOpt,
) -> None:
    if version:
        from sparse_tui import __version__

        out.print(f"sparse-tui {__version__}")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        _open_tui(_runs_dir(runs_dir), presets_dir, None, [], _executor_options(executor, address))


def _open_tui(runs_dir: Path, presets_dir: Path, preset: Optional[Path], overrides: list[str], executor) -> None:
    """The console; its launches and resumes train on ``executor`` (``ExecutorOptions``), checked first."""
    try:
        from sparse_tui.tui.app import run_app
    except ImportError as e:  # pragma: no cover - a broken install
        raise fail(f"the console is not available: {e}") from None
    from sparse_tui.executors import executor_for

    problem = executor_for(executor).probe()  # say now, not at the first launch, when it cannot be reached
    if problem:
        raise fail(problem)
    code = run_app(runs_dir=runs_dir, presets_dir=presets_dir, preset=preset, overrides=overrides, executor=executor)
    raise typer.Exit(int(code or 0))


@app.command(short_help="Run a preset's runs (sweep x seeds) here, in the background, or in the console.")
def run(
    preset: Path = typer.Argument(..., help="Preset TOML file.", show_default=False),
    headless: bool = typer.Option(False, "--headless", help="Train here, without the console; progress on stderr."),
    set_: List[str] = typer.Option([], "--set", help="Override a key: --set train.lr=1e-3 (repeatable)."),
    runs_dir: Optional[Path] = RunsDirOpt,
    presets_dir: Path = typer.Option(Path("presets"), "--presets-dir", help="Your own preset files: a bare PRESET "
                                     "name is looked up there before the bundled presets; the console lists them."),
    device: Optional[str] = typer.Option(None, "--device", help="Override train.device: auto, cpu, cuda, cuda:N."),
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
    tag: List[str] = typer.Option([], "--tag", help="Add a tag to every run (repeatable; after the preset's tags)."),
    executor: str = ExecutorOpt,
    address: Optional[str] = RayAddressOpt,
    verbose: bool = typer.Option(False, "--verbose", help="Print each training process's start-up phases (imports, "
                                 "CUDA context, trial step, first capture) in the batch log."),
) -> None:
    """Run every run of a preset (sweep x seeds), recording them in the run store."""
    if verbose:  # read by every process that trains (workers and a detached coordinator inherit it): startup.py
        os.environ["SPARSE_TUI_VERBOSE"] = "1"
    opts = _executor_options(executor, address)
    overrides = list(set_)
    if tag:
        from sparse_tui.presets import tag_problem

        for t in tag:
            problem = tag_problem(t)
            if problem:
                raise fail(f"--tag: {problem}")
        if len(set(tag)) != len(tag):
            raise fail(f"--tag: {next(t for t in tag if tag.count(t) > 1)!r} given twice")
    if device is not None:
        overrides.append(f"train.device={json.dumps(device)}")
    preset = _preset_file(preset, presets_dir)
    loaded = _load(preset, overrides)
    if tag:
        loaded = _add_tags(loaded, list(tag), preset)
    if not headless and not dry_run and not detach:
        _open_tui(_runs_dir(runs_dir), presets_dir, preset, list(set_), opts)
    n_workers = _workers_flag(workers)
    from sparse_tui.training.scheduler import SCHEDULES

    _one_of("--schedule", schedule, SCHEDULES)
    from sparse_tui import runner
    from sparse_tui.presets import expand

    specs = expand(loaded)
    if dry_run:  # the preset on this machine; no cluster is asked
        _preflight(None, specs, device, preset.name)
        t = Table(title=_esc(f"{loaded.name}: {len(specs)} run(s)"))
        for col in ("#", "run", "task", "model", "steps", "device"):
            t.add_column(col)
        for i, s in enumerate(specs):
            c = s.config
            t.add_row(str(i), _cell(s.label()), c.task.kind, c.model.kind, str(c.train.steps), c.train.device)
        out.print(t)
        from sparse_tui.estimate import project_h100, time_estimate

        line = time_estimate(specs, schedule, n_workers, device)
        if line:
            out.print(line, markup=False)
        projection = project_h100(specs)
        if projection is not None:
            out.print(projection.line(), markup=False)
        raise typer.Exit(0)

    # The executor is checked before the store is opened: nothing is written when it refuses.
    ex = _preflight(opts, specs, device, preset.name, detached=detach)
    store = _open_store(runs_dir, create=True)
    if detach:
        batch_id, ids, pid = runner.start_detached(
            store, specs, schedule=schedule, workers=n_workers or None, device=device, executor=opts,
        )
        out.print(f"batch {batch_id}: {len(ids)} run(s) started in the background (pid {pid})")
        out.print(f"log: {runner.log_path(store, batch_id)} (its first line is the schedule the coordinator chose)")
        raise typer.Exit(0)
    _train_batch(store, ex, specs, schedule=schedule, workers=n_workers, device=device)


def _preset_file(preset: Path, local_dir: Optional[Path] = None) -> Path:
    """The file a preset argument names (``catalog.resolve``: a path, else your ./presets/NAME.toml, else the
    bundled NAME.toml); a name resolved to a file says which, in one line on stderr."""
    from sparse_tui.catalog import CatalogError, resolve

    with _refused(CatalogError):
        found = resolve(preset, local_dir)
    if found.origin != "file":
        _say(found.line())
    return found.path


def _say(line: str) -> None:
    err.print(_esc(line), markup=False)


def _executor_options(executor: str, address: Optional[str]):
    """``--executor`` / ``--ray-address`` as one ``ExecutorOptions`` (exit 2, one line, for a bad value); nothing
    heavy is imported."""
    from sparse_tui.executors import ExecutorError, options

    with _refused(ExecutorError):
        return options(executor, address)


def _preflight(opts, specs: list, device: Optional[str], source: str, detached: bool = False):
    """The executor ``opts`` names (None: this machine), after its preflight (the device, the memory; Ray: the
    cluster, joined), before anything is written; exit 2 with its one line otherwise."""
    from sparse_tui.executors import ExecutorError, executor_for, options

    ex = executor_for(opts or options())
    with _refused(ExecutorError):
        ex.preflight(specs, device, source, detached=detached)
    return ex


def _train_batch(store, executor, specs=(), *, then_exit: bool = True, table: bool = True, **how) -> ExitCode:
    """Train a batch here (``runner.run_headless(store, executor, specs, **how)``) with progress on stderr, then
    print the summary of its runs (``table`` False: none) and exit with the batch's exit code (``then_exit`` False:
    return it, unless interrupted)."""
    from sparse_tui import runner
    from sparse_tui.progress import BatchProgress

    batch_id, ids, stopped = runner.run_headless(store, executor, specs, say=_say,
                                                 progress=lambda b: BatchProgress(store, b, err), **how)
    runs = sorted(store.runs(batch_id=batch_id), key=lambda r: (r.created_at, r.position))
    if ids is not None:
        runs = [r for r in runs if r.run_id in set(ids)]
    if table:
        _run_table("runs", runs, ("run_id", "run", "status", "plateau", "test/loss", "test/acc", "time"))
    failed = any(r.status == "failed" for r in runs)
    code = ExitCode.INTERRUPTED if stopped else ExitCode.RUN_FAILED if failed else ExitCode.OK
    where = "" if store.runs_dir.resolve() == (Path.cwd() / "runs").resolve() else f" --runs-dir {store.runs_dir}"
    if code == ExitCode.INTERRUPTED:
        err.print("interrupted: running runs were recorded as interrupted; everything logged is kept")
        _what_next([f"sparse-tui resume {batch_id}{where}   continues them from their latest checkpoints",
                    f"sparse-tui runs --status interrupted{where}   lists them"])
        _exit_now(code)
    if not then_exit:
        return code
    first = runs[0].run_id if runs else "RUN"
    _what_next([f"sparse-tui{where}   the console on these runs: 2 Runs (g groups seeds), 3 Curves, 5 Fit, 6 Phase",
                f"sparse-tui show {first}{where}   one run's summary and curves (--plot FILE.png for a figure)"])
    raise typer.Exit(int(code))


def _what_next(lines: list[str]) -> None:
    """Two lines after a headless run: where to go from here, each a command that works as typed."""
    err.print("what next:", markup=False)
    me = _self_command()
    for line in lines:
        err.print(f"  {_esc(me + line[len('sparse-tui'):] if line.startswith('sparse-tui') else line)}", markup=False)


def _self_command() -> str:
    """How to type this sparse-tui: ``sparse-tui`` when the PATH finds this one, else its script in the
    environment that runs (``.venv/bin/sparse-tui``: relative when under this folder), else ``python -m``."""
    import shutil

    script = Path(sys.executable).parent / "sparse-tui"
    found = shutil.which("sparse-tui")
    if found and (not script.is_file() or os.path.samefile(found, script)):
        return "sparse-tui"
    if not script.is_file():
        return f"{sys.executable} -m sparse_tui"
    rel = os.path.relpath(script)
    return rel if not rel.startswith("..") else str(script)


def _exit_now(code: int) -> None:
    """Leave at once after a stop signal: everything is recorded and committed, and tearing down the interpreter
    with torch loaded takes a second or more on a busy machine (SIGTERM / Ctrl-C are honoured within 2 s)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(int(code))


# The columns of a run table ('runs', the summary after a headless batch): each one's cell from a run and its final
# metrics.
_RUN_CELLS = {
    "run_id": lambda r, f: r.run_id,
    "preset": lambda r, f: _cell(r.preset),
    "run": lambda r, f: _cell(r.label),
    "status": lambda r, f: r.status,
    "step": lambda r, f: f"{r.step}/{r.total_steps}",
    "plateau": lambda r, f: fmt_or(r.plateau_step, "g"),
    "forecast": lambda r, f: _forecast_cell(f.get("_forecast")),
    "test/loss": lambda r, f: fmt_or(f.get("test/loss")),
    "test/acc": lambda r, f: fmt_or(f.get("test/acc"), ".3f"),
    "device": lambda r, f: _cell(r.device or "-"),
    "time": lambda r, f: fmt_or(r.duration, ".1f") + "s" if r.duration else "-",
    "tags / note": lambda r, f: _cell(" ".join(r.tags) + (f" · {r.note}" if r.note else "")),
}


def _forecast_cell(f) -> str:
    from sparse_tui.forecast import cell

    return cell(f)


def _run_table(title: str, runs, cols: tuple[str, ...], final=lambda r: r.final) -> None:
    """Print ``runs`` with the columns ``cols`` (of ``_RUN_CELLS``; ``final``: a run's final metrics). The
    8-character id never wraps or shrinks (it is copied into show / fit); on a narrow terminal the preset and
    run-name columns wrap first."""
    t = Table(title=title)
    for col in cols:
        if col == "run_id":
            t.add_column(col, no_wrap=True, min_width=8)
        elif col in ("preset", "run"):
            t.add_column(col, overflow="fold", ratio=1)
        else:
            t.add_column(col, no_wrap=col in ("status", "step"))
    for r in runs:
        f = final(r)
        t.add_row(*(_RUN_CELLS[col](r, f) for col in cols))
    out.print(t)


@app.command(hidden=True)
def work(
    batch_id: str = typer.Argument(...),
    runs_dir: Optional[Path] = RunsDirOpt,
    workers: int = typer.Option(0, "--workers", help="0: as the sweep scheduler plans."),
    device: Optional[str] = typer.Option(None, "--device"),
    group: int = typer.Option(0, "--group", help="Stacks of up to this many same-shape runs (0: as planned)."),
    schedule: str = typer.Option("auto", "--schedule"),
    executor: str = ExecutorOpt,
    address: Optional[str] = RayAddressOpt,
) -> None:
    """Coordinator of a detached batch (started by run --detach and by the console): plans when the runs start."""
    from sparse_tui.executors import ExecutorError, executor_for

    ex = executor_for(_executor_options(executor, address))
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

    from sparse_tui import runner

    if threads:
        torch.set_num_threads(threads)
    store = _open_store(runs_dir)
    flag = runner.StopFlag()
    runner.install_signal_handlers(flag)
    try:
        runner.work(store, batch_id, device=device, should_stop=flag, group=group)
    except KeyboardInterrupt:
        _exit_now(ExitCode.INTERRUPTED)
    if flag.status:
        _exit_now(ExitCode.INTERRUPTED)
    raise typer.Exit(0)


@app.command(short_help="Continue failed and interrupted runs from their latest checkpoints.")
def resume(
    target: str = typer.Argument(..., help="A run id or a batch id (or a unique prefix of either).", show_default=False),
    runs_dir: Optional[Path] = RunsDirOpt,
    device: Optional[str] = typer.Option(None, "--device", help="Override train.device: auto, cpu, cuda, cuda:N."),
    workers: str = typer.Option("auto", "--workers", help="Worker processes: a number, or auto."),
    schedule: str = typer.Option("auto", "--schedule", help="auto, sequential, processes or stacked."),
    detach: bool = typer.Option(False, "--detach", help="Continue in the background and return at once."),
    executor: str = ExecutorOpt,
    address: Optional[str] = RayAddressOpt,
) -> None:
    """Continue the failed and interrupted runs (and runs left queued) of a batch, or one run, from their latest
    checkpoints, through the same launch path as 'run'."""
    opts = _executor_options(executor, address)
    from sparse_tui import runner
    from sparse_tui.store import StoreError
    from sparse_tui.training.scheduler import SCHEDULES

    n_workers = _workers_flag(workers)
    _one_of("--schedule", schedule, SCHEDULES)
    _device_flag(device)
    store = _open_store(runs_dir)
    with _refused(StoreError):
        batch_id, ids = runner.resume_targets(store, target)
        specs = runner.check_resumable(store, ids)
    ex = _preflight(opts, specs, device, specs[0].preset)
    if detach:
        [(batch_id, ids, pid)] = runner.resume_runs_detached(store, ids, schedule=schedule, workers=n_workers,
                                                             device=device, executor=opts)
        out.print(f"batch {batch_id}: {len(ids)} run(s) resumed in the background (pid {pid})")
        out.print(f"log: {_esc(runner.log_path(store, batch_id))}")
        raise typer.Exit(0)
    _train_batch(store, ex, specs, batch_id=batch_id, resume=ids, schedule=schedule, workers=n_workers,
                 device=device)


def _workers_flag(workers: str) -> int:
    """``--workers``: a positive integer, or 'auto' (0)."""
    if workers == "auto":
        return 0
    try:
        n = int(workers)
    except ValueError:
        n = 0
    if n < 1 or n > 1024:
        raise fail(f"--workers: must be a positive integer (at most 1024) or 'auto', got {workers!r}")
    return n


def _device_flag(device: Optional[str]) -> None:
    """``--device``: auto, cpu, cuda, cuda:N or mps (None: left out), or exit 2 naming the flag."""
    if device is not None and not re.fullmatch(r"auto|cpu|cuda|cuda:\d+|mps", device):
        raise fail(f"--device: must be one of auto, cpu, cuda, cuda:N, got {device!r}")


@app.command(short_help="List the runs in the store, newest first (archived ones with --archived).")
def runs(
    runs_dir: Optional[Path] = RunsDirOpt,
    as_json: bool = typer.Option(False, "--json", help="One JSON object per run (a JSON array)."),
    status: Optional[str] = typer.Option(None, "--status", help="Only runs with this status."),
    preset: Optional[str] = typer.Option(None, "--preset", help="Only runs of this preset name."),
    limit: int = typer.Option(0, "--limit", help="At most this many (newest first); 0 = all."),
    tag: List[str] = typer.Option([], "--tag", help="Only runs with this tag (repeatable: all of them)."),
    archived: bool = typer.Option(False, "--archived", help="List the archived runs (hidden otherwise)."),
) -> None:
    """List the runs in the store, newest first (archived runs only with --archived)."""
    from sparse_tui.store import STATUSES

    _one_of("--status", status, STATUSES)
    if limit < 0:
        raise fail(f"--limit: must be >= 0 (0 = all), got {limit}")
    store = _open_store(runs_dir)
    recs = store.runs(status=status, preset=preset)
    _store_warnings(store)
    if isinstance(tag, (list, tuple)) and tag:  # (called as a function, the default is typer's OptionInfo)
        recs = [r for r in recs if set(tag) <= set(r.tags)]
    recs = [r for r in recs if r.archived == (archived is True)]
    if limit:
        recs = recs[:limit]
    fc = _forecasts(store, recs)
    if as_json:
        from sparse_tui.export import run_row

        sys.stdout.write(json.dumps([{**run_row(r, store), "forecast": fc[r.run_id]} for r in recs], indent=1) + "\n")
        return
    cols = ("run_id", "preset", "run", "status", "step", "plateau", "forecast", "test/loss", "test/acc", "device")
    annotated = any(r.tags or r.note for r in recs)
    _run_table(_esc(f"{len(recs)} run(s) in {store.path}"), recs, cols + (("tags / note",) if annotated else ()),
               final=lambda r: {**(r.final or store.last_metrics(r.run_id)),  # a failed run's stored values, not "-"
                                "_forecast": fc[r.run_id]})


def _forecasts(store, recs) -> dict:
    """Each run's emergence forecast (forecast.py) from the store's runs of its preset."""
    from sparse_tui.forecast import forecast

    everyone = store.runs()  # the peers of a listed run may be filtered out of the listing
    return {r.run_id: forecast(r, everyone) for r in recs}


# ==============================================================================================================
# What a researcher adds after launch: notes, tags, archive, delete (annotate.py; the console's n, T, A, d)
# ==============================================================================================================


def _records(store, run_ids: list[str]) -> list:
    from sparse_tui.store import StoreError

    with _refused(StoreError):
        return [store.get(r) for r in dict.fromkeys(run_ids)]


def _ended_records(store, run_ids: list[str]) -> list:
    """The runs named, none of them queued or running (exit 2 otherwise: archive and delete wait for the end)."""
    from sparse_tui.annotate import undeletable

    recs = _records(store, run_ids)
    live = undeletable(recs)
    if live:
        raise fail(f"{len(live)} run(s) still queued or running ({live[0].run_id}): cancel them first")
    return recs


@app.command(short_help="Add or remove tags of runs (after launch).")
def tag(
    run_ids: List[str] = typer.Argument(..., help="Runs (ids or unique prefixes).", show_default=False),
    add: List[str] = typer.Option([], "--add", "-a", help="Add this tag (repeatable)."),
    remove: List[str] = typer.Option([], "--remove", "-r", help="Remove this tag (repeatable)."),
    runs_dir: Optional[Path] = RunsDirOpt,
) -> None:
    """Add (--add) or remove (--remove) tags of runs; they show in 'runs', the console and exports, and
    'runs --tag' / the console's filter find them. Tags: 1-40 ASCII letters, digits or _.:+=/@- each."""
    from sparse_tui.annotate import AnnotateError, edit_tags

    if not add and not remove:
        raise fail("tag: give --add TAG and/or --remove TAG")
    store = _open_store(runs_dir)
    recs = _records(store, list(run_ids))
    try:
        new = {r.run_id: edit_tags(r.tags, add, remove) for r in recs}
    except AnnotateError as e:
        raise fail(f"--add: {e}") from None
    with _writing(store, "change tags"):
        for r in recs:
            store.set_tags(r.run_id, new[r.run_id])
    for r in recs:
        out.print(f"{r.run_id}: {' '.join(new[r.run_id]) or '(no tags)'}", markup=False)


@app.command(short_help="Set or clear the note of a run.")
def note(
    run_id: str = typer.Argument(..., help="A run (id or unique prefix).", show_default=False),
    text: Optional[str] = typer.Argument(None, help="The note (one line); omit it to print the note.",
                                         show_default=False),
    clear: bool = typer.Option(False, "--clear", help="Remove the note."),
    runs_dir: Optional[Path] = RunsDirOpt,
) -> None:
    """Print, set or clear (--clear) a run's note: one line shown in 'runs', the console and exports."""
    from sparse_tui.annotate import AnnotateError, check_note

    store = _open_store(runs_dir)
    (rec,) = _records(store, [run_id])
    if text is None and not clear:
        out.print(rec.note or "(no note)", markup=False)
        return
    if text is not None and clear:
        raise fail("note: give a note or --clear, not both")
    if text is not None and not text.strip():
        raise fail("note: the note is empty; to remove the note, use --clear")
    with _refused(AnnotateError):
        value = None if clear else check_note(text)
    with _writing(store, "change the note"):
        store.set_note(rec.run_id, value)
    err.print(f"{rec.run_id}: note {'saved' if value else 'removed'}", markup=False)


@app.command(short_help="Archive runs: hidden from 'runs' and the console, nothing deleted.")
def archive(
    run_ids: List[str] = typer.Argument(..., help="Runs (ids or unique prefixes).", show_default=False),
    undo: bool = typer.Option(False, "--undo", help="Bring archived runs back."),
    runs_dir: Optional[Path] = RunsDirOpt,
) -> None:
    """Archive runs (or bring them back with --undo): archived runs are kept with everything they logged but
    hidden from 'runs' (see 'runs --archived') and the console (its filter: is:archived). Queued or running runs
    cannot be archived."""
    store = _open_store(runs_dir)
    recs = _records(store, list(run_ids)) if undo else _ended_records(store, list(run_ids))
    n = store.set_archived([r.run_id for r in recs], not undo)
    err.print(f"{'brought back' if undo else 'archived'} {n} run(s)", markup=False)


@app.command(short_help="Delete ended runs with their metrics (asks first, naming them).")
def delete(
    run_ids: List[str] = typer.Argument(..., help="Runs (ids or unique prefixes).", show_default=False),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask (needed without a terminal)."),
    runs_dir: Optional[Path] = RunsDirOpt,
) -> None:
    """Delete runs with their metrics and attention maps, after a question that names them (the console's rule):
    queued or running runs are refused (cancel them first); without a terminal, --yes is required."""
    from sparse_tui.annotate import delete_question

    store = _open_store(runs_dir)
    recs = _ended_records(store, list(run_ids))
    if not yes:
        if not sys.stdin.isatty():
            raise fail("delete: not a terminal to ask in; pass --yes to delete without asking")
        err.print(_esc(delete_question(recs)).replace("\\n", "\n"), markup=False)
        if not typer.confirm("Delete?", default=False, err=True):
            err.print("nothing deleted", markup=False)
            raise typer.Exit(int(ExitCode.OK))
    n = store.delete([r.run_id for r in recs])
    err.print(f"deleted {n} run(s)", markup=False)


def _checkpoint_line(store, rec) -> str:
    """What ``show`` says of a run's checkpoint: the step ``resume`` would load (the same check), or why none."""
    from sparse_tui import runner
    from sparse_tui.training.checkpoint import CheckpointError, check, fingerprint

    cfgs, _ = runner.stored_configs([rec])
    try:
        step = check(store.runs_dir, rec.run_id,
                     fingerprint(rec.run_id, cfgs[rec.run_id]) if rec.run_id in cfgs else None)
    except CheckpointError as e:
        return f"none usable ({e})"
    if step is None:
        return "-"
    hint = f"; sparse-tui resume {rec.run_id}" if rec.status in ("failed", "interrupted") else ""
    return f"step {step}{hint}"


def _selected(store, run_ids: list[str], status: Optional[str], preset: Optional[str]) -> list:
    """The runs named (ids or unique prefixes), or else those of ``status`` and ``preset``, oldest first; the rows
    the store skipped are warned about."""
    recs = _records(store, run_ids) if run_ids else store.runs(status=status, preset=preset)
    _store_warnings(store)
    return sorted(recs, key=lambda r: (r.created_at, r.batch_id, r.position))


def _store_warnings(store) -> None:
    """Damaged rows the store skipped, one warning line each (the listing goes on without them)."""
    for line in store.warnings:
        err.print(_esc(line), markup=False)


def _figure_path(plot: Optional[Path]) -> Optional[Path]:
    """Check a ``--plot FILE`` early (matplotlib installed, a known suffix), before any work is done."""
    if plot is None:
        return None
    from sparse_tui.reports.figures import FigureError, check_path, require_matplotlib

    with _refused(FigureError):
        require_matplotlib()
        return check_path(plot)


def _figure_size(size: Optional[str]) -> Optional[tuple[float, float]]:
    """``--size WxH`` in inches, checked before any work is done."""
    if size is None:
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)x(\d+(?:\.\d+)?)", size.strip())
    if not m or not all(0.5 <= float(v) <= 40 for v in m.groups()):
        raise fail(f"--size: WxH in inches between 0.5 and 40 (7x4), got {size!r}")
    return float(m.group(1)), float(m.group(2))


PlotOpt = typer.Option(
    None, "--plot", help='Also write a figure: FILE.png, .svg or .pdf (needs pip install "sparse-tui[plot]").',
    show_default=False,
)


@app.command(short_help="Summary and terminal plots of a run; --plot FILE writes a figure.")
def show(
    run_ids: List[str] = typer.Argument(..., help="Run id (or a unique prefix); several only with --plot."),
    runs_dir: Optional[Path] = RunsDirOpt,
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Draw terminal plots of the curves."),
    width: int = typer.Option(0, "--width", help="Plot width in columns (default: terminal width)."),
    plot: Optional[Path] = PlotOpt,
    size: Optional[str] = typer.Option(None, "--size", help="With --plot: the figure's size in inches, WxH (7x4).",
                                       show_default=False),
    mean_by: Optional[str] = typer.Option(None, "--mean-by", show_default=False,
                                          help="With --plot and several runs: one mean ± std curve per group of "
                                               "these keys' values (task.d,task.T: the seeds of a sweep point)."),
) -> None:
    """Summary and terminal plots of one run's curves; --plot FILE also writes the loss and accuracy curves with
    the plateau marked (several runs: overlaid in one figure, or one mean ± std per group with --mean-by) and, for
    runs of token tasks, FILE_embedding (same suffix): their final token embeddings in a plane (PCA above 2
    dimensions), labelled by token value."""
    from sparse_tui.plotting import chart
    from sparse_tui.store import StoreError

    if width < 0:
        raise fail(f"--width: must be >= 0 (0 = terminal width), got {width}")
    fig_path = _figure_path(plot)
    inches = _figure_size(size)
    if len(run_ids) > 1 and fig_path is None:
        raise fail("show: give one run, or several with --plot FILE")
    store = _open_store(runs_dir)
    store.reap()
    with _refused(StoreError):
        recs = [store.get(r) for r in run_ids]
    if fig_path is not None:
        from sparse_tui.reports.figures import FigureError, curves_figure, geometry_figure
        from sparse_tui.geometry import ARRAY

        embedded = [r.run_id for r in recs if store.array(r.run_id, ARRAY) is not None]
        geo_path = fig_path.with_name(f"{fig_path.stem}_embedding{fig_path.suffix}")
        with _refused(FigureError):
            curves_figure(store, [r.run_id for r in recs], fig_path, size=inches,
                          groups=[k.strip() for k in mean_by.split(",") if k.strip()] if mean_by else None)
            err.print(f"wrote {fig_path}")
            if embedded:  # token-input runs: their final embedding beside (blog 3's geometry view)
                geometry_figure(store, embedded, geo_path)
                err.print(f"wrote {geo_path}")
        if len(recs) > 1:
            return
    rec = recs[0]
    t = Table(title=f"run {rec.run_id}", show_header=False)
    t.add_column("key")
    t.add_column("value")
    rows = [
        ("preset", f"{rec.preset} ({rec.preset_path})"),
        ("run", rec.label),
        ("status", rec.status + (f" ({rec.reason})" if rec.reason else "")),
        ("step", f"{rec.step}/{rec.total_steps}"),
        ("plateau step", fmt_or(rec.plateau_step, "g")),
        ("device", rec.device or "-"),
        ("checkpoint", _checkpoint_line(store, rec)),
        ("duration", fmt_or(rec.duration, ".1f") + " s" if rec.duration else "-"),
        ("versions", ", ".join(f"{k} {v}" for k, v in rec.versions.items() if k != "platform")),
    ]
    rows.append(("swept", ", ".join(f"{k}={v}" for k, v in rec.swept.items())))
    final = rec.final or store.last_metrics(rec.run_id)
    for k in sorted(final):
        if "/H" not in k:
            rows.append((f"final {k}", fmt_or(final[k])))
    rows += _system_rows(store, rec.run_id)
    for k, v in rows:
        t.add_row(_cell(k), _cell(v))
    out.print(t)
    if not plots:
        return
    w = width or max(40, min(out.width, 160))
    series = store.metrics(rec.run_id)
    for title, keys in (
        ("loss (log scale)", ["train/loss", "test/loss"]),
        ("test accuracy", ["test/acc"]),
        ("attention to relevant tokens", [k for k in series if k.startswith("attn/L") and "/H" not in k]),
        ("toy model: w and alpha", [k for k in series if k.startswith("toy/")]),
    ):
        curves = {k: series[k] for k in keys if k in series}
        if curves:
            log_y = title.startswith("loss")
            out.print(Text.from_ansi(chart(curves, title=title, log_y=log_y, width=w, vline=rec.plateau_step)))


def _system_rows(store, run_id: str) -> list[tuple[str, str]]:
    """``show``'s rows of the run's ``sys/*`` metrics (sparse_tui/sysmetrics.py, recorded at its evaluations): the
    last value and the peak of each."""
    series = store.metrics(run_id, names=["sys/cpu_pct", "sys/rss_mb", "sys/gpu_util", "sys/gpu_mem_mb"])
    rows = []
    for k, (_, vals) in series.items():
        vals = [v for v in vals if v == v]
        if vals:
            rows.append((k, f"{fmt_or(vals[-1])} (peak {fmt_or(max(vals))}, {len(vals)} evaluations)"))
    return rows


@app.command("export", short_help="Export runs as CSV, JSON lines, Parquet, TensorBoard event files or MLflow runs.")
def export_cmd(
    run_ids: List[str] = typer.Argument(None, help="Runs to export (default: all, filtered by the options)."),
    runs_dir: Optional[Path] = RunsDirOpt,
    fmt: str = typer.Option("csv", "--format", help="csv, jsonl or parquet."),
    metrics: bool = typer.Option(False, "--metrics", help="The long per-step table (run_id, step, name, value)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write to this file (default: stdout)."),
    preset: Optional[str] = typer.Option(None, "--preset", help="Only runs of this preset name."),
    status: Optional[str] = typer.Option(None, "--status", help="Only runs with this status."),
    to: Optional[str] = typer.Option(
        None, "--to", help="tensorboard DIR: event files (scalars, hparams, attention images); mlflow [URI]: an MLflow "
        "tracking store (default sqlite:///RUNS_DIR/mlflow.db; a path: X.db, or a folder for its mlflow.db). The first "
        "argument is DIR / URI / path, then the runs.", show_default=False),
    update: bool = typer.Option(False, "--update", help="--to mlflow: bring runs exported before up to date (tags, "
                                "note, new metric points, status) instead of skipping them."),
    mkdir: bool = typer.Option(False, "--mkdir", help="--to: create the target's missing parent folders."),
    timeout: float = typer.Option(30.0, "--timeout", help="--to mlflow: seconds each MLflow call may take."),
) -> None:
    """Export the run table (or the per-step metrics) as CSV, JSON lines or Parquet, or (--to) write the runs as
    TensorBoard event files or MLflow runs."""
    from sparse_tui.export import FORMATS, export, write_output
    from sparse_tui.files import WriteError, problem
    from sparse_tui.store import STATUSES

    _one_of("--status", status, STATUSES)
    if to is not None:
        if not (math.isfinite(timeout) and timeout > 0):
            raise fail(f"--timeout: must be a positive number of seconds, got {timeout:g}")
        _export_to(to, list(run_ids or []), runs_dir, preset, status, output,
                   dict(update=update, mkdir=mkdir, timeout=timeout))
        return
    _one_of("--format", fmt, FORMATS)
    why = problem(output, through=True) if output is not None else None
    if why:
        raise fail(f"--output {output}: {why}")
    store = _open_store(runs_dir)
    recs = _selected(store, list(run_ids or []), status, preset)
    if fmt == "parquet" and output is None and sys.stdout.isatty():
        raise fail("--format parquet: binary output; pass --output FILE or redirect stdout")
    try:
        if output is not None:
            n = write_output(output, store, recs, fmt, metrics=metrics)
            err.print(f"wrote {n} row(s) to {_esc(output)}", markup=False)
        else:
            export(store, recs, fmt, sys.stdout.buffer if fmt == "parquet" else sys.stdout, metrics=metrics)
    except WriteError as e:
        raise fail(str(e), ExitCode.RUN_FAILED if e.disk_full else ExitCode.USAGE) from None
    except RuntimeError as e:  # parquet without pyarrow
        raise fail(str(e)) from None


def _export_to(to: str, args: list[str], runs_dir: Optional[Path], preset: Optional[str], status: Optional[str],
               output: Optional[Path], how: dict) -> None:
    """``export --to tensorboard DIR [RUN…]`` / ``--to mlflow [URI | PATH] [RUN…]`` (bridges.py)."""
    from sparse_tui.bridges import BRIDGES, BridgeError, export_to

    _one_of("--to", to, BRIDGES)
    dest = str(output) if output is not None else None
    if dest is None and args and (to == "tensorboard" or _is_destination(args[0])):
        dest, args = args[0], args[1:]
    if to == "tensorboard" and dest is None:
        raise fail("--to tensorboard: give the folder to write: sparse-tui export --to tensorboard DIR [RUN…]")
    store = _open_store(runs_dir)
    recs = _selected(store, args, status, preset)
    if not recs:
        raise fail("export: no runs to export")
    try:
        line = export_to(to, store, recs, dest, say=lambda t: err.print(_esc(t), markup=False), **how)
    except BridgeError as e:
        exit_ = fail(str(e))
        if e.stuck:  # a call still hangs in its thread: leave without waiting for it
            _exit_now(exit_.exit_code)
        raise exit_ from None
    err.print(_esc(line), markup=False)


def _is_destination(arg: str) -> bool:
    """Whether the first argument after ``--to mlflow`` is where to write (a URI or a path), not a run id: it has a
    scheme, a path separator or a .db suffix, or names something that exists."""
    return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", arg)) or "/" in arg or arg.endswith(".db") \
        or arg.startswith(("~", ".")) or os.path.exists(arg)


# ==============================================================================================================
# theory and fit (issue 3): thin wrappers over sparse_tui.reports.fitreport, which the console's fitting panel shares.
# Neither command imports torch (tests/test_theory_cli.py checks it).
# ==============================================================================================================


def _fit_error(e: Exception) -> "typer.Exit":
    return fail(str(e).splitlines()[0] if str(e) else type(e).__name__)


ThresholdOpt = typer.Option(
    None, "--threshold", metavar="X", show_default=False,
    help="Re-read each run's plateau from its stored curve at this absolute value of its plateau metric (first "
         "evaluation at or below X; at or above for accuracy rules) instead of the preset's threshold; no retraining.")


@app.command(short_help="Plateau length of the reduced dynamics against the closed-form forecast.")
def theory(
    d: Optional[float] = typer.Option(None, "--d", help="Token / target dimension d (one point)."),
    T: Optional[float] = typer.Option(None, "--T", help="Sequence length T (one point)."),
    B: float = typer.Option(1, "--B", help="In-context repetition B (one point)."),
    p: float = typer.Option(0.0, "--p", help="Cross-sample repetition probability p (one point)."),
    grid: List[str] = typer.Option(
        [], "--grid", help="A grid instead of one point: --grid d=16,32,64 T=64,256 B=1,2 (keys d, T, B, p)."
    ),
    threshold: float = typer.Option(0.2, "--threshold", help="Plateau ends when the test loss reaches this x 0.5."),
    paper: str = typer.Option("auto", "--paper", help="Paper fit to compare the grid fit with: auto, none or a key."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    extra: List[str] = typer.Argument(None, hidden=True),
) -> None:
    """Plateau length of the reduced gradient flow (paper Eqs. 12-14, 17-21) vs the closed-form forecast.

    One point (--d 64 --T 512 [--B 1 --p 0]) or a grid (--grid d=16,32,64 T=64,256,1024 B=1,2,4) with a power-law
    fit of the grid beside the forecast exponents (d +0.5, T +1, B -1, f -1) and the paper's fit. Read sqrt(dT) in
    the paper as sqrt(d)*T (docs/THEORY.md).
    """
    from sparse_tui.reports import fitreport
    from sparse_tui.fitting import FitError

    items = list(grid) + list(extra or [])  # --grid d=.. T=.. : later items arrive as extra arguments
    if extra and not grid:
        raise fail(f"unexpected argument(s): {' '.join(extra)}")
    try:
        if items:
            if d is not None or T is not None:
                raise FitError("give either --grid or --d/--T, not both")
            res = fitreport.theory_grid(items, threshold=threshold, paper=None if paper == "none" else paper)
            if as_json:
                sys.stdout.write(json.dumps(fitreport.theory_grid_dict(res), indent=1) + "\n")
            else:
                out.print(fitreport.format_theory_grid(res), markup=False)
            return
        if d is None or T is None:
            raise FitError("give --d and --T (and optionally --B, --p), or --grid d=... T=...")
        for name, v in (("--d", d), ("--T", T), ("--B", B)):
            if not math.isfinite(v) or v < 1 or float(v) != int(v):
                raise FitError(f"{name}: must be a positive integer, got {v:g}")
        if B > T:
            raise FitError("--B: must be <= --T")
        if not 0.0 <= p <= 1.0:
            raise FitError(f"--p: must be in [0, 1], got {p:g}")
        pt = fitreport.theory_point(int(d), int(T), int(B), p, threshold=threshold)
    except (FitError, ValueError) as e:
        raise _fit_error(e) from None
    if as_json:
        sys.stdout.write(json.dumps(pt, indent=1) + "\n")
    else:
        out.print(fitreport.format_theory_point(pt), markup=False)


@app.command(short_help="Fit a power law to the plateau lengths of finished runs; compare with theory.")
def fit(
    run_ids: List[str] = typer.Argument(None, help="Runs to fit (ids or unique prefixes; default: all selected)."),
    runs_dir: Optional[Path] = RunsDirOpt,
    preset: Optional[str] = typer.Option(None, "--preset", help="Only runs of this preset name."),
    batch: Optional[str] = typer.Option(None, "--batch", help="Only runs of this batch id (or unique prefix)."),
    where: List[str] = typer.Option(
        [], "--where", help="Filter: KEY=VALUE (also !=, <, <=, >, >=; V1,V2 = any of), e.g. --where task.B=2."
    ),
    vars_: str = typer.Option(
        "d,T", "--vars", help="Variables: d, T, B, f (=f(p,d)), T/B, n_tokens, n_pairs, model.d_model, train.lr, ..."
    ),
    tie: Optional[str] = typer.Option(None, "--tie", help="Tie exponents to one scale: --tie d:0.5,T:1,f:-1."),
    bootstrap: int = typer.Option(0, "--bootstrap", help="Add bootstrap intervals from N resamples of the runs."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap resampling."),
    target: str = typer.Option("plateau_step", "--target", help="plateau_step, or plateau_time (= step x lr)."),
    paper: str = typer.Option("auto", "--paper", help="Paper fit to compare with: auto, none or a key."),
    threshold: Optional[str] = ThresholdOpt,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    plot: Optional[Path] = PlotOpt,
) -> None:
    """Fit a power law (App. D.2) to the plateau lengths of finished runs in the store and compare it with the
    theory's forecast and the paper's fit. Runs that never emerged are reported as censored. --threshold X re-reads
    every plateau from the stored curves at the absolute value X instead (no retraining). --plot FILE also
    writes the plateau against each variable on log-log axes with the fit and the paper's law."""
    from sparse_tui.reports import fitreport
    from sparse_tui.fitting import FitError

    if bootstrap < 0:
        raise fail("--bootstrap: must be >= 0")
    with _refused(FitError):
        fitreport.parse_threshold(threshold)
    fig_path = _figure_path(plot)
    store = _open_store(runs_dir)
    try:  # the console's Fit panel calls the same function with the same arguments
        rep = fitreport.fit_store(store, vars_, run_ids=list(run_ids or []), preset=preset, batch=batch, where=where,
                                  tie=tie, bootstrap=bootstrap, seed=seed, target=target, paper=paper,
                                  threshold=threshold)
    except (FitError, ValueError) as e:
        raise _fit_error(e) from None
    if as_json:
        sys.stdout.write(json.dumps(rep.to_dict(), indent=1) + "\n")
    else:
        out.print(rep.text(), markup=False)
    if fig_path is not None:
        from sparse_tui.reports.figures import FigureError, fit_figure

        try:
            fit_figure(rep, fig_path)
        except FigureError as e:
            raise fail(str(e)) from None
        err.print(f"wrote {fig_path}")


# ==============================================================================================================
# end of the theory / fit block
# ==============================================================================================================


@app.command(short_help="Reproduce a figure of the paper: train what the store lacks, fit, compare; --list.")
def reproduce(
    name: Optional[str] = typer.Argument(None, help="A figure (fig15: all its panels) or a panel (fig15_adam); "
                                         "see --list.", show_default=False),
    list_: bool = typer.Option(False, "--list", help="Print the atlas: every entry's verdict, CPU cost, stored runs "
                               "and figure (--json: everything the atlas holds)."),
    size: str = typer.Option("auto", "--size", help="cpu (grids a 2-core CPU finishes in minutes), gpu, or auto "
                             "(gpu when CUDA is available)."),
    runs_dir: Optional[Path] = RunsDirOpt,
    presets_dir: Optional[Path] = typer.Option(None, "--presets-dir", help="Your own preset files, looked up before "
                                               "the bundled presets (default: ./presets).", show_default=False),
    plot: Optional[Path] = PlotOpt,
    workers: str = typer.Option("auto", "--workers", help="Worker processes: a number, or auto."),
    device: Optional[str] = typer.Option(None, "--device", help="Override train.device: auto, cpu, cuda, cuda:N."),
    threshold: Optional[str] = ThresholdOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the reports as JSON."),
) -> None:
    """Reproduce a figure of the paper: train the runs of its preset that the store lacks (runs of the same
    configuration are reused, whoever trained them), fit or summarise them, print the paper's numbers beside the
    measured ones, and with --plot FILE draw the figure. --threshold X fits plateaus re-read from the stored curves
    at X (panels with a fitted law). --list prints the atlas of every figure."""
    from sparse_tui import atlas
    from sparse_tui.catalog import resolve
    from sparse_tui.reports import reproduce as rp
    from sparse_tui.reports.fitreport import parse_threshold
    from sparse_tui.fitting import FitError
    from sparse_tui.store import StoreError

    if list_:
        if name is not None:
            raise fail("reproduce --list: takes no figure name")
        store = _open_store(runs_dir) if _runs_dir(runs_dir).joinpath("runs.db").exists() else None
        rows = rp.status_rows(store, presets_dir, with_verdicts=True)
        if as_json:
            sys.stdout.write(json.dumps(rp.list_json(rows, store is not None), indent=1) + "\n")
            return
        where = f"runs in {store.path}" if store is not None else "no run store here"
        width = max(60, min(shutil.get_terminal_size((80, 24)).columns, 120))
        sys.stdout.write("\n".join([f"figure atlas: {len(rows)} entries; {where}",
                                    *rp.list_lines(rows, store is not None, width)]) + "\n")
        return
    if name is None:
        raise fail("reproduce: name a figure (e.g. fig15) or pass --list")
    _one_of("--size", size, ("auto",) + atlas.SIZES)
    _device_flag(device)
    n_workers = _workers_flag(workers)
    fig_path = _figure_path(plot)
    with _refused(atlas.AtlasError, FitError):
        chosen = atlas.find(name)
        x = parse_threshold(threshold)
        refit = {e.key for e in chosen if x is not None and rp.refits(e)}
        if x is not None and not refit:
            raise atlas.AtlasError(f"--threshold: {name} has no panel with a fitted law (its plateaus are not "
                                   "fitted; sparse-tui reproduce --list shows each kind)")
    if size == "auto":
        import torch

        size = "gpu" if torch.cuda.is_available() else "cpu"
    with _refused(atlas.AtlasError), _preset_refused():  # every named preset loads before the store is opened
        for entry in chosen:
            rp.plan(None, entry, size, presets_dir)
    store = _reproduce_store(runs_dir, chosen, size, presets_dir)
    plans = []
    code = ExitCode.OK
    for entry in chosen:  # planned in turn: an entry reuses what an earlier one just trained (Fig. 5 and Fig. 16)
        p = rp.plan(store, entry, size, presets_dir)
        plans.append(p)
        _say(p.describe())
        _say(resolve(p.preset, presets_dir).line())
        todo = p.to_train()
        again = [p.specs[i] for i in sorted(p.resumable)]
        if not todo and not again:
            continue
        ex = _preflight(None, todo + again, device, p.preset)
        with _refused(StoreError):  # an interrupted or failed run continues in its own row (its checkpoint checked)
            batches = rp.resume_batches(store, p)
        for batch_id, ids, specs in batches:
            code = max(code, _train_batch(store, ex, specs, batch_id=batch_id, resume=ids, workers=n_workers,
                                          device=device, then_exit=False, table=not as_json))
        if todo:
            code = max(code, _train_batch(store, ex, todo, workers=n_workers, device=device, then_exit=False,
                                          table=not as_json))  # this process coordinates, as `run --headless`
    reports = []
    paths = rp.plot_paths(fig_path, chosen) if fig_path is not None else [None] * len(plans)
    for p, path in zip(plans, paths):
        ids = rp.plan_run_ids(store, p)
        if not ids:
            err.print(f"{p.entry.key}: no finished run to report", markup=False)
            code = max(code, ExitCode.RUN_FAILED)
            continue
        if x is not None and p.entry.key not in refit:
            err.print(f"{p.entry.key}: a {p.entry.kind} entry, reported at its preset's threshold (--threshold "
                      "re-reads fitted laws only)", markup=False)
        try:
            rep = rp.report(store, p.entry, ids, threshold=x if p.entry.key in refit else None)
        except (atlas.AtlasError, ValueError) as e:
            raise _fit_error(e) from None
        reports.append(rep)
        if not as_json:
            out.print(rep.text, markup=False)
            out.print("")
        if path is not None:
            from sparse_tui.reports.figures import FigureError

            with _refused(FigureError):
                rp.draw(store, rep, path)
            err.print(f"wrote {path}")
    if as_json:
        from sparse_tui.reports.fitreport import json_safe

        sys.stdout.write(json.dumps(json_safe([r.data for r in reports]), indent=1) + "\n")
    raise typer.Exit(int(code))


presets_app = typer.Typer(cls=_Commands, add_completion=False, rich_markup_mode=None, invoke_without_command=True,
                          help="List the presets (bundled and your own), grouped; 'presets copy' writes an editable "
                          "copy.")
app.add_typer(presets_app, name="presets", short_help="List the presets, grouped, with the figure each reproduces; "
              "copy one to edit.")
PresetsDirOpt = typer.Option(Path("presets"), "--presets-dir", help="Your own preset files (listed first).")


@presets_app.callback()
def presets(ctx: typer.Context, presets_dir: Path = PresetsDirOpt) -> None:
    """Every preset sparse-tui ships and your own (./presets), grouped: yours, checks, theory, paper (CPU), paper
    (GPU), blogs; each with the figure it reproduces and the CPU time its header records ("-": none measured).
    `sparse-tui run NAME` runs one; `sparse-tui presets copy NAME [DIR]` copies one to edit."""
    if ctx.invoked_subcommand is not None:
        return
    from sparse_tui.catalog import bundled_dir, catalogue

    t = Table(title=f"presets (bundled: {_esc(bundled_dir())}; yours: {_esc(presets_dir)}/)", title_justify="left")
    for col in ("group", "preset", "reproduces", "CPU time"):  # names and times never split: the figure wraps
        t.add_column(col, no_wrap=col != "reproduces")
    group = None
    for item in catalogue(presets_dir):
        if item.group != group and group is not None:
            t.add_section()
        t.add_row(_cell(item.group if item.group != group else ""), _cell(item.name), _cell(item.figure or "-"),
                  _cell(item.cpu_time))
        group = item.group
    out.print(t)
    out.print("sparse-tui run NAME --headless runs one; sparse-tui presets copy NAME [DIR] writes a copy to edit "
              "(default ./presets, looked up before the bundled one)", markup=False)


@presets_app.command("copy")
def presets_copy(
    name: str = typer.Argument(..., help="A preset name (sparse-tui presets lists them).", show_default=False),
    dest: Optional[Path] = typer.Argument(None, help="Folder to write NAME.toml into (default: ./presets).",
                                          show_default=False),
    presets_dir: Path = PresetsDirOpt,
) -> None:
    """Write an editable copy of a preset as DIR/NAME.toml; an existing file is never overwritten."""
    from sparse_tui.catalog import CatalogError, copy

    with _refused(CatalogError):
        target = copy(name, dest, presets_dir)
    out.print(f"wrote {_esc(target)}: edit it, then: sparse-tui run {_esc(target)} --headless", markup=False)


def _reproduce_store(runs_dir: Optional[Path], chosen, size: str, presets_dir: Optional[Path]):
    """The store ``reproduce`` trains into; a read-only one is used when it holds every run the entries need
    (``reproduce.read_only_problem``: then it only reports)."""
    from sparse_tui import atlas
    from sparse_tui.reports import reproduce as rp
    from sparse_tui.store import RunStore, StoreError

    where = _runs_dir(runs_dir)
    try:
        return RunStore(where, create=True)
    except StoreError as e:
        if not (where / "runs.db").is_file():
            raise fail(str(e)) from None
        store = _open_store(runs_dir)
        if not store.read_only:
            raise fail(str(e)) from None
    with _refused(atlas.AtlasError):
        why = rp.read_only_problem(store, chosen, size, presets_dir)
    if why:
        raise fail(why)
    return store


@app.command(short_help="Check the device and every training schedule on a tiny sweep.")
def doctor(
    device: str = typer.Option("auto", "--device", help="Device to check: auto, cpu, cuda, cuda:N."),
) -> None:
    """Check this machine before a real sweep: device, versions, free memory, then a tiny sweep trained with every
    schedule (sequential, stacked, CUDA-graphed) and compared with the sequential result. Exit 1 on any problem.
    Run it first on a new GPU server."""
    from sparse_tui.doctor import diagnose

    code = diagnose(device, say=lambda line: out.print(line, markup=False, highlight=False))
    raise typer.Exit(code)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
