"""The science commands: ``theory``, ``fit``, ``reproduce`` and ``presets`` (list and copy)."""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from sparse_tui.base.exitcodes import ExitCode
from sparse_tui.cli.common import (
    DeviceOpt,
    JsonOpt,
    PlotOpt,
    PresetOpt,
    RunsDirOpt,
    WorkersOpt,
    _cell,
    _Commands,
    _device_flag,
    _esc,
    _figure_path,
    _one_of,
    _open_store,
    _preflight,
    _preset_refused,
    _presets_dir,
    _refused,
    _runs_dir,
    _say,
    _store_if_any,
    _train_batch,
    _workers_flag,
    app,
    err,
    fail,
    out,
)


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
    as_json: bool = JsonOpt,
    extra: List[str] = typer.Argument(None, hidden=True),
) -> None:
    """Plateau length of the reduced gradient flow (paper Eqs. 12-14, 17-21) vs the closed-form forecast.

    One point (--d 64 --T 512 [--B 1 --p 0]) or a grid (--grid d=16,32,64 T=64,256,1024 B=1,2,4) with a power-law
    fit of the grid beside the forecast exponents (d +0.5, T +1, B -1, f -1) and the paper's fit. Read sqrt(dT) in
    the paper as sqrt(d)*T (docs/THEORY.md).
    """
    from sparse_tui.reports import theory_grid
    from sparse_tui.science.fitting import FitError

    items = list(grid) + list(extra or [])  # --grid d=.. T=.. : later items arrive as extra arguments
    if extra and not grid:
        raise fail(f"unexpected argument(s): {' '.join(extra)}")
    try:
        if items:
            if d is not None or T is not None:
                raise FitError("give either --grid or --d/--T, not both")
            res = theory_grid.theory_grid(items, threshold=threshold, paper=None if paper == "none" else paper)
            if as_json:
                sys.stdout.write(json.dumps(theory_grid.theory_grid_dict(res), indent=1) + "\n")
            else:
                out.print(theory_grid.format_theory_grid(res), markup=False)
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
        pt = theory_grid.theory_point(int(d), int(T), int(B), p, threshold=threshold)
    except (FitError, ValueError) as e:
        raise _fit_error(e) from None
    if as_json:
        sys.stdout.write(json.dumps(pt, indent=1) + "\n")
    else:
        out.print(theory_grid.format_theory_point(pt), markup=False)


