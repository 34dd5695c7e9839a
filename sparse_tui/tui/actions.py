"""What the console does to the store, as plain functions the main screen runs in thread workers.

Each takes the store and the request's arguments and returns the message that reports the outcome (``Done``,
``Problem``, ``AttentionData``, ``TheoryData``, ``FitDone``); the worker posts it, the main screen applies it on the UI
thread. They use the code paths of the command line: launching is ``runner.start_detached`` (``sparse-tui run
--detach``), resuming ``resume.resume_runs_detached`` (``sparse-tui resume --detach``), fitting
``fitreport.fit_store`` (``sparse-tui fit``), exporting ``export.export`` (``sparse-tui export``), the theory overlay
``models.ode.recorded_curve``, the atlas ``reports.reproduce.reproduce`` (``sparse-tui reproduce``, so both show the
same numbers). Nothing here imports Textual widgets.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from textual.message import Message

from sparse_tui.base.files import WriteError
from sparse_tui.base.numbers import fmt_duration
from sparse_tui.base.plotting import fmt_r2
from sparse_tui.executors import ExecutorError, ExecutorOptions, executor_for
from sparse_tui.export.tables import write_output
from sparse_tui.lifecycle import runner
from sparse_tui.lifecycle.annotate import AnnotateError, check_note, parse_tags
from sparse_tui.lifecycle.resume import resume_runs_detached
from sparse_tui.models.ode import recorded_curve
from sparse_tui.presets.loading import expand
from sparse_tui.reports import curves, figures, panels
from sparse_tui.reports.base import FORMATS
from sparse_tui.reports.listing import status_rows
from sparse_tui.reports.reproduce import Launched, launch_detached, reproduce
from sparse_tui.science import geometry
from sparse_tui.science.fitting import FitError
from sparse_tui.science.phase import cell_note
from sparse_tui.science.theory import PAPER_FITS
from sparse_tui.store import RunStore, StoreError
from sparse_tui.tui.messages import AtlasData, AttentionData, Done, FitDone, LaunchAsked, Problem, TheoryData
from sparse_tui.tui.render import fit as fitview
from sparse_tui.tui.render.attention import render_attention
from sparse_tui.tui.render.geometry import render_geometry


def check_executor(executor: ExecutorOptions) -> None:
    """Refuse to launch while the executor cannot be used (Ray missing, its cluster unreachable: ``ExecutorError``,
    one line; nothing is recorded)."""
    from sparse_tui.base.extras import missing_torch

    problem = missing_torch() or executor_for(executor).probe()  # an install without torch cannot train
    if problem:
        raise ExecutorError(problem)


def launch(store: RunStore, loaded: Any, workers: int | None = None,
           executor: ExecutorOptions = ExecutorOptions()) -> Message:
    """Record the runs of a validated preset and start them in a detached process (the sweep scheduler plans them
    as they start, on ``executor``: docs/CLUSTER.md); the Runs panel then shows them with the cursor on
    the first."""
    check_executor(executor)
    batch_id, ids, pid = runner.start_detached(store, expand(loaded), workers=workers or None, executor=executor)
    return Done(f"launched {loaded.name}: batch {batch_id}, {len(ids)} run(s), pid {pid} "
                f"(log {runner.log_path(store, batch_id)})", switch_to="runs", run_ids=list(ids), pids=[pid])


ATLAS_SIZE = "cpu"  # the console launches the CPU-sized presets (a GPU size: sparse-tui reproduce KEY --size gpu)


def atlas_status(store: RunStore) -> AtlasData:
    """Each atlas entry's stored runs of its CPU preset (``listing.status_rows``: runs of the same configuration,
    whoever trained them), as the atlas screen's list says them."""
    status = {}
    for row in status_rows(store):
        stored = row.stored.get(ATLAS_SIZE) or row.stored.get("gpu")
        v = row.verdict
        word = (v.word + ("*" if v.source == "record" else "")) if v else "—"
        minutes = "—" if row.cpu_minutes is None else f"{row.cpu_minutes:.0f}m" if row.cpu_minutes >= 10 \
            else f"{row.cpu_minutes:.1f}m"
        runs = stored or ("no cpu preset" if not row.entry.built else "")
        status[row.entry.key] = f"{word:<15} {minutes:>5} {runs}".rstrip()  # the verdict and CPU minutes first
    return AtlasData(status=status)


