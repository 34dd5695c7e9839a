"""Commands over the stored runs: ``runs``, ``tag``, ``note``, ``archive``, ``delete``, ``show`` and ``export``."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table
from rich.text import Text

from sparse_tui.base.exitcodes import ExitCode
from sparse_tui.base.numbers import fmt_or
from sparse_tui.base.parse import number
from sparse_tui.cli.common import (
    PlotOpt,
    PresetOpt,
    RunsDirOpt,
    StatusOpt,
    _cell,
    _esc,
    _exit_now,
    _figure_path,
    _one_of,
    _open_store,
    _refused,
    _run_table,
    _say,
    app,
    err,
    fail,
    out,
)
from sparse_tui.cli.listing import compact_table, fits, run_table_model


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


@app.command(short_help="List the runs in the store, newest first (archived ones with --archived).")
def runs(
    runs_dir: Optional[Path] = RunsDirOpt,
    as_json: bool = typer.Option(False, "--json", help="One JSON object per run (a JSON array)."),
    status: Optional[str] = StatusOpt,
    preset: Optional[str] = PresetOpt,
    limit: int = typer.Option(0, "--limit", help="At most this many (newest first); 0 = all."),
    tag: List[str] = typer.Option([], "--tag", help="Only runs with this tag (repeatable: all of them)."),
    archived: bool = typer.Option(False, "--archived", help="List the archived runs (hidden otherwise)."),
    filter_: str = typer.Option("", "--filter", help="The console's filter: words and conditions, e.g. "
                                "'acc>0.9 d=16,32 preset~fig status:failed'."),
) -> None:
    """List the runs in the store, newest first (archived runs only with --archived). When the full table would wrap,
    the console's columns: one line per run."""
    from sparse_tui.store import STATUSES

    _one_of("--status", status, STATUSES)
    if limit < 0:
        raise fail(f"--limit: must be >= 0 (0 = all), got {limit}")
    store = _open_store(runs_dir)
    everyone = store.runs()  # one read: the listing is filtered from it, the forecasts' peers are all of it
    tags = set(tag) if isinstance(tag, (list, tuple)) else set()  # (called as a function: typer's OptionInfo)
    recs = [r for r in everyone if (not status or r.status == status) and (not preset or r.preset == preset)
            and tags <= set(r.tags) and r.archived == (archived is True)]
    _store_warnings(store)
    if limit:
        recs = recs[:limit]
    fc = _forecasts(recs, everyone)
    query = filter_ if isinstance(filter_, str) else ""
    last = {r.run_id: store.last_metrics(r.run_id) for r in recs if not r.final}
    model = run_table_model(recs, last, fc, query, archived is True) if query or not as_json else None
    if model is not None and model.filter_errors:
        raise fail(f"--filter: {model.filter_errors[0]}")
    if query:
        shown = set(model.visible_ids)
        recs = [r for r in recs if r.run_id in shown]
    if as_json:
        from sparse_tui.export.tables import run_row

        # one run a line: json's C encoder (indent= falls back to the pure-Python one: 1.6 s of 2,000 runs)
        rows = [json.dumps(_finite({**run_row(r, store), "forecast": fc[r.run_id]}), allow_nan=False) for r in recs]
        sys.stdout.write("[\n" + ",\n".join(rows) + "\n]\n" if rows else "[]\n")
        return
    cols = ("run_id", "preset", "run", "status", "step", "plateau", "forecast", "test/loss", "test/acc", "device")
    annotated = any(r.tags or r.note for r in recs)
    title = _esc(f"{len(recs)} run(s) in {store.path}" + (f" · filter '{query}'" if query else ""))
    full = _run_table(title, recs, cols + (("tags / note",) if annotated else ()),
                      final=lambda r: {**(r.final or last.get(r.run_id, {})),  # a failed run's stored values, not "-"
                                       "_forecast": fc[r.run_id]}, show=False)
    out.print(full if fits(out, full) else compact_table(title, model, out.width))