@app.command(short_help="Fit a power law to the plateau lengths of finished runs; compare with theory.")
def fit(
    run_ids: List[str] = typer.Argument(None, help="Runs to fit (ids or unique prefixes; default: all selected)."),
    runs_dir: Optional[Path] = RunsDirOpt,
    preset: Optional[str] = PresetOpt,
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
    as_json: bool = JsonOpt,
    plot: Optional[Path] = PlotOpt,
) -> None:
    """Fit a power law (App. D.2) to the plateau lengths of finished runs in the store and compare it with the
    theory's forecast and the paper's fit. Runs that never emerged are reported as censored. --threshold X re-reads
    every plateau from the stored curves at the absolute value X instead (no retraining). --plot FILE also
    writes the plateau against each variable on log-log axes with the fit and the paper's law."""
    from sparse_tui.reports import fitreport
    from sparse_tui.science.fitting import FitError

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
        _say(f"wrote {fig_path}")


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
    workers: str = WorkersOpt,
    device: Optional[str] = DeviceOpt,
    threshold: Optional[str] = ThresholdOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the reports as JSON."),
    budget: Optional[str] = typer.Option(None, "--budget", help="Spend this much time (30m, 1h, 90s) where it buys the "
                                         "most precision on the panel's exponents (chosen runs and seeds, in order, "
                                         "steps capped at the forecast, re-planned as runs end), then report.",
                                         show_default=False),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be trained (with --budget: the plan, its "
                                 "projected time and each exponent's projected interval width); train nothing."),
    verdict_now: bool = typer.Option(False, "--verdict-now", help="Give the verdict over the points stored even while "
                                     "some still train in another process (default: the report says how many and "
                                     "withholds the verdict)."),
) -> None:
    """Reproduce a figure of the paper: train the runs of its preset that the store lacks (runs of the same
    configuration are reused, whoever trained them), fit or summarise them, print the paper's numbers beside the
    measured ones, and with --plot FILE draw the figure. --threshold X fits plateaus re-read from the stored curves
    at X (panels with a fitted law). --list prints the atlas of every figure."""
    from sparse_tui import atlas
    from sparse_tui.presets.catalog import resolve
    from sparse_tui.reports import planner
    from sparse_tui.reports.reproduce import reproduce as run_reproduce
    from sparse_tui.store import StoreError

    if presets_dir is not None:
        presets_dir = _presets_dir(presets_dir)
    if list_:
        if name is not None:
            raise fail("reproduce --list: takes no figure name")
        return _reproduce_list(runs_dir, presets_dir, as_json)
    if name is None:
        raise fail("reproduce: name a figure (e.g. fig15) or pass --list")
    _one_of("--size", size, ("auto",) + atlas.SIZES)
    _device_flag(device)
    n_workers = _workers_flag(workers)
    fig_path = _figure_path(plot)
    chosen, x = _reproduce_entries(name, threshold)
    if fig_path is not None:  # every figure file is checked before any training, and before the first is written
        _plot_files_writable(fig_path, chosen)
    if size == "auto":
        size = _auto_size()
    with _refused(atlas.AtlasError), _preset_refused():  # every named preset loads before the store is opened
        for entry in chosen:
            planner.plan(None, entry, size, presets_dir)
    if budget is not None or dry_run:
        _reproduce_planned(chosen, size, presets_dir, runs_dir, budget, dry_run, device, fig_path, as_json)
    store = _reproduce_store(runs_dir, chosen, size, presets_dir)

    def said(p) -> None:
        _say(p.describe())
        _say(resolve(p.preset, presets_dir).line())

    def train(store, p) -> ExitCode:  # this process coordinates, as `run --headless`
        todo, again = p.to_train(), [p.specs[i] for i in sorted(p.resumable)]
        ex = _preflight(None, todo + again, device, p.preset)
        with _refused(StoreError):  # an interrupted or failed run continues in its own row (its checkpoint checked)
            batches = planner.resume_batches(store, p)
        how = dict(workers=n_workers, device=device, then_exit=False, table=not as_json)
        codes = [_train_batch(store, ex, specs, batch_id=batch_id, resume=ids, **how)
                 for batch_id, ids, specs in batches]
        return max([*codes, _train_batch(store, ex, todo, **how) if todo else ExitCode.OK])

    outcomes = run_reproduce(store, chosen, size, presets_dir=presets_dir, threshold=x, train=train, said=said,
                             verdict_now=verdict_now, waiting=_waiting)
    raise typer.Exit(int(_print_outcomes(store, outcomes, chosen, x, fig_path, as_json)))


def _reproduce_entries(name: str, threshold: Optional[str]) -> tuple[list, Optional[float]]:
    """The atlas entries ``name`` names and the --threshold to re-read their plateaus at (only where one of them
    fits a law); one line and exit 2 otherwise."""
    from sparse_tui import atlas
    from sparse_tui.reports.fitreport import parse_threshold
    from sparse_tui.reports.library import refits
    from sparse_tui.science.fitting import FitError

    with _refused(atlas.AtlasError, FitError):
        chosen = atlas.find(name)
        x = parse_threshold(threshold)
        if x is not None and not any(refits(e) for e in chosen):
            raise atlas.AtlasError(f"--threshold: {name} has no panel with a fitted law (its plateaus are not "
                                   "fitted; sparse-tui reproduce --list shows each kind)")
    return chosen, x


def _plot_files_writable(fig_path: Path, chosen: list) -> None:
    from sparse_tui.base.files import problem
    from sparse_tui.reports.library import plot_paths

    for path in plot_paths(fig_path, chosen):
        if why := problem(path):
            raise fail(f"--plot {path}: {why}")


def _auto_size() -> str:
    """--size auto: gpu when CUDA is available; cpu without torch (no GPU to train on: what the store holds is
    reported, training refused)."""
    from sparse_tui.base.extras import missing_torch

    if missing_torch():
        return "cpu"
    import torch

    return "gpu" if torch.cuda.is_available() else "cpu"


def _waiting(entry) -> None:
    _say(f"{entry.key}: another reproduce of it is training on this store; waiting for it (its runs are then "
         "reused, never trained twice)")