def atlas_detail(store: RunStore, e: Any) -> AtlasData:
    """An atlas entry's description, and ``sparse-tui reproduce``'s report once every run of its CPU preset has a
    result (before: what is missing)."""
    head = [f"{e.figure} ({e.source}, {e.section}): {e.shows}"]
    if e.law:
        pf = PAPER_FITS[e.law]
        head.append(f"paper: T_plateau = {pf.C:g} · " + " · ".join(f"{k}^{v:g}" for k, v in pf.exponents.items()))
    if e.threshold is not None:
        head.append(f"plateau: {e.threshold.text()} (App. D.1)")
    if e.notes:
        head.append(f"notes: {e.notes}")
    if e.measured:
        head.append(f"record: {e.measured} (docs/REPRODUCTION.md)")
    if e.built:
        body = e.built
    elif e.preset(ATLAS_SIZE) is None:
        body = f"no CPU-sized preset; sparse-tui reproduce {e.key} --size gpu"
    else:
        try:
            (out,) = reproduce(store, [e], ATLAS_SIZE, partial=False)
            if out.error is not None:
                raise out.error
            if out.plan.missing:
                body = out.plan.describe() + "\nEnter launches the missing runs."
            else:
                body = out.report.text if out.report is not None else out.why
        except Exception as exc:  # noqa: BLE001 - shown in the panel, the console goes on
            body = f"cannot report: {str(exc).splitlines()[0] if str(exc) else exc!r}"
    return AtlasData(key=e.key, detail="\n".join(head) + "\n\n" + body)


def atlas_launch(store: RunStore, e: Any, executor: ExecutorOptions = ExecutorOptions()) -> Done:
    """The missing runs of an atlas entry's CPU preset, started detached through the runner (as ``launch``):
    ``reproduce`` with ``launch_detached`` as its trainer, as ``sparse-tui reproduce`` trains headless."""
    def train(store: RunStore, plan: Any) -> Launched:
        check_executor(executor)
        return launch_detached(store, plan, executor)

    try:
        (out,) = reproduce(store, [e], ATLAS_SIZE, train=train, reports=False)
    except Exception as exc:  # noqa: BLE001 - a refused launch is a notification, not a crash
        return Done(f"{e.key}: cannot launch: {str(exc).splitlines()[0]}", severity="error")
    got = out.trained
    if got is None:
        return Done(f"{e.key}: every run is already in the store")
    resumed = f"{got.resumed} run(s) resumed; " if got.resumed else ""
    launched = (f"launched {len(got.run_ids)} run(s) of {out.plan.preset} (batch {got.batch_id}, pid {got.pids[-1]})"
                if got.run_ids else "")
    return Done(f"{e.key}: {resumed}{launched}".rstrip("; "), pids=got.pids)


def launch_question(loaded: Any, executor: ExecutorOptions = ExecutorOptions(), store: RunStore | None = None) -> str:
    """What ctrl+l would start, asked before it does: runs, steps, an estimate of the time from earlier runs of the
    preset in the store (seconds per step, one at a time), and where."""
    specs = expand(loaded)
    steps = sum(s.config.train.steps for s in specs)
    text = (f"Launch {loaded.name}: {len(specs)} run(s), {steps:,} training steps in all, on "
            f"{executor_for(executor).where()}?")
    per_step = seconds_per_step(store, loaded.name) if store is not None else None
    if per_step is not None:
        text += f"\nEarlier runs of {loaded.name} here took {per_step * 1e3:.1f} ms a step: about " \
                f"{fmt_duration(per_step * steps)} one at a time (less when runs train side by side)."
    return text


def ask_launch(store: RunStore | None, loaded: Any, executor: ExecutorOptions) -> Message:
    return LaunchAsked(loaded, launch_question(loaded, executor, store))