def _finite(v):
    """A JSON value with every NaN / infinity replaced by null (JSON has none; a reader's parser would refuse the
    file): a non-finite number is no measurement to show."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def _forecasts(recs, everyone) -> dict:
    """Each run's emergence forecast (forecast.py) from the store's runs of its preset: one fit per preset; the rows
    it cannot use are named on stderr (their forecast says why)."""
    from sparse_tui.science.forecast import forecasts

    fc = forecasts(recs, everyone)  # the peers of a listed run may be filtered out of the listing
    for w in fc.warnings:
        _say(f"warning: {w}")
    return fc


def _records(store, run_ids: list[str]) -> list:
    from sparse_tui.store import StoreError

    with _refused(StoreError):
        return [store.get(r) for r in dict.fromkeys(run_ids)]


def _ended_records(store, run_ids: list[str]) -> list:
    """The runs named, none of them queued or running (exit 2 otherwise: archive and delete wait for the end)."""
    from sparse_tui.lifecycle.annotate import undeletable

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
    from sparse_tui.lifecycle.annotate import AnnotateError, edit_tags

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
    from sparse_tui.lifecycle.annotate import AnnotateError, check_note

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
    _say(f"{rec.run_id}: note {'saved' if value else 'removed'}")


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
    _say(f"{'brought back' if undo else 'archived'} {n} run(s)")


@app.command(short_help="Delete ended runs with their metrics (asks first, naming them).")
def delete(
    run_ids: List[str] = typer.Argument(..., help="Runs (ids or unique prefixes).", show_default=False),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask (needed without a terminal)."),
    runs_dir: Optional[Path] = RunsDirOpt,
) -> None:
    """Delete runs with their metrics and attention maps, after a question that names them (the console's rule):
    queued or running runs are refused (cancel them first); without a terminal, --yes is required."""
    from sparse_tui.lifecycle.annotate import delete_question

    store = _open_store(runs_dir)
    recs = _ended_records(store, list(run_ids))
    if not yes:
        if not sys.stdin.isatty():
            raise fail("delete: not a terminal to ask in; pass --yes to delete without asking")
        err.print(_esc(delete_question(recs)).replace("\\n", "\n"), markup=False)
        if not typer.confirm("Delete?", default=False, err=True):
            _say("nothing deleted")
            raise typer.Exit(int(ExitCode.OK))
    n = store.delete([r.run_id for r in recs])
    _say(f"deleted {n} run(s)")


def _checkpoint_line(store, rec) -> str:
    """What ``show`` says of a run's checkpoint: the step ``resume`` would load (the same check), or why none."""
    from sparse_tui.lifecycle import runner
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
        _say(line)


MAX_TIMEOUT = 86400.0  # export --timeout: seconds, at most a day


def _figure_size(size: Optional[str]) -> Optional[tuple[float, float]]:
    """``--size WxH`` in inches, checked before any work is done."""
    if size is None:
        return None
    try:
        return figure_size(size)
    except ValueError:
        raise fail(f"--size: WxH in inches between 0.5 and 40 (7x4), got {_esc(repr(size[:60]))}") from None


def figure_size(text: str) -> tuple[float, float]:
    """``--size WxH`` as typed: (W, H) in inches, each in [0.5, 40] (base/parse.py); ValueError otherwise."""
    w, x, h = text.strip().partition("x")
    if not x:
        raise ValueError("--size: expected WxH")
    return float(number(w, "--size W", lo=0.5, hi=40)), float(number(h, "--size H", lo=0.5, hi=40))


def timeout_seconds(text: str) -> float:
    """``export --timeout S`` as typed: seconds in (0, a day] (threading's join() overflows near 1e10 s, and a day
    is more than any MLflow call should take); ValueError in one line otherwise."""
    return float(number(text, "--timeout", lo=0, above=True, hi=MAX_TIMEOUT))


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
    from sparse_tui.base.plotting import chart
    from sparse_tui.store import StoreError

    if width < 0:
        raise fail(f"--width: must be >= 0 (0 = terminal width), got {width}")
    fig_path = _figure_path(plot)
    inches = _figure_size(size)
    if len(run_ids) > 1 and fig_path is None:
        raise fail("show: give one run, or several with --plot FILE")
    if mean_by is not None and fig_path is None:
        raise fail("--mean-by: only with --plot FILE (it groups the runs' curves in the figure)")
    store = _open_store(runs_dir)
    store.reap()
    with _refused(StoreError):
        recs = [store.get(r) for r in run_ids]
    if fig_path is not None:
        _show_figures(store, recs, fig_path, inches, mean_by)
        if len(recs) > 1:
            return
    rec = recs[0]
    t = Table("key", "value", title=f"run {rec.run_id}", show_header=False)
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
        ("swept", ", ".join(f"{k}={v}" for k, v in rec.swept.items())),
    ]
    final = rec.final or store.last_metrics(rec.run_id)
    rows += [(f"final {k}", fmt_or(final[k])) for k in sorted(final) if "/H" not in k]
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
            fixed = (0.0, 1.0) if title.startswith(("test accuracy", "attention")) else None  # fractions: [0, 1]
            out.print(Text.from_ansi(chart(curves, title=title, log_y=log_y, width=w, vline=rec.plateau_step,
                                           ylim=fixed)))

