"""What every command shares: the Typer app, its error handling, the output consoles, the common flags and
the helpers more than one group of commands uses."""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sparse_tui.base.exitcodes import ExitCode
from sparse_tui.base.numbers import fmt_or

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
            _say(f"error: {e}")
            raise typer.Exit(int(ExitCode.RUN_FAILED if is_disk_full(e) or "disk full" in str(e) else ExitCode.USAGE))
        except (sqlite3.Error, OSError) as e:
            if isinstance(e, BrokenPipeError):  # `sparse-tui runs | head -1`: the reader left; nothing to say
                _silence_stdout()
                raise typer.Exit(0)
            if is_disk_full(e):
                trains = ctx.invoked_subcommand in _TRAINING_COMMANDS
                then = "'sparse-tui resume' continues the runs" if trains else "run the command again"
                _say(f"error: disk full ({e}); free space, then {then}")
                raise typer.Exit(int(ExitCode.RUN_FAILED))
            where = getattr(e, "filename", None)
            _say(f"error: {str(where) + ': ' if where else ''}{e}")
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
if not out.is_terminal and "COLUMNS" not in os.environ:  # tables into a file or a pipe: don't squeeze them into
    out.width = max(out.width, 160)  # 80 columns (a COLUMNS the user sets is their width)


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


def executor_flags(command):
    """A command's ``--executor`` (its ``executor`` parameter, whose default is that option) followed by every
    executor's own flags (their classes' ``OPTIONS``, executors.declared: a new executor's flag reaches every command
    that takes ``--executor`` with no change here), given to the command as one checked ``ExecutorOptions`` in
    ``executor`` (exit 2, one line, for a bad value). Nothing heavy is imported."""
    from sparse_tui.executors import declared

    own = declared()
    names = {flag: flag.lstrip("-").replace("-", "_") for flag in own}
    sig = inspect.signature(command)
    params = []
    for p in sig.parameters.values():
        params.append(p)
        if p.name == "executor":
            params += [inspect.Parameter(names[flag], p.kind, annotation=Optional[str],
                                         default=typer.Option(None, flag, help=o.help, show_default=False))
                       for flag, (_, o) in own.items()]

    @functools.wraps(command)
    def with_executor(*args, **kw):
        kw["executor"] = _executor_options(kw["executor"], {flag: kw.pop(n) for flag, n in names.items()})
        return command(*args, **kw)

    with_executor.__signature__ = sig.replace(parameters=params)
    with_executor.__annotations__ = {**command.__annotations__, **{n: Optional[str] for n in names.values()}}
    return with_executor


def _runs_dir(value: Optional[Path]) -> Path:
    from sparse_tui.store import default_runs_dir

    return value if value is not None else default_runs_dir()


def _presets_dir(value: Optional[Path]) -> Path:
    """``--presets-dir``: left out, ./presets (which may not exist); given, a folder that exists, or exit 2 (a typo
    must not fall back to the bundled presets without a word; issue 45)."""
    if value is None:
        return Path("presets")
    if not value.is_dir():
        why = ("a link to nothing (dangling)" if value.is_symlink() and not value.exists()
               else "not a folder" if value.exists() else "no such folder")
        raise fail(f"--presets-dir {value}: {why}")
    return value


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> "typer.Exit":
    """Print a one-line error to stderr and return the exit to raise."""
    _say(f"error: {message}")
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


def _store_if_any(runs_dir: Optional[Path]):
    """The run store when ``runs_dir`` holds one, else None (nothing is created)."""
    return _open_store(runs_dir) if _runs_dir(runs_dir).joinpath("runs.db").exists() else None


@contextmanager
def _preset_refused():
    """A preset that does not validate: its lines (each naming the file and the key), exit 2."""
    from sparse_tui.presets.errors import PresetError

    try:
        yield
    except PresetError as e:
        for line in e.lines:
            _say(line)
        raise typer.Exit(int(ExitCode.USAGE)) from None