def seconds_per_step(store: RunStore, preset: str) -> float | None:
    """Seconds per training step of the finished runs of ``preset`` in the store (their duration over their steps),
    None without any."""
    done = [r for r in store.runs(preset=preset, status="finished", reap=False) if r.duration and r.step]
    if not done:
        return None
    return sum(r.duration for r in done) / sum(r.step for r in done)


def archive(store: RunStore, ids: list[str], archived: bool = True) -> Message:
    n = store.set_archived(ids, archived)
    if archived:
        return Done(f"archived {n} run(s): hidden unless the filter says is:archived (A there brings them back)")
    return Done(f"brought {n} run(s) back from the archive")


def annotate(store: RunStore, run_id: str, what: str, text: str) -> Message:
    """Set a run's note or tags (the checks of ``sparse-tui note / tag``)."""
    try:
        if what == "note":
            store.set_note(run_id, check_note(text))
            return Done(f"{run_id}: note {'saved' if text.strip() else 'removed'}")
        tags = parse_tags(text)
        store.set_tags(run_id, tags)
        return Done(f"{run_id}: tags {', '.join(tags) or '(none)'}")
    except AnnotateError as e:  # the user's input: said, not a console error
        return Done(f"{run_id}: {e}", severity="warning")


def resume(store: RunStore, ids: list[str], workers: int | None = None,
           executor: ExecutorOptions = ExecutorOptions()) -> Message:
    """Continue failed / interrupted / queued runs from their latest checkpoint, one detached coordinator per batch."""
    try:
        check_executor(executor)
        started = resume_runs_detached(store, ids, workers=workers or None, executor=executor)
    except StoreError as e:  # the run changed since the table was drawn (it finished, or another resume won)
        return Problem(f"cannot resume: {e}", severity="warning")
    n = sum(len(r) for _, r, _ in started)
    where = "; ".join(f"batch {b} pid {pid}" for b, _, pid in started)
    return Done(f"resuming {n} run(s) from their last checkpoint: {where}", switch_to="runs",
                run_ids=[rid for _, r, _ in started for rid in r], pids=[pid for _, _, pid in started])


def cancel(store: RunStore, ids: list[str]) -> Message:
    """Set the cancel flag: queued runs are cancelled at once, running ones at their trainer's next heartbeat."""
    running = store.request_cancel(ids)
    return Done(f"cancel requested for {len(ids)} run(s)"
                + (f"; {len(running)} running will stop within ~1 s" if running else ""))


def delete(store: RunStore, ids: list[str]) -> Message:
    return Done(f"deleted {store.delete(ids)} run(s)")


def export(store: RunStore, ids: list[str], req: Any) -> Message:
    """Write the runs (oldest first) as the dialog asked (``screens.export.ExportRequest``: format, table or
    per-step metrics, file) to ``req.path`` all or nothing, as ``sparse-tui export --output`` does
    (``export.write_output``): nothing half-written is left behind."""
    recs = sorted((store.get(r) for r in ids), key=lambda r: (r.created_at, r.run_id))
    out = Path(req.path).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        n = write_output(out, store, recs, req.fmt, metrics=req.metrics)
    except (WriteError, RuntimeError) as e:  # cannot write there; no pyarrow for Parquet
        return Problem(str(e))
    return Done(f"exported {n} row(s) to {out}")


def attention(store: RunStore, run_id: str, step: int | None, layer: str | None, head: int, example: int,
              width: int) -> AttentionData:
    """One attention snapshot rendered for the panel: ``step`` None (or gone) is the newest, ``layer`` None the
    first."""
    steps = store.attention_steps(run_id)
    if not steps:
        return AttentionData(run_id, [], -1, [], 1, 1, "", f"run {run_id}: no attention snapshots yet")
    if step not in steps:
        step = steps[-1]
    maps, meta = store.attention(run_id, step)
    layers = sorted(maps, key=lambda k: int(k[1:]) if k[1:].isdigit() else 0)
    if layer not in maps:
        layer = layers[0]
    H, E = maps[layer].shape[:2]
    cfg = store.get(run_id).run_config
    task = cfg.task.kind if cfg is not None else None
    body, info = render_attention(maps, meta, layer, head, example, width, task)
    emb = store.array(run_id, geometry.ARRAY)
    if emb is not None:  # the run's final token embedding under its map (blog 3's geometry view)
        body.append("\n\n")
        body.append_text(render_geometry(emb, width))
    return AttentionData(run_id, steps, step, layers, H, E, body, info)