def _reproduce_list(runs_dir: Optional[Path], presets_dir: Optional[Path], as_json: bool) -> None:
    """``reproduce --list``: the atlas with each entry's verdict, cost and stored runs (``reports.listing``)."""
    from sparse_tui.reports.listing import list_json, list_lines, status_rows

    store = _store_if_any(runs_dir)
    rows = status_rows(store, presets_dir, with_verdicts=True)
    if as_json:
        sys.stdout.write(json.dumps(list_json(rows, store is not None), indent=1) + "\n")
        return
    where = f"runs in {store.path}" if store is not None else "no run store here"
    width = max(60, min(shutil.get_terminal_size((80, 24)).columns, 120))
    sys.stdout.write("\n".join([f"figure atlas: {len(rows)} entries; {where}",
                                *list_lines(rows, store is not None, width)]) + "\n")


def _print_outcomes(store, outcomes: list, chosen: list, x: Optional[float], fig_path: Optional[Path],
                    as_json: bool) -> ExitCode:
    """``reproduce``'s output: each entry's report (or why there is none) and its figure; the exit code."""
    from sparse_tui.reports.fitreport import json_safe
    from sparse_tui.reports.library import draw, plot_paths, refits

    code = max([ExitCode.OK, *(o.trained for o in outcomes if o.trained is not None)])
    paths = plot_paths(fig_path, chosen) if fig_path is not None else [None] * len(outcomes)
    for o, path in zip(outcomes, paths):
        e = o.plan.entry
        if o.why:
            err.print(f"{e.key}: {o.why}", markup=False)
            code = max(code, ExitCode.RUN_FAILED)
            continue
        if x is not None and not refits(e):
            err.print(f"{e.key}: a {e.kind} entry, reported at its preset's threshold (--threshold re-reads fitted "
                      "laws only)", markup=False)
        if o.error is not None:
            raise _fit_error(o.error) from None
        if not as_json:
            out.print(o.report.text, markup=False)
            out.print("")
        if path is not None:
            from sparse_tui.reports.figures import FigureError

            with _refused(FigureError):
                draw(store, o.report, path)
            _say(f"wrote {path}")
    if as_json:
        reports = [o.report.to_dict() for o in outcomes if o.report is not None]
        sys.stdout.write(json.dumps(json_safe(reports), indent=1) + "\n")
    return code


presets_app = typer.Typer(cls=_Commands, add_completion=False, rich_markup_mode=None, invoke_without_command=True,
                          help="List the presets (bundled and your own), grouped; 'presets copy' writes an editable "
                          "copy.")
app.add_typer(presets_app, name="presets", short_help="List the presets, grouped, with the figure each reproduces; "
              "copy one to edit.")


PresetsDirOpt = typer.Option(None, "--presets-dir", help="Your own preset files (listed first; default ./presets).",
                             show_default=False)


@presets_app.callback()
def presets(ctx: typer.Context, presets_dir: Optional[Path] = PresetsDirOpt) -> None:
    """Every preset sparse-tui ships and your own (./presets), grouped: yours, checks, theory, paper (CPU), paper
    (GPU), blogs; each with the figure it reproduces and the time its header records, with the load, machine and date
    it was measured at ("-": none measured), and how load scales it.
    `sparse-tui run NAME` runs one; `sparse-tui presets copy NAME [DIR]` copies one to edit."""
    if ctx.invoked_subcommand is not None:
        return
    from sparse_tui.presets.catalog import bundled_dir, catalogue
    from sparse_tui.presets.timing import LOAD_RULE

    presets_dir = _presets_dir(presets_dir)
    t = Table(title=f"presets (bundled: {_esc(bundled_dir())}; yours: {_esc(presets_dir)}/)", title_justify="left")
    for col in ("group", "preset", "reproduces", "time", "measured at"):  # names and times never split
        t.add_column(col, no_wrap=col not in ("reproduces", "measured at"))
    group = None
    for item in catalogue(presets_dir):
        if item.group != group and group is not None:
            t.add_section()
        t.add_row(_cell(item.group if item.group != group else ""), _cell(item.name), _cell(item.figure or "-"),
                  _cell(item.timing.duration), _cell(item.timing.context() if item.timing.duration != "-" else ""))
        group = item.group
    out.print(t)
    out.print(f"Times are the presets' headers' (presets/timing.py). {LOAD_RULE}", markup=False)
    out.print("sparse-tui run NAME --headless runs one; sparse-tui presets copy NAME [DIR] writes a copy to edit "
              "(default ./presets, looked up before the bundled one)", markup=False)