def _show_figures(store, recs: list, fig_path: Path, inches, mean_by: Optional[str]) -> None:
    """``show --plot FILE``: the runs' curves in FILE and, for token-input runs, their final embeddings in
    FILE_embedding (blog 3's geometry view)."""
    from sparse_tui.base.files import problem
    from sparse_tui.reports.curves import curves_figure
    from sparse_tui.reports.entries.blog3_geometry import geometry_figure
    from sparse_tui.reports.figures import FigureError
    from sparse_tui.science.geometry import ARRAY

    embedded = [r.run_id for r in recs if store.array(r.run_id, ARRAY) is not None]
    geo_path = fig_path.with_name(f"{fig_path.stem}_embedding{fig_path.suffix}")
    why = problem(geo_path) if embedded else None  # every output path is checked before the first is written
    if why:
        raise fail(f"--plot {_esc(geo_path)} (the embedding figure beside {_esc(fig_path.name)}): {why}")
    with _refused(FigureError):
        curves_figure(store, [r.run_id for r in recs], fig_path, size=inches,
                      groups=[k.strip() for k in mean_by.split(",") if k.strip()] if mean_by else None)
        _say(f"wrote {fig_path}")
        if embedded:
            geometry_figure(store, embedded, geo_path)
            _say(f"wrote {geo_path}")


def _system_rows(store, run_id: str) -> list[tuple[str, str]]:
    """``show``'s rows of the run's ``sys/*`` metrics (sparse_tui/base/sysmetrics.py, recorded at its evaluations): the
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
    preset: Optional[str] = PresetOpt,
    status: Optional[str] = StatusOpt,
    to: Optional[str] = typer.Option(
        None, "--to", help="tensorboard DIR: event files (scalars, hparams, attention images); mlflow [URI]: an MLflow "
        "tracking store (default sqlite:///RUNS_DIR/mlflow.db; a path: X.db, or a folder for its mlflow.db). The first "
        "argument is DIR / URI / path, then the runs.", show_default=False),
    update: bool = typer.Option(False, "--update", help="--to mlflow: bring runs exported before up to date (tags, "
                                "note, new metric points, status) instead of skipping them."),
    mkdir: bool = typer.Option(False, "--mkdir", help="--to: create the target's missing parent folders."),
    timeout: Optional[str] = typer.Option(None, "--timeout", help="--to mlflow: seconds each MLflow call may take "
                                          "(default 30, at most a day).", show_default=False),
) -> None:
    """Export the run table (or the per-step metrics) as CSV, JSON lines or Parquet, or (--to) write the runs as
    TensorBoard event files or MLflow runs."""
    from sparse_tui.base.files import WriteError, problem
    from sparse_tui.export.tables import FORMATS, export, write_output
    from sparse_tui.store import STATUSES

    _one_of("--status", status, STATUSES)
    if to is not None:
        how = dict(update=update, mkdir=mkdir)
        if timeout is not None:  # else the bridge's own default (bridges.TIMEOUT)
            try:
                how["timeout"] = timeout_seconds(timeout)
            except ValueError as e:
                raise fail(f"{e} (seconds)") from None
        _export_to(to, list(run_ids or []), runs_dir, preset, status, output, how)
        return
    for flag, given in (("--update", update), ("--mkdir", mkdir), ("--timeout", timeout is not None)):
        if given:
            raise fail(f"{flag}: only with --to tensorboard / --to mlflow")
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
            _say(f"wrote {n} row(s) to {output}")
        else:
            export(store, recs, fmt, sys.stdout.buffer if fmt == "parquet" else sys.stdout, metrics=metrics)
    except WriteError as e:
        raise fail(str(e), ExitCode.RUN_FAILED if e.disk_full else ExitCode.USAGE) from None
    except RuntimeError as e:  # parquet without pyarrow
        raise fail(str(e)) from None


def _export_to(to: str, args: list[str], runs_dir: Optional[Path], preset: Optional[str], status: Optional[str],
               output: Optional[Path], how: dict) -> None:
    """``export --to tensorboard DIR [RUN…]`` / ``--to mlflow [URI | PATH] [RUN…]`` (bridges.py)."""
    from sparse_tui.export.bridges import BRIDGES, BridgeError, export_to

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
        line = export_to(to, store, recs, dest, say=_say, **how)
    except BridgeError as e:  # a full disk is exit 1, as for training (docs/USAGE.md); the rest is a usage error
        exit_ = fail(str(e), ExitCode.RUN_FAILED if e.disk_full else ExitCode.USAGE)
        if e.stuck:  # a call still hangs in its thread: leave without waiting for it
            _exit_now(exit_.exit_code)
        raise exit_ from None
    _say(line)


def _is_destination(arg: str) -> bool:
    """Whether the first argument after ``--to mlflow`` is where to write (a URI or a path), not a run id: it has a
    scheme, a path separator or a .db suffix, or names something that exists."""
    return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", arg)) or "/" in arg or arg.endswith(".db") \
        or arg.startswith(("~", ".")) or os.path.exists(arg)