def theory(store: RunStore, run_ids: list[str]) -> TheoryData:
    """The theory (ODE) overlay of each run, from its stored config (``models.ode.recorded_curve``; None: none, or
    the run was deleted meanwhile)."""
    curves: dict[str, tuple[list[float], list[float]] | None] = {}
    for rid in run_ids:
        try:
            rec = store.get(rid)
        except StoreError:
            curves[rid] = None
            continue
        curves[rid] = recorded_curve(rec.run_config, rec.total_steps)
    return TheoryData(curves)


def fit(store: RunStore, req: Any) -> FitDone:
    """``fitreport.fit_store`` with the request's arguments: the code path (and numbers) of ``sparse-tui fit``."""
    try:
        rep = fitview.run_fit(store, req)
    except (FitError, ValueError) as e:
        return fit_failed(f"fit failed: {str(e).splitlines()[0] if str(e) else e!r}", req)

    info = f"{rep.result.formula()}  R²={fmt_r2(rep.result.r2)}"
    return FitDone(fitview.fit_table(rep, req), fitview.fit_plot(rep), info, report=rep, request=req)


def figure_target(text: str, folder: Path) -> tuple[Path | None, tuple[float, float] | None]:
    """The file and size typed in the figure prompt (``FILE [WxH]``, size in inches; a relative FILE is in
    ``folder``); (None, None) for nothing typed. Raises ``ValueError`` with the reason."""
    parts = text.split()
    if not parts:
        return None, None
    size = None
    if len(parts) > 1 and (m := re.fullmatch(r"(\d+(?:\.\d+)?)x(\d+(?:\.\d+)?)", parts[-1])):
        size = (float(m.group(1)), float(m.group(2)))
        if not (0.5 <= size[0] <= 40 and 0.5 <= size[1] <= 40):
            raise ValueError(f"size {parts[-1]}: width and height must lie between 0.5 and 40 inches")
        parts = parts[:-1]
    path = Path(" ".join(parts)).expanduser()
    if path.is_absolute() and not path.parent.is_dir():
        raise ValueError(f"{path}: folder {path.parent} does not exist")
    path = path if path.is_absolute() else folder / path
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"{path}: the file name must end in {', '.join(FORMATS)}")
    return path, size


def figure(store: RunStore, panel: str, payload: Any, path: Path, size: tuple[float, float] | None = None) -> Message:
    """Write the figure of a panel through ``figures`` (curves: the runs ``payload``, or (runs, group keys); fit:
    the ``FitReport``; phase: the diagram's data; scatter: its points) and say where; ``size`` in inches (curves,
    scatter)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if panel == "curves":
            ids, groups = payload if isinstance(payload, tuple) else (payload, None)
            out = curves.curves_figure(store, ids, path, groups=groups, size=size)
        elif panel == "fit":
            out = figures.fit_figure(payload, path)
        elif panel == "scatter":
            out = panels.scatter_figure(payload, path, size=size)
        else:
            x, y, xs, ys, grid, counts, value = payload
            out = panels.phase_figure(x, y, xs, ys, grid, value, path, note=cell_note(counts))
    except (figures.FigureError, OSError) as e:  # nothing to draw yet, no matplotlib: said, not a console error
        return Done(f"figure not written: {e}", severity="warning")
    return Done(f"wrote {Path(out).resolve()}")


def fit_failed(text: str, req: Any = None) -> FitDone:
    """A fit that could not run: the panel shows ``text`` in red where the table goes."""
    return FitDone(None, {}, text, request=req)