@presets_app.command("copy")
def presets_copy(
    name: str = typer.Argument(..., help="A preset name (sparse-tui presets lists them).", show_default=False),
    dest: Optional[Path] = typer.Argument(None, help="Folder to write NAME.toml into (default: ./presets).",
                                          show_default=False),
    presets_dir: Optional[Path] = PresetsDirOpt,
) -> None:
    """Write an editable copy of a preset (a bundled or your own preset's name, or a .toml file that is a valid
    preset) as DIR/NAME.toml; an existing file is never overwritten."""
    from sparse_tui.presets.catalog import CatalogError, copy, resolve, same_file

    presets_dir = _presets_dir(presets_dir)
    with _refused(CatalogError):
        target = copy(name, dest, presets_dir)
    out.print(f"wrote {_esc(target)}: edit it, then: sparse-tui run {_esc(target)} --headless", markup=False)
    try:
        used = resolve(target.stem, presets_dir)
    except CatalogError:  # a copy outside the presets folder of a preset that has no name there
        _say(f"note: sparse-tui run {target.stem} finds no preset of that name here: name the file ({target}) to "
             "train the copy")
        return
    if not same_file(used.path, target):  # `run NAME` would not read this copy: say which file it reads
        whose = "your own" if used.origin == "yours" else "bundled"
        _say(f"warning: sparse-tui run {target.stem} reads {used.path} ({whose}), not {target}: name the file "
             f"({target}) to train the copy")


def _reproduce_planned(chosen, size, presets_dir, runs_dir, budget, dry_run, device, fig_path, as_json) -> None:
    """``reproduce KEY --budget T [--dry-run]`` and ``reproduce KEY --dry-run``: the budget's plan (printed, or trained
    re-planned as runs end, then the entry's usual report and verdict), or the runs a reproduce would train."""
    from contextlib import nullcontext

    from sparse_tui import atlas
    from sparse_tui.cli.train import _run_budget
    from sparse_tui.reports import planner
    from sparse_tui.reports.library import draw, report
    from sparse_tui.store.locks import held

    if budget is not None and len(chosen) != 1:
        raise fail(f"--budget: name one panel ({', '.join(e.key for e in chosen)})")
    store = _store_if_any(runs_dir)
    for entry in chosen:
        with _refused(atlas.AtlasError), _preset_refused():
            p = planner.plan(store, entry, size, presets_dir)
        _say(p.describe())
        if budget is None:
            continue
        if not entry.law:
            raise fail(f"--budget: {entry.key} has no fitted law: a budget buys precision on a law's exponents")
        # the entry's reproduce lock, as a plain reproduce holds it: two at once never train a point twice
        if not dry_run:
            _open_store(runs_dir, create=True)  # the lock lives in the store's folder
        with nullcontext() if dry_run else held(_runs_dir(runs_dir), f"reproduce-{entry.key}"):
            ids = _run_budget(p.specs, p.preset, budget, dry_run, runs_dir, device, None, p.preset, then_exit=False,
                              taken=sorted(p.reused))
        if dry_run:
            break
        store = _open_store(runs_dir)
        found = planner.plan_run_ids(store, planner.plan(store, entry, size, presets_dir))
        run_ids = list(dict.fromkeys(found + ids))
        rep = report(store, entry, [i for i in run_ids if store.get(i).status == "finished"])
        if as_json:
            from sparse_tui.reports.fitreport import json_safe

            sys.stdout.write(json.dumps(json_safe([rep.data]), indent=1) + "\n")
        else:
            out.print(rep.text, markup=False)
        if fig_path is not None:
            from sparse_tui.reports.figures import FigureError

            with _refused(FigureError):
                draw(store, rep, fig_path)
            _say(f"wrote {fig_path}")
    raise typer.Exit(0)


def _reproduce_store(runs_dir: Optional[Path], chosen, size: str, presets_dir: Optional[Path]):
    """The store ``reproduce`` trains into; a read-only one is used when it holds every run the entries need
    (``planner.read_only_problem``: then it only reports)."""
    from sparse_tui import atlas
    from sparse_tui.reports.planner import read_only_problem
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
        why = read_only_problem(store, chosen, size, presets_dir)
    if why:
        raise fail(why)
    return store