@app.callback()
@executor_flags
def main_callback(
    ctx: typer.Context,
    runs_dir: Optional[Path] = RunsDirOpt,
    presets_dir: Optional[Path] = typer.Option(None, "--presets-dir", help="Your own preset files (the console "
                                               "lists them first, then the bundled presets; default ./presets).",
                                               show_default=False),
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
    executor: str = typer.Option("local", "--executor", help="Where the console's launches train: local or ray."),
) -> None:
    if version:
        from sparse_tui import __version__

        out.print(f"sparse-tui {__version__}")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        _open_tui(_runs_dir(runs_dir), _presets_dir(presets_dir), None, [], executor)


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


def _say(line: str) -> None:
    err.print(_esc(line), markup=False)


def _executor_options(executor: str, values: dict):
    """``--executor`` and the executors' own flags (``values``: flag -> value) as one ``ExecutorOptions`` (exit 2,
    one line, for a bad value); nothing heavy is imported."""
    from sparse_tui.executors import ExecutorError, options

    with _refused(ExecutorError):
        return options(executor, values)


def _preflight(opts, specs: list, device: Optional[str], source: str, detached: bool = False):
    """The executor ``opts`` names (None: this machine), after its preflight (the device, the memory; Ray: the
    cluster, joined), before anything is written; exit 2 with its one line otherwise."""
    from sparse_tui.base.extras import missing_torch
    from sparse_tui.executors import ExecutorError, executor_for, options

    if missing_torch():  # an install without the train extra: one line, exit 2, nothing written
        raise fail(missing_torch())
    ex = executor_for(opts or options())
    with _refused(ExecutorError):
        ex.preflight(specs, device, source, detached=detached)
    return ex


def _train_batch(store, executor, specs=(), *, then_exit: bool = True, table: bool = True, **how) -> ExitCode:
    """Train a batch here (``runner.run_headless(store, executor, specs, **how)``) with progress on stderr, then
    print the summary of its runs (``table`` False: none) and exit with the batch's exit code (``then_exit`` False:
    return it, unless interrupted)."""
    from sparse_tui.lifecycle import runner
    from sparse_tui.lifecycle.progress import BatchProgress

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
        _say("interrupted: running runs were recorded as interrupted; everything logged is kept")
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
    _say("what next:")
    me = _self_command()
    for line in lines:
        _say(f"  {me + line[len('sparse-tui'):] if line.startswith('sparse-tui') else line}")


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
    from sparse_tui.science.forecast import cell

    return cell(f)


def _run_table(title: str, runs, cols: tuple[str, ...], final=lambda r: r.final, show: bool = True) -> Table:
    """Print ``runs`` with the columns ``cols`` (of ``_RUN_CELLS``; ``final``: a run's final metrics), or only
    return the table (``show`` False). The 8-character id never wraps or shrinks (it is copied into show / fit); on
    a narrow terminal the preset and run-name columns wrap first."""
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
    if show:
        out.print(t)
    return t


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


def _figure_path(plot: Optional[Path]) -> Optional[Path]:
    """Check a ``--plot FILE`` early (matplotlib installed, a known suffix), before any work is done."""
    if plot is None:
        return None
    from sparse_tui.reports.base import FigureError, check_path, require_matplotlib

    with _refused(FigureError):
        require_matplotlib()
        return check_path(plot)


DeviceOpt = typer.Option(None, "--device", help="Override train.device: auto, cpu, cuda, cuda:N.")
WorkersOpt = typer.Option("auto", "--workers", help="Worker processes: a number, or auto.")
PresetOpt = typer.Option(None, "--preset", help="Only runs of this preset name.")
StatusOpt = typer.Option(None, "--status", help="Only runs with this status.")
JsonOpt = typer.Option(False, "--json", help="Print JSON instead of tables.")
PlotOpt = typer.Option(
    None, "--plot", help='Also write a figure: FILE.png, .svg or .pdf (needs pip install "sparse-tui[plot]").',
    show_default=False,
)
