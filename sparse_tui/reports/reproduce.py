"""``sparse-tui reproduce``: the atlas (``sparse_tui.atlas``) put to work; the console's atlas uses the same.

* ``status_rows`` / ``list_lines`` / ``list_json``: one row per atlas entry for ``reproduce --list``: its verdict
  (computed from the store's runs where it holds all of them, else the record's), cost, stored runs, figure.
* ``match_runs``: the store's runs whose configuration equals a preset's run (every key but the preset's name,
  description and tags) and whose status is a result (finished, or diverged: training is seeded, it would diverge
  again), so that a figure reuses what any earlier ``run``, ``reproduce`` or console launch trained.
* ``plan``: an entry at one size against the store: its runs, those reused, those to train. The CLI trains the rest
  through the runner (``runner.coordinate``, as ``run --headless``); the console through ``runner.start_detached``.
* ``report``: the paper beside the measurement, by the function the entry names (``Entry.report``) or its kind's:
  ``law_report`` (fit of ``entry.fit_vars`` with the entry's law, exponents against their targets, plateau per grid
  point against the law), ``curves_report`` (plateaus and the transition's sharpness), ``p_table_report`` (Fig. 3
  right) and the entries' own (one per figure of the reduced dynamics, the tables and curves of the recall and blog
  entries). ``draw`` writes the figure the entry names (``Entry.plot``, in ``figures``).

No torch, no textual at import.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from pydantic import ValidationError

from sparse_tui.atlas import SIZES, AtlasError, Entry, entries, records
from sparse_tui.atlas.paper_recall import FIG16_TRAIN_LOSS
from sparse_tui.lifecycle.estimate import Projection, project_h100
from sparse_tui.presets.catalog import CatalogError, resolve
from sparse_tui.presets.loading import config_from_json, config_get, expand, load_preset
from sparse_tui.reports import figures
from sparse_tui.reports import verdict as verdicts
from sparse_tui.science import geometry
from sparse_tui.science.phase import cell_note, phase_grid, sweep_axes
from sparse_tui.training.checkpoint import has_checkpoint

# A run recorded with one of these statuses is a result: reused, never trained again (a diverged run diverges
# again: training is seeded).
REUSED = ("finished", "diverged")
_NOT_CONFIG = ("name", "description", "tags")
# Associative recall "proper" (ours; the reports of Figs. 4 left and 17): the first test accuracy >= this. Copying
# any value of the context already scores 1/N_pairs, above App. D.1's 5%.
RECALL_LEVEL = 0.6


def config_key(config: dict) -> str:
    """A run's configuration as canonical JSON, without the preset's name, description and tags."""
    return json.dumps({k: v for k, v in config.items() if k not in _NOT_CONFIG}, sort_keys=True)


def _canonical(config: dict) -> dict:
    """A stored config as today's schema writes it: a field added since the run was recorded takes its default
    (which is what the run trained with), so adding a field does not orphan the store's runs. A config the schema
    no longer accepts is kept as stored (it then matches nothing)."""
    try:
        return config_from_json(config).model_dump(mode="json")
    except ValidationError:
        return config


def index_runs(store: Any) -> dict[str, list[Any]]:
    """The store's runs whose status is a result (``REUSED``), by ``config_key`` of their canonical config."""
    by_key: dict[str, list[Any]] = {}
    for r in store.runs(status=list(REUSED)):
        by_key.setdefault(config_key(_canonical(r.config)), []).append(r)
    return by_key


def match_runs(store: Any, specs: Sequence[Any], index: dict[str, list[Any]] | None = None
               ) -> tuple[dict[int, Any], list[int]]:
    """For each spec (``presets.RunSpec``) the newest store run of the same configuration whose status is a result
    (``REUSED``; finished before diverged). ``index``: ``index_runs(store)`` read once for many calls. Returns
    ({spec index: RunRecord}, [indices of specs with none])."""
    by_key = index_runs(store) if index is None else index
    found: dict[int, Any] = {}
    missing: list[int] = []
    for i, spec in enumerate(specs):
        recs = by_key.get(config_key(spec.config.model_dump(mode="json")), [])
        recs = sorted(recs, key=lambda r: (r.status != "finished", -r.created_at))
        if recs:
            found[i] = recs[0]
        else:
            missing.append(i)
    return found, missing


def load_specs(entry: Entry, size: str, presets_dir: Path | None = None) -> tuple[Any, list[Any]]:
    """The loaded preset of ``entry`` at ``size`` and its runs. Raises ``AtlasError`` (no such size, file missing) or
    ``presets.PresetError``."""
    name = entry.preset(size)
    if name is None:
        sizes = ", ".join(s for s in SIZES if entry.preset(s)) or "none"
        raise AtlasError(f"{entry.key}: no {size}-sized preset (sizes: {sizes})")
    try:
        path = resolve(name, presets_dir).path  # ./presets/NAME.toml of the user's own, else the bundled one
    except CatalogError as e:
        raise AtlasError(f"{entry.key}: {e}") from None
    loaded = load_preset(path)
    return loaded, expand(loaded)


@dataclass
class StatusRow:
    entry: Entry
    stored: dict[str, str]  # size -> "12/30" finished runs of that preset in the store, "" when unknown
    verdict: "verdicts.Verdict | None" = None  # computed from the store's runs (``with_verdicts``), else the record's
    cpu_minutes: float | None = None  # the stored CPU runs' summed wall time, else the record's
    gpu_projection: "Projection | None" = None  # the GPU preset's projected time on one H100 (estimate.project_h100)
    firmness: Any = None  # firmness.Firmness of the verdict: the stored runs' bootstrap, else what the preset says
    environment: dict[str, Any] | None = None  # what produced the verdict's runs (the store's), else the record's


def status_rows(store: Any | None, presets_dir: Path | None = None, only: Iterable[Entry] | None = None,
                with_verdicts: bool = False) -> list[StatusRow]:
    """Every atlas entry (or ``only``) with, per size, how many of its preset's runs the store holds as results.
    ``with_verdicts``: where the store holds every run of the entry's CPU preset, its verdict (``verdict.verdict``
    of its report) and the runs' summed wall time; elsewhere the record's (``Entry.verdict``, ``Entry.cpu_minutes``)."""
    rows = []
    index = index_runs(store) if store is not None else {}
    for e in (list(only) if only is not None else entries()):
        stored: dict[str, str] = {}
        row = StatusRow(e, stored)
        if e.preset("gpu") not in (None, e.preset("cpu")) and not e.built:
            try:
                row.gpu_projection = project_h100(load_specs(e, "gpu", presets_dir)[1])
            except Exception:  # noqa: BLE001 - a preset that cannot be projected shows "—" (its size shows why)
                pass
        for size in SIZES:
            if e.preset(size) is None or store is None or e.built:
                continue
            if size == "gpu" and e.preset("gpu") == e.preset("cpu"):
                continue
            try:
                _, specs = load_specs(e, size, presets_dir)
            except AtlasError:
                stored[size] = "preset missing"
                continue
            except Exception:  # a broken preset is shown, not fatal for the listing
                stored[size] = "preset invalid"
                continue
            found, _ = match_runs(store, specs, index)
            stored[size] = f"{len(found)}/{len(specs)}"
            if with_verdicts and size == "cpu" and found and len(found) == len(specs):
                ids = [found[i].run_id for i in sorted(found)]
                try:
                    rep = report(store, e, ids)
                    row.verdict, row.firmness, row.environment = rep.verdict, rep.firmness, rep.data["environment"]
                except Exception as ex:  # noqa: BLE001 - a report that fails is listed, not fatal
                    row.verdict = verdicts.Verdict("not reproduced", f"the report failed: {ex}")
                row.cpu_minutes = sum(found[i].duration or 0.0 for i in found) / 60
        if row.verdict is None:
            row.verdict = recorded_verdict(e)
        if row.firmness is None:
            row.firmness = _recorded_firmness(e, presets_dir)
        if row.environment is None:
            row.environment = records.environment(e.key)
        if row.cpu_minutes is None:
            row.cpu_minutes = e.cpu_minutes
        rows.append(row)
    return rows


def _recorded_firmness(e: Entry, presets_dir: Path | None) -> Any:
    """How firm the record's verdict is, from what its CPU preset alone says (no runs to bootstrap here):
    deterministic (an integrated flow), fragile (post-plateau numbers from fewer than 3 seeds), else not measured."""
    from sparse_tui.reports import firmness as firm

    if e.built or e.preset("cpu") is None:
        return firm.Firmness("not measured", why="no preset")
    try:
        _, specs = load_specs(e, "cpu", presets_dir)
    except Exception:  # noqa: BLE001 - a broken preset is listed elsewhere
        return firm.Firmness("not measured", why="the preset does not load")
    return firm.static(e, [s.config for s in specs])


def recorded_verdict(e: Entry) -> "verdicts.Verdict":
    """The verdict docs/REPRODUCTION.md records for ``e`` (no stored runs here to compute it from)."""
    if e.built:
        return verdicts.Verdict("not run", e.built, source="record")
    return verdicts.Verdict(e.verdict or "not run", e.measured or "not measured", source="record")


def _minutes(m: float | None) -> str:
    return "—" if m is None else (f"{m:.1f}" if m < 10 else f"{m:.0f}")


def _gpu_cell(p: "Projection | None") -> str:
    if p is None:
        return "—"
    m = p.seconds / 60
    return f"~{m:.0f}m" if m < 99.5 else f"~{m / 60:.1f}h"


def list_lines(rows: Sequence[StatusRow], with_store: bool, width: int = 80) -> list[str]:
    """``reproduce --list`` for a terminal: one line per entry (key, verdict, CPU minutes, GPU projection, stored
    runs, figure), the figure wrapped at word boundaries within ``width``; a record's verdict is marked ``*``."""
    import textwrap

    head = f"{'key':<17} {'verdict':<15} {'CPU min':>7} {'GPU':>5} {'stored':>7}  "
    fig_w = max(12, width - len(head))
    out = [head + "figure", "-" * min(width, len(head) + fig_w)]
    for r in rows:
        v = r.verdict
        fragile = "~" if (r.firmness is not None and r.firmness.word == "fragile") else ""
        word = (v.word + fragile + ("*" if v.source == "record" else "")) if v else "—"
        stored = r.stored.get("cpu", "") if with_store else ""
        gpu = _gpu_cell(r.gpu_projection)
        fig = textwrap.wrap(r.entry.figure, fig_w, break_long_words=False, break_on_hyphens=False) or [""]
        out.append(f"{r.entry.key:<17} {word:<15} {_minutes(r.cpu_minutes):>7} {gpu:>5} {stored or '—':>7}  {fig[0]}")
        out.extend(" " * len(head) + f for f in fig[1:])
    out.extend(f"{r.entry.key}: {r.entry.built}" for r in rows if r.entry.built)
    n = counts(rows)
    out.append(f"counted, one per source sentence: {n['reproduced']} reproduced, {n['in kind']} in kind, "
               f"{n['not reproduced']} not reproduced (no claim and not run are not counted); ~ fragile: a seed "
               "bootstrap flips the word more than 20% of the time, or post-plateau numbers from fewer than 3 seeds "
               "(--json: firmness, environment)")
    out.append("* the record's verdict (docs/REPRODUCTION.md): no complete set of stored CPU runs here. CPU min: the "
               "stored runs' wall time, else the record's (shared 2-core CPU). GPU: projected time of the GPU preset "
               "on one H100 from the card's measurements of 2026-11-26 (estimate.project_h100; a projection, not a measurement; "
               "— where the entry has no GPU preset or nothing steps). sparse-tui reproduce KEY prints the numbers behind each verdict.")
    return [w for line in out for w in (textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False)
                                        if len(line) > width else [line])]


def sentence_words(rows: Sequence[StatusRow]) -> dict[str, str]:
    """For each sentence two or more entries test (``verdict.SENTENCES``), its first key -> the sentence's word."""
    words = {r.entry.key: r.verdict.word for r in rows if r.verdict}
    return {k: verdicts.sentence_word({m: words[m] for m in members if m in words})
            for k, members in verdicts.SENTENCES.items() if k in words}


def counts(rows: Sequence[StatusRow]) -> dict[str, int]:
    """The counted words (``verdict.COUNTED``), one per source sentence: a sentence tested by several entries
    counts once, with its word (``sentence_words``)."""
    sentence = sentence_words(rows)
    out = {w: 0 for w in verdicts.COUNTED}
    for r in rows:
        if not r.verdict or not verdicts.counted(r.entry.key):
            continue
        word = sentence.get(r.entry.key, r.verdict.word)
        if word in out:
            out[word] += 1
    return out


def list_json(rows: Sequence[StatusRow], with_store: bool) -> list[dict[str, Any]]:
    """``reproduce --list --json``: everything the atlas knows of each entry, its verdict, how firm it is
    (``firmness``), what produced it (``environment``: the stored runs', else the record's), whether its word counts
    (one per source sentence: ``verdict.SENTENCES``; ``no claim`` and ``not run`` never) and, on a sentence's first
    entry, the sentence's word, and its cost."""
    sentence = sentence_words(rows)
    out = []
    for r in rows:
        e = r.entry
        out.append({"key": e.key, "figure": e.figure, "source": e.source, "section": e.section, "shows": e.shows,
                    "kind": e.kind, "presets": dict(e.presets), "fit_vars": list(e.fit_vars), "law": e.law,
                    "threshold": e.threshold.text() if e.threshold else None, "notes": e.notes, "record": e.record,
                    "measured": e.measured, "built": e.built,
                    "targets": ({v: verdicts.target(e, v) for v in e.fit_vars} if e.kind == "law" else {}),
                    "stored": dict(r.stored) if with_store else None,
                    "verdict": r.verdict.word if r.verdict else "not run",
                    "verdict_source": r.verdict.source if r.verdict else None,
                    "verdict_why": r.verdict.why if r.verdict else None,
                    "firmness": r.firmness.to_dict() if r.firmness else None,
                    "environment": r.environment,
                    "counted": verdicts.counted(e.key) and bool(r.verdict) and r.verdict.word in verdicts.COUNTED,
                    "sentence": verdicts.sentence_of(e.key),
                    "sentence_verdict": sentence.get(e.key),
                    "cost": {"cpu_minutes": r.cpu_minutes,
                             "cpu_source": "store" if (r.verdict and r.verdict.source == "runs") else "record",
                             "gpu_minutes_projected": (round(r.gpu_projection.seconds / 60, 1)
                                                       if r.gpu_projection else None),
                             "gpu_projection": r.gpu_projection.line() if r.gpu_projection else None}})
    return out


# ---------------------------------------------------------------------------------------------------------------
# What a figure needs: its preset's runs, those already in the store, those to train
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Plan:
    """An entry at one size: the preset's runs (``specs``), the store runs that already hold their results
    (``reused``: spec index -> RunRecord), the specs still without a result (``missing``) and, of those, the ones
    whose run an earlier ``reproduce`` (or ``run``) left interrupted or failed (``resumable``: spec index ->
    RunRecord): they are continued in their own row (from their checkpoint when they have one), never trained
    again as new runs, so the store holds one row per point and seed."""

    entry: Entry
    size: str
    preset: str
    specs: list[Any]
    reused: dict[int, Any]
    missing: list[int]
    resumable: dict[int, Any] = field(default_factory=dict)
    checkpointed: int = 0  # how many of ``resumable`` have a checkpoint to continue from

    def to_train(self) -> list[Any]:
        """The specs to create as new runs (those with no row in the store at all)."""
        return [self.specs[i] for i in self.missing if i not in self.resumable]

    def describe(self) -> str:
        cont = ""
        if self.resumable:
            ckpt = f" ({self.checkpointed} from a checkpoint)" if self.checkpointed else ""
            cont = f", {len(self.resumable)} resumed in their own rows{ckpt}"
        return (f"{self.entry.key} ({self.entry.figure}): preset {self.preset} ({self.size}), {len(self.specs)} "
                f"run(s): {len(self.reused)} already in the store{cont}, {len(self.to_train())} to train")


RESUMED = ("interrupted", "failed")  # statuses of a run that reproduce continues in place (runner.RESUMABLE's ended)


def resumable_runs(store: Any, specs: Sequence[Any], missing: Sequence[int]) -> dict[int, Any]:
    """For each of ``missing`` (spec indices), the store run of the same configuration that was interrupted or
    failed, if any: the one with the latest checkpoint, else the newest (older duplicates stay as they are)."""
    by_key: dict[str, list[Any]] = {}
    for r in store.runs(status=list(RESUMED)):
        by_key.setdefault(config_key(_canonical(r.config)), []).append(r)
    out: dict[int, Any] = {}
    taken: set[str] = set()
    for i in missing:
        recs = [r for r in by_key.get(config_key(specs[i].config.model_dump(mode="json")), []) if r.run_id not in taken]
        if recs:
            best = max(recs, key=lambda r: (has_checkpoint(store.runs_dir, r.run_id) or -1, r.created_at))
            out[i] = best
            taken.add(best.run_id)
    return out


def resume_batches(store: Any, p: Plan) -> list[tuple[str, list[str], list[Any]]]:
    """``p.resumable`` by batch, as ``resume`` takes them: [(batch id, run ids, their specs)], checked first
    (``runner.check_resumable``: a writable store, configs that validate, checkpoints that are the runs' own;
    StoreError names a refused one). ``runner.run_headless(..., batch_id=, resume=)`` then re-queues and trains them
    in their own rows."""
    from sparse_tui.lifecycle import runner

    recs = [p.resumable[i] for i in sorted(p.resumable)]
    if not recs:
        return []
    specs = dict(zip((r.run_id for r in recs), runner.check_resumable(store, [r.run_id for r in recs])))
    batches: dict[str, list[str]] = {}
    for r in recs:
        batches.setdefault(r.batch_id, []).append(r.run_id)
    return [(b, ids, [specs[i] for i in ids]) for b, ids in batches.items()]


def plan(store: Any, entry: Entry, size: str, presets_dir: Path | None = None) -> Plan:
    """The plan of ``entry`` at ``size`` against ``store``. Raises ``AtlasError`` / ``presets.PresetError``."""
    if entry.built:
        raise AtlasError(f"{entry.key}: {entry.built}")
    loaded, specs = load_specs(entry, size, presets_dir)
    reused, missing = match_runs(store, specs) if store is not None else ({}, list(range(len(specs))))
    resumable = resumable_runs(store, specs, missing) if store is not None else {}
    ckpt = sum(1 for r in resumable.values() if has_checkpoint(store.runs_dir, r.run_id) is not None)
    return Plan(entry, size, loaded.name, specs, reused, missing, resumable, ckpt)


def read_only_problem(store: Any, chosen: Sequence[Entry], size: str, presets_dir: Path | None = None
                      ) -> str | None:
    """On a run store that can only be read (read-only media, a copy without write permission): None when every
    run the entries need is stored (``reproduce`` then only reports, as ``fit`` does), else the one line that says
    what would have to be trained."""
    need = {e.key: len(plan(store, e, size, presets_dir).missing) for e in chosen}
    missing = [f"{k} needs {n} run(s) trained" for k, n in need.items() if n]
    if not missing:
        return None
    return (f"{store.path}: the run store is read-only (file system or permissions); {'; '.join(missing)} "
            "(pass another --runs-dir)")


def plan_run_ids(store: Any, p: Plan) -> list[str]:
    """After training: the run of every spec (reused or newly finished), in the preset's order; specs still without
    a result (failed, interrupted) are left out."""
    found, _ = match_runs(store, p.specs)
    return [found[i].run_id for i in sorted(found)]


# ---------------------------------------------------------------------------------------------------------------
# Reports: the paper beside the measurement
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Report:
    """What ``reproduce`` prints for one entry (``text``), as data (``data``), and how to draw it (``draw``)."""

    entry: Entry
    text: str
    data: dict[str, Any]
    fit: Any = None  # fitreport.FitReport for law entries
    run_ids: tuple[str, ...] = ()
    verdict: Any = None  # verdict.Verdict, set by ``report``
    firmness: Any = None  # firmness.Firmness, set by ``report`` (a seed bootstrap of the verdict)


def make_report(entry: Entry, run_ids: Sequence[str], lines: list[str], data: dict[str, Any], fit: Any = None
                ) -> Report:
    """The report of ``entry`` every report function returns: its head line, then ``lines``; ``data`` under the
    entry's key."""
    return Report(entry, "\n".join([f"{entry.key} — {entry.figure}: {entry.shows}", *lines]),
                  {"entry": entry.key, **data}, fit=fit, run_ids=tuple(run_ids))


def _gmean(xs: Iterable[float | None]) -> float | None:
    """The geometric mean of the values that are set (not None, not 0); None when none is."""
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _loglog_slope(pts: Sequence[tuple[float, float]]) -> float | None:
    """The least-squares slope of log y against log x over points with x, y > 0; None with fewer than two x."""
    logs = [(math.log(x), math.log(y)) for x, y in pts]
    if len({x for x, _ in logs}) < 2:
        return None
    mx, my = sum(x for x, _ in logs) / len(logs), sum(y for _, y in logs) / len(logs)
    return sum((x - mx) * (y - my) for x, y in logs) / sum((x - mx) ** 2 for x, _ in logs)


def _num(x: Any, spec: str = "+.3f") -> str:
    if x is None:
        width = "".join(c for c in spec.split(".")[0] if c.isdigit())
        return "—".rjust(int(width)) if width else "—"
    return format(x, spec)


def law_report(store: Any, entry: Entry, run_ids: Sequence[str], threshold: float | None = None) -> Report:
    """Fit ``entry.fit_vars`` over the runs (App. D.2) and set each exponent beside the paper's law (``entry.law``)
    with the tolerance the record is held to (``entry.targets``). ``threshold``: re-read every plateau from the
    stored curves at that absolute value first (``fitreport.reread_plateaus``; `reproduce FIG --threshold X`)."""
    from sparse_tui.reports import fitreport
    from sparse_tui.science.theory import PAPER_FITS

    sel = fitreport.select_runs(store, run_ids=list(run_ids))
    reread = None
    if threshold is not None:
        sel, reread = fitreport.reread_plateaus(store, sel, threshold,
                                                paper=[entry.threshold] if entry.threshold else [])
    rep = fitreport.fit_runs(sel, list(entry.fit_vars), paper=entry.law)
    rep.reread = reread
    res = rep.result
    pf = PAPER_FITS[entry.law] if entry.law else None
    rows = []
    for c in rep.comparison:
        v = c["variable"]
        tol = verdicts.target(entry, v)
        ok = None if c["paper"] is None else abs(c["paper_diff"]) <= tol
        holds = None if c["paper"] is None else bool(c["ci"][0] <= c["paper"] <= c["ci"][1])
        rows.append({"variable": v, "paper": c["paper"], "measured": c["fitted"], "ci": c["ci"],
                     "ci_holds_paper": holds, "diff": c["paper_diff"], "target": tol, "within": ok})
    lines = [f"  {sel.describe()}; fitted {res.n}, censored {res.n_censored}"]
    if reread is not None:
        lines.append(f"  {reread.text()}")
    if pf is not None:
        expo = " · ".join(f"{k}^{v:g}" for k, v in pf.exponents.items())
        lines.append(f"  paper ({pf.figure}): T_plateau = {pf.C:g} · {expo}, R² = {pf.r2:g}")
    lines.append(f"  measured: {res.formula()}, R² = {res.r2:.3f}")
    lines.append(f"  {'':>10}  {'paper':>7}  {'measured':>8}  {'95% CI':>18}  {'CI holds paper':>14}  {'diff':>7}  "
                 "target")
    if pf is not None:
        lines.append(f"  {'C':>10}  {pf.C:>7.3g}  {res.C:>8.3g}  {f'[{res.C_ci[0]:.3g}, {res.C_ci[1]:.3g}]':>18}")
    for r in rows:
        ci = f"[{r['ci'][0]:+.3f}, {r['ci'][1]:+.3f}]"
        holds = {True: "yes", False: "no", None: "—"}[r["ci_holds_paper"]]
        tgt = "" if r["within"] is None else f"±{r['target']:g} " + ("within" if r["within"] else "MISSED")
        lines.append(f"  {r['variable']:>10}  {_num(r['paper'], '+.2f'):>7}  {r['measured']:>+8.3f}  {ci:>18}  "
                     f"{holds:>14}  {_num(r['diff']):>7}  {tgt}")
    for c in res.censored:
        lines.append(f"  censored: {c.get('run_id')} {c.get('label') or ''}: no plateau by step "
                     f"{_num(c.get('lower_bound'), 'g')} (the fit predicts {_num(c.get('predicted'), '.4g')})")
    points = _per_point(sel.rows, entry, pf)
    if points:
        lines.append("  per point (mean over seeds; paper = its law at that point):")
        names = list(points[0]["x"])
        lines.append("    " + "  ".join(f"{n:>8}" for n in names) + f"  {'seeds':>5}  {'measured':>9}  {'paper':>9}"
                     + f"  {'ratio':>6}")
        for pt in points:
            lines.append("    " + "  ".join(f"{pt['x'][n]:>8g}" for n in names)
                         + f"  {pt['n']:>5}  {_num(pt['measured'], '9.1f')}  {_num(pt['paper'], '9.1f')}  "
                         + f"{_num(pt['ratio'], '6.2f')}")
    data = {"figure": entry.figure, "law": entry.law, "rows": rows, "points": points, "fit": rep.to_dict()}
    return make_report(entry, run_ids, lines, data, fit=rep)


def _per_point(rows: Sequence[dict], entry: Entry, pf: Any) -> list[dict[str, Any]]:
    """Geometric mean plateau per grid point of the fit variables (censored runs left out, counted in ``n`` only
    when they have a plateau) beside the paper's law there."""
    from sparse_tui.science.fitting import Resolver, flat_rows

    rs = flat_rows(rows)
    res = Resolver(rs)
    groups: dict[tuple, list[float]] = {}
    xs: dict[tuple, dict[str, float]] = {}
    laws: dict[tuple, dict[str, float]] = {}
    extra = [v for v in (pf.exponents if pf is not None else ()) if v not in entry.fit_vars and res.known(v)]
    for i, r in enumerate(rs):
        try:
            x = {v: res.value(r, v, i) for v in entry.fit_vars}
            x_law = {**x, **{v: res.value(r, v, i) for v in extra}}  # e.g. B = 1 where the law has B
        except Exception:
            return []
        k = tuple(x.values())
        xs[k] = x
        laws[k] = x_law
        pl = r.get("plateau_step")
        groups.setdefault(k, [])
        if pl is not None and isinstance(pl, (int, float)) and pl > 0:
            groups[k].append(float(pl))
    out = []
    for k in sorted(groups):
        vals = groups[k]
        m = _gmean(vals)
        law = None
        if pf is not None:
            try:
                law = pf.predict(**{v: laws[k][v] for v in pf.exponents})
            except KeyError:
                law = None
        out.append({"x": xs[k], "n": len(vals), "measured": m, "paper": law,
                    "ratio": (m / law) if (m and law) else None})
    return out


def curves_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Learning curves (Figs. 9, 11, 12): per run its plateau (App. D.1) and how sharp the transition is — the steps
    the watched loss takes from 90% of its plateau level to the threshold, against the plateau's length. The paper
    shows these curves without numbers."""
    recs = [store.get(rid) for rid in run_ids]
    # Each run by its sweep point and seed, as the figure's panels and legends name it (a label cut to a fixed width
    # lost what told blog6_warmup's runs apart).
    names = [f"{figures.run_key(rec)} seed={rec.seed}" for rec in recs]
    w = max([3, *map(len, names)])
    lines = [f"  {len(run_ids)} run(s); "
             "paper: curves only (no numbers); measured: plateau (the preset's rule), the train loss's crossing of "
             "the same threshold (loss rules), and the drop from 90% of the plateau level to the threshold"]
    lines.append(f"  {'run':<{w}} {'plateau':>8} {'train pl.':>9} {'drop steps':>10} {'drop/plateau':>12} "
                 f"{'final test':>10} {'final train':>11}")
    out = []
    for rid, rec, name in zip(run_ids, recs, names):
        series = store.metrics(rid)
        drop = transition_steps(series, rec)
        final = rec.final or {}
        pl = rec.plateau_step
        ratio = drop / pl if (drop is not None and pl) else None
        tpl = train_plateau(series, rec)
        out.append({"run_id": rid, "label": rec.label, "name": name, "plateau": pl, "train_plateau": tpl, "drop": drop,
                    "ratio": ratio, "final_test": final.get("test/loss"), "final_train": final.get("train/loss")})
        lines.append(f"  {name:<{w}} {_num(pl, '8g')} {_num(tpl, '9g')} {_num(drop, '10g')} "
                     f"{_num(ratio, '12.2f')} {_num(final.get('test/loss'), '10.3g')} "
                     f"{_num(final.get('train/loss'), '11.3g')}")
    return make_report(entry, run_ids, lines, {"runs": out})


def train_plateau(series: dict, rec: Any) -> float | None:
    """The first logged step at which train/loss crosses the run's absolute plateau threshold (on training data,
    which repetition changes: Fig. 12's top row); None for other plateau modes or without a crossing."""
    if config_get(rec.config, "plateau.mode") != "below" or "train/loss" not in series:
        return None
    steps, vals = series["train/loss"]
    level = config_get(rec.config, "plateau.value", 0.0)
    return next((float(s) for s, v in zip(steps, vals) if v is not None and v <= level), None)


def transition_steps(series: dict, rec: Any) -> float | None:
    """Steps from the last evaluation at or above 90% of the plateau level (the median of the watched metric before
    the plateau) to the plateau step; None without a plateau."""
    metric = config_get(rec.config, "plateau.metric", "test/loss")
    if rec.plateau_step is None or metric not in series:
        return None
    steps, vals = series[metric]
    pre = sorted(v for s, v in zip(steps, vals) if s < rec.plateau_step and v is not None)
    if not pre:
        return None
    level = pre[len(pre) // 2]
    last_high = max((s for s, v in zip(steps, vals) if s < rec.plateau_step and v is not None and v >= 0.9 * level),
                    default=None)
    return None if last_high is None else float(rec.plateau_step - last_high)


# ---------------------------------------------------------------------------------------------------------------
# The reduced dynamics (Figs. 1a, 1b, 6, 7, 8, 10): numbers read off the 'ode' runs, beside what the paper states
# ---------------------------------------------------------------------------------------------------------------


def _first(t: Any, cond: Any) -> float | None:
    idx = np.flatnonzero(cond)
    return float(t[idx[0]]) if idx.size else None


def _theory_report(entry: Entry, run_ids: Sequence[str], claim: str, head: str, rows: list[str],
                   data: dict[str, Any]) -> Report:
    return make_report(entry, run_ids, [f"  paper: {claim}", f"  {head}", *(f"  {r}" for r in rows)], data)


def fig1a_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    rows, data = [], []
    for f in figures.sorted_flows(store, run_ids, "d"):
        rec = f["rec"]
        series = store.metrics(rec.run_id)
        drop = transition_steps(series, rec)
        pl = f["plateau"]
        scale = math.sqrt(f["d"]) * f["T"] / f["B"]
        data.append({"d": f["d"], "plateau": pl, "plateau_over_scale": pl / scale if pl else None, "drop": drop})
        rows.append(f"{f['d']:>6g} {_num(pl, '10.1f')} {_num(pl / scale if pl else None, '12.3f')} "
                    f"{_num(drop, '10g')} {_num(drop / pl if (drop and pl) else None, '12.3f')}")
    return _theory_report(entry, run_ids, "a plateau at 0.5, then a sharp drop (no numbers)",
                          f"{'d':>6} {'plateau':>10} {'pl/(√d·T)':>12} {'drop':>10} {'drop/plateau':>12}", rows,
                          {"runs": data})


def fig1b_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    f = min(figures.sorted_flows(store, run_ids, "d"), key=lambda f: abs(f["d"] - 64))
    sd = math.sqrt(f["d"])
    t_w = _first(f["t"], f["w"] >= 0.1 * sd)
    t_a = _first(f["t"], f["alpha"] >= 0.1)
    alpha_at_tw = float(np.interp(t_w, f["t"], f["alpha"])) if t_w is not None else None
    w_at_ta = float(np.interp(t_a, f["t"], f["w"])) / sd if t_a is not None else None
    data = {"d": f["d"], "T": f["T"], "t_w_tenth": t_w, "t_alpha_tenth": t_a,
            "alpha_when_w_tenth": alpha_at_tw, "w_when_alpha_tenth": w_at_ta,
            "w_max_over_sqrt_d": float(np.nanmax(f["w"])) / sd, "plateau": f["plateau"]}
    rows = [f"w reaches 10% of its optimum √d at t = {_num(t_w, '.0f')}, when α = {_num(alpha_at_tw, '.4f')} "
            f"(initial 1/T = {1 / f['T']:.4f});",
            f"α reaches 10% of its optimum 1 at t = {_num(t_a, '.0f')}, when w = {_num(w_at_ta, '.2f')} × √d; "
            f"plateau {_num(f['plateau'], '.0f')}",
            f"w peaks at {data['w_max_over_sqrt_d']:.3f} × √d, then decreases towards √d (App. A.3.3)"]
    return _theory_report(entry, run_ids, "w begins learning before α (T = 512, d = 64)",
                          f"measured (T = {f['T']:g}, d = {f['d']:g}):", rows, data)


def fig6_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    f = figures.sorted_flows(store, run_ids, "d")[0]
    sd = math.sqrt(f["d"])
    pl = f["plateau"] or float(f["t"][-1])
    pts = []
    for frac in (0.25, 0.5, 0.9, 1.0):
        t = frac * pl
        pts.append({"t_over_plateau": frac, "w": float(np.interp(t, f["t"], f["w"])),
                    "da": float(np.interp(t, f["t"], f["da"]))})
    k = int(np.nanargmax(f["w"]))
    data = {"path": pts, "w_max_over_sqrt_d": float(f["w"][k]) / sd, "da_at_w_max": float(f["da"][k]),
            "w_end_over_sqrt_d": float(f["w"][-1]) / sd, "da_end": float(f["da"][-1])}
    rows = ["(w, Δa) at " + ", ".join(f"{p['t_over_plateau']:g} × plateau: ({p['w']:.2f}, {p['da']:.2f})"
                                      for p in pts),
            f"w peaks at {data['w_max_over_sqrt_d']:.3f} × √d (Δa = {data['da_at_w_max']:.2f}), ends at "
            f"{data['w_end_over_sqrt_d']:.3f} × √d with Δa = {data['da_end']:.2f}"]
    return _theory_report(entry, run_ids, "the flow from (0, 0) over the landscape (T = 256, d = 64)",
                          "measured path:", rows, data)


def fig7_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    from sparse_tui.science.theory import escape_time_linear, linear_solution

    rows, data = [], []
    for f in figures.sorted_flows(store, run_ids, "T"):
        lam = f["B"] / (math.sqrt(f["d"]) * f["T"])
        errs = {}
        for x in (0.25, 0.5, 1.0):
            t = x / lam
            w_lin, _ = linear_solution(t, f["d"], f["T"], f["B"])
            w = float(np.interp(t, f["t"], f["w"]))
            errs[x] = w / float(w_lin) - 1
        closed = float(escape_time_linear(f["d"], f["T"], f["B"]))
        pl = f["plateau"]
        data.append({"T": f["T"], "w_rel_err": errs, "plateau": pl, "closed_form": closed})
        rows.append(f"{f['T']:>6g} " + " ".join(f"{errs[x]:>+9.3f}" for x in errs)
                    + f" {_num(pl, '10.0f')} {closed:>11.0f} {_num(closed / pl if pl else None, '7.2f')}")
    return _theory_report(entry, run_ids, "the linearisation matches the early dynamics (d = 512)",
                          f"{'T':>6} {'w/lin-1 at λt=0.25':>9} {'0.5':>9} {'1.0':>9} {'plateau':>10} "
                          f"{'closed form':>11} {'ratio':>7}", rows, {"runs": data})


def fig8_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    from sparse_tui.science.theory import hessian_eq12, w_equilibrium

    f = figures.sorted_flows(store, run_ids, "d")[0]
    pl = f["plateau"] or float(f["t"][-1])
    winf = w_equilibrium(f["alpha"], f["d"], f["T"], f["B"])
    ratio = f["w"] / winf
    early = f["t"] < 0.5 * pl
    late = f["t"] > 1.5 * pl
    ok = np.isfinite(f["da"])
    ev = np.linalg.eigvalsh(hessian_eq12(f["w"][ok], f["da"][ok], f["d"], f["T"], f["B"]))
    lam = f["B"] / (math.sqrt(f["d"]) * f["T"])
    k = int(np.argmax(ev[:, 1]))
    data = {"w_over_winf_plateau_max": float(np.nanmax(ratio[early][1:])) if early.sum() > 1
            else None, "w_over_winf_late_maxdev": float(np.nanmax(np.abs(ratio[late] - 1))) if late.any() else None,
            "eig_start": [float(ev[0, 0]), float(ev[0, 1])], "lambda": lam, "eig_max": float(ev[k, 1]),
            "t_eig_max_over_plateau": float(f["t"][ok][k]) / pl, "eig_end": [float(ev[-1, 0]), float(ev[-1, 1])],
            "one_over_d": 1 / f["d"]}
    rows = [f"w / w∞(α): at most {_num(data['w_over_winf_plateau_max'], '.3f')} in the first half of the plateau; "
            f"within {_num(data['w_over_winf_late_maxdev'], '.1e')} of 1 after 1.5 × the plateau",
            f"Hessian eigenvalues at t = 0: {ev[0, 0]:+.3e}, {ev[0, 1]:+.3e} (±1/(√d·T) = ±{lam:.3e}); largest "
            f"{data['eig_max']:.3e} at {data['t_eig_max_over_plateau']:.2f} × the plateau; at the end "
            f"{ev[-1, 0]:+.2e}, {ev[-1, 1]:.4f} (1/d = {1 / f['d']:.4f})"]
    return _theory_report(entry, run_ids, "w at its equilibrium after the transition; Hessian ±B/√(dT) early, "
                          "sharpest in the middle, 1/d and ~0 late", f"measured (T = {f['T']:g}, d = {f['d']:g}):",
                          rows, data)


def fig10_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    from sparse_tui.science.theory import f_rep

    flows = figures.sorted_flows(store, run_ids, "p")
    base = next((f["plateau"] for f in flows if f["p"] == 0), None)
    rows, data = [], []
    for f in flows:
        if f.get("w_rest") is not None:
            t_wt = _first(f["t"], f["toy/w_tilde"] >= 0.5)
            t_w = _first(f["t"], f["w_rest"] / math.sqrt(f["d"] - 1) >= 0.5)
        else:
            t_wt = t_w = _first(f["t"], f["w"] / math.sqrt(f["d"]) >= 0.5)
        speed = base / f["plateau"] if (base and f["plateau"]) else None
        fr = float(f_rep(f["p"], f["d"]))
        data.append({"p": f["p"], "plateau": f["plateau"], "speedup": speed, "f": fr, "t_w_tilde_half": t_wt,
                     "t_w_half": t_w})
        rows.append(f"{f['p']:>6g} {_num(f['plateau'], '9.0f')} {_num(speed, '8.2f')} {fr:>8.2f} "
                    f"{_num(t_wt, '10.0f')} {_num(t_w, '10.0f')}")
    claim = "w~ learns faster, α rises earlier, the loss drops earlier (T = 512, d = 64)"
    return _theory_report(entry, run_ids, claim, f"{'p':>6} {'plateau':>9} {'speedup':>8} {'f(p,d)':>8} "
                          f"{'t(w~=.5)':>10} {'t(w=.5)':>10}", rows, {"runs": data})


def _at(series: dict, name: str, step: float | None) -> float | None:
    """The last logged value of ``name`` at or before ``step`` (None without one)."""
    if step is None or name not in series:
        return None
    steps, vals = series[name]
    return next((v for st, v in zip(reversed(steps), reversed(vals)) if st <= step and v is not None), None)


def _probe_layer(series: dict, kind: str) -> str | None:
    """The ``attn/L{l}/{kind}`` series whose final value is the largest: the layer that learned the probe's
    attention (Fig. 17: the copy in one layer, the selection in a later one)."""
    names = [n for n in series if n.startswith("attn/L") and n.endswith(f"/{kind}") and n.count("/") == 2]
    return max(names, key=lambda n: series[n][1][-1] if series[n][1] else float("-inf"), default=None)


def probes_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Fig. 17 (App. C.2): per run, the copy probe (attention from the relevant value to its key, in the layer
    that learns it) and the selection probe (query to the relevant value, in its layer) at the start, at half the
    plateau, at the plateau (App. D.1's threshold), when test accuracy first reaches 60% (recall proper) and at
    the end. The paper shows both rising together with accuracy, without numbers."""
    lines = [f"  {len(run_ids)} run(s); paper: curves only (both probes rise with accuracy, copy in layer 3 and "
             "selection in layer 4 of its 4-layer model); measured: the probes at step 0 / plateau÷2 / plateau / "
             "60% accuracy / end"]
    out = []
    for rid in run_ids:
        rec = store.get(rid)
        series = store.metrics(rid)
        pl = rec.plateau_step
        acc = series.get("test/acc", ([], []))
        recall = next((float(st) for st, v in zip(*acc) if v is not None and v >= RECALL_LEVEL), None)
        end = float(acc[0][-1]) if acc[0] else None
        points = {"start": 0.0, "half": None if pl is None else pl / 2, "plateau": pl, "acc60": recall, "end": end}
        row = {"run_id": rid, "label": rec.label, "plateau": pl, "acc60": recall}
        lines.append(f"  {rec.label}: plateau {_num(pl, 'g')}, 60% accuracy at {_num(recall, 'g')}")
        for kind in ("copy", "select"):
            name = _probe_layer(series, kind)
            vals = {k: _at(series, name, st) for k, st in points.items()} if name else {}
            row[kind] = {"metric": name, **vals}
            lines.append(f"    {kind:<6} {name or '—':<16} " + "  ".join(
                f"{k} {_num(vals.get(k), '.3f')}" for k in points))
        row["acc"] = {k: _at(series, "test/acc", st) for k, st in points.items()}
        lines.append("    acc    test/acc         " + "  ".join(f"{k} {_num(v, '.3f')}" for k, v in row["acc"].items()))
        out.append(row)
    return make_report(entry, run_ids, lines, {"runs": out})


def _is_baseline(rec: Any) -> bool:
    """No repetition of either kind (B = 1, p = 0): the run a recall speed-up is measured against."""
    B, p = float(config_get(rec.config, "task.B", 1.0)), float(config_get(rec.config, "task.p", 0.0))
    return B == 1.0 and p == 0.0


def fig5_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Fig. 5 (§3.2): per run the first test accuracy (no repetition) >= 5% (App. D.1), 30% and ``RECALL_LEVEL``, the
    speed-up at each over the baseline (B = 1, p = 0) of the same seed, and the final test accuracy against the
    baseline's (a large deficit: the overfitting). The paper: a small B (p) speeds emergence up about 4× (2×); too
    much overfits, with a late grokking-like recovery."""
    levels = (0.05, 0.3, RECALL_LEVEL)
    recs = [store.get(r) for r in run_ids]
    var = figures.varied_task_key(recs) or "run"
    rows: list[dict[str, Any]] = []
    for rec in recs:
        steps, vals = store.metrics(rec.run_id).get("test/acc", ([], []))
        cross = [next((float(st) for st, v in zip(steps, vals) if v is not None and v >= lv), None) for lv in levels]
        rows.append({"run_id": rec.run_id, "variable": var, "value": config_get(rec.config, f"task.{var}"),
                     "seed": rec.seed, "baseline": _is_baseline(rec), "cross": cross,
                     "best": max((v for v in vals if v is not None), default=None),
                     "final": vals[-1] if vals else None})
    base = {r["seed"]: r for r in rows if r["baseline"]}
    for r in rows:
        b = base.get(r["seed"])
        r["speedup"] = [b["cross"][i] / c if (b and b["cross"][i] and c) else None for i, c in enumerate(r["cross"])]
        r["final_vs_baseline"] = r["final"] - b["final"] if (b and r["final"] is not None
                                                              and b["final"] is not None) else None
    rows.sort(key=lambda r: (float(r["value"]) if isinstance(r["value"], (int, float)) else 0.0, r["seed"] or 0))
    pct = [format(lv, ".0%") for lv in levels]
    lines = [f"  {len(rows)} run(s); paper: a small amount of repetition speeds emergence up (B: about 4×, p: about 2×), "
             "too much overfits; measured on the test set without repetition: first step at each accuracy, the "
             "speed-up over the same seed's B = 1, p = 0 run (×), final accuracy and its difference to that run's",
             f"  {var:>6} {'seed':>4} " + " ".join(f"{'at ' + x:>7} {'×':>5}" for x in pct)
             + f" {'best':>5} {'final':>5} {'vs base':>7}"]
    for r in rows:
        val = format(r["value"], "g") if isinstance(r["value"], (int, float)) else str(r["value"] or "—")
        lines.append(f"  {val:>6} {_num(r['seed'], '4g')} "
                     + " ".join(f"{_num(c, '7g')} {_num(x, '5.2f')}" for c, x in zip(r["cross"], r["speedup"]))
                     + f" {_num(r['best'], '5.2f')} {_num(r['final'], '5.2f')} {_num(r['final_vs_baseline'], '+7.2f')}")
    return make_report(entry, run_ids, lines, {"levels": list(levels), "runs": rows})


def fig16_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Fig. 16 (App. C.2): Fig. 5's runs read on their training data (``train/loss``: fresh batches with the run's
    repetition). Per run the first step with train/loss <= ``FIG16_TRAIN_LOSS`` and the speed-up over the baseline
    (B = 1, p = 0) of the same seed, beside the test-set plateau (5%, no repetition) and final test accuracy that show
    the overfitting Fig. 5 sees. The paper: on training data repetition only speeds up (curves, no numbers)."""
    recs = [store.get(r) for r in run_ids]
    var = figures.varied_task_key(recs) or "run"
    rows: list[dict[str, Any]] = []
    for rec in recs:
        value = config_get(rec.config, f"task.{var}")
        steps, vals = store.metrics(rec.run_id).get("train/loss", ([], []))
        cross = next((float(s) for s, v in zip(steps, vals) if v is not None and v <= FIG16_TRAIN_LOSS), None)
        rows.append({"run_id": rec.run_id, "variable": var, "value": value, "seed": rec.seed, "train_cross": cross,
                     "baseline": _is_baseline(rec), "final_train_loss": vals[-1] if vals else None,
                     "plateau": rec.plateau_step, "final_test_acc": (rec.final or {}).get("test/acc")})
    base = {r["seed"]: r["train_cross"] for r in rows if r["baseline"]}
    for r in rows:
        b, c = base.get(r["seed"]), r["train_cross"]
        r["speedup"] = b / c if (b and c) else None
    rows.sort(key=lambda r: (float(r["value"]) if isinstance(r["value"], (int, float)) else 0.0, r["seed"] or 0))
    rep_rows = [r for r in rows if not r["baseline"]]
    only_faster = (all(r["speedup"] is not None and r["speedup"] >= 1 for r in rep_rows) if rep_rows and base
                   else None)
    lines = [f"  {len(rows)} run(s); paper: on the training data repetition only speeds emergence up (curves, no "
             f"numbers); measured: first step with train/loss <= {FIG16_TRAIN_LOSS:g} (ours) and the speed-up over "
             "the same seed's B = 1, p = 0 run; test plateau (5%, no repetition) and final test accuracy beside",
             f"  {var:>6} {'seed':>4} {'train <= ' + format(FIG16_TRAIN_LOSS, 'g'):>11} {'speed-up':>8} "
             f"{'final train':>11} {'test plateau':>12} {'final test acc':>14}"]
    for r in rows:
        val = format(r["value"], "g") if isinstance(r["value"], (int, float)) else str(r["value"] or "—")
        lines.append(f"  {val:>6} {_num(r['seed'], '4g')} {_num(r['train_cross'], '11g')} "
                     f"{_num(r['speedup'], '8.2f')} {_num(r['final_train_loss'], '11.3g')} "
                     f"{_num(r['plateau'], '12g')} {_num(r['final_test_acc'], '14.3f')}")
    verdict = {True: "yes", False: "NO", None: "— (no baseline run or no crossing)"}[only_faster]
    lines.append(f"  every run with repetition reaches the training-loss level sooner than its seed's baseline: "
                 f"{verdict}")
    return make_report(entry, run_ids, lines, {"level": FIG16_TRAIN_LOSS, "runs": rows, "only_faster": only_faster})


def fig4_curves_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Fig. 4 left/middle (§3.2): learning curves as N_pairs grows at a fixed vocabulary. Per run the plateau (App.
    D.1's 5% test accuracy), the first evaluation at ``RECALL_LEVEL`` accuracy and the rise between the two (relative
    to the plateau: small = sharp), the final accuracy; per N_pairs the geometric means over seeds beside Fig. 4
    right's law at that point (0.55 · N_tokens^0.79 · N_pairs^2.25); the log-log slope of the plateau against N_pairs;
    and whether the plateau grows with N_pairs in every seed. The paper: emergence is sharp and later for more
    pairs (curves, no numbers)."""
    from sparse_tui.science.theory import PAPER_FITS

    law = PAPER_FITS["fig4"]
    rows: list[dict[str, Any]] = []
    for rid in run_ids:
        rec = store.get(rid)
        steps, vals = store.metrics(rid).get("test/acc", ([], []))
        recall = next((float(st) for st, v in zip(steps, vals) if v is not None and v >= RECALL_LEVEL), None)
        pl = rec.plateau_step
        rows.append({"run_id": rid, "n_pairs": config_get(rec.config, "task.n_pairs"),
                     "n_tokens": config_get(rec.config, "task.n_tokens"), "seed": rec.seed, "plateau": pl,
                     "recall": recall, "rise": (recall - pl) / pl if (recall and pl) else None,
                     "final_acc": vals[-1] if vals else None, "last_step": float(steps[-1]) if steps else None})
    rows.sort(key=lambda r: (r["n_pairs"] or 0, r["seed"] or 0))

    points = []
    for n in sorted({r["n_pairs"] for r in rows}):
        rs = [r for r in rows if r["n_pairs"] == n]
        pl = _gmean(r["plateau"] for r in rs)
        points.append({"n_pairs": n, "n_tokens": rs[0]["n_tokens"], "seeds": len(rs),
                       "censored": sum(r["plateau"] is None for r in rs), "plateau": pl,
                       "recall": _gmean(r["recall"] for r in rs), "never": sum(r["recall"] is None for r in rs),
                       "paper": law.predict(n_tokens=rs[0]["n_tokens"], n_pairs=n)})
    slope = _loglog_slope([(pt["n_pairs"], pt["plateau"]) for pt in points if pt["plateau"] and not pt["censored"]])
    later = None
    seeds = sorted({r["seed"] for r in rows})
    if len(points) >= 2:
        later = True
        for sd in seeds:  # strictly later with every added pair count; a run without a plateau is the latest
            pls = [r["plateau"] if r["plateau"] is not None else math.inf for r in rows if r["seed"] == sd]
            later = later and all(a < b or a == b == math.inf for a, b in zip(pls, pls[1:]))
    lines = [f"  {len(rows)} run(s); paper: emergence sharp and later for more pairs (curves; Fig. 4 right's law "
             f"{law.C:g} · N_tokens^{law.exponents['n_tokens']:g} · N_pairs^{law.exponents['n_pairs']:g} gives the "
             f"plateau); measured: plateau (5%), first {RECALL_LEVEL:.0%} accuracy, rise = (that − plateau) / plateau",
             f"  {'N_pairs':>7} {'N_tokens':>8} {'seed':>4} {'plateau':>8} {format(RECALL_LEVEL, '.0%'):>8} "
             f"{'rise':>6} {'final acc':>9} {'last step':>9}"]
    for r in rows:
        lines.append(f"  {r['n_pairs']:>7} {r['n_tokens']:>8} {_num(r['seed'], '4g')} {_num(r['plateau'], '8g')} "
                     f"{_num(r['recall'], '8g')} {_num(r['rise'], '6.2f')} {_num(r['final_acc'], '9.3f')} "
                     f"{_num(r['last_step'], '9g')}")
    lines.append("  per N_pairs (geometric mean over seeds; — = no run crossed):")
    lines.append(f"  {'N_pairs':>7} {'plateau':>8} {'paper law':>9} {'ratio':>6} {format(RECALL_LEVEL, '.0%'):>8} "
                 f"{'never':>5}")
    for pt in points:
        ratio = pt["plateau"] / pt["paper"] if pt["plateau"] and not pt["censored"] else None
        lines.append(f"  {pt['n_pairs']:>7} {_num(pt['plateau'], '8.0f')}{'*' if pt['censored'] else ' '}"
                     f"{pt['paper']:>9.0f} {_num(ratio, '6.2f')} {_num(pt['recall'], '8.0f')} {pt['never']:>5}")
    if slope is not None:
        lines.append(f"  plateau ∝ N_pairs^{slope:.2f} over N_pairs {[pt['n_pairs'] for pt in points if pt['plateau']]}"
                     f" (Fig. 4 right: {law.exponents['n_pairs']:g}); * = some seed never crossed 5%")
    if later is not None:
        lines.append(f"  the plateau grows with N_pairs in every seed: {'yes' if later else 'NO'}")
    data = {"runs": rows, "points": points, "n_pairs_slope": slope, "later_with_pairs": later,
            "recall_level": RECALL_LEVEL}
    return make_report(entry, run_ids, lines, data)


def refits(entry: Entry) -> bool:
    """Whether ``entry``'s report fits a law to plateaus (so `reproduce --threshold X` can re-read them)."""
    return entry.report_fn() is law_report


def report(store: Any, entry: Entry, run_ids: Sequence[str], threshold: float | None = None) -> Report:
    """The report of ``entry`` over ``run_ids`` (``Entry.report_fn``: its own or its kind's). ``threshold`` (law
    reports only, ``refits``): re-read the plateaus at that absolute value."""
    fn = entry.report_fn()
    if threshold is None:
        return _with_firmness(store, _with_verdict(store, fn(store, entry, run_ids)), fn)
    if fn is not law_report:
        raise AtlasError(f"{entry.key}: --threshold re-reads the plateaus of a fitted law; {entry.figure} is a "
                         f"{entry.kind} entry")
    # A re-read at another threshold is a diagnosis: the verdict is the fit at the preset's own threshold.
    own = verdicts.verdict(store, law_report(store, entry, run_ids))
    rep = law_report(store, entry, run_ids, threshold=threshold)
    rep.text = rep.text.replace(f"{entry.key} — ", f"{entry.key} (diagnosis: plateaus re-read at {threshold:g}) — ", 1)
    return _with_firmness(store, _with_verdict(store, rep, own, note=f" (at the preset's threshold; the re-read at "
                                                                    f"{threshold:g} above is a diagnosis)"), law_report)


def _with_firmness(store: Any, rep: Report, fn: Any) -> Report:
    """``rep`` with how firm its verdict is (``firmness.firmness``: a seed bootstrap of the word, each draw's word
    from ``fn``'s report over the draw's runs) and what produced its runs (``firmness.environment``), as two lines
    after the verdict and as ``data['firmness']`` and ``data['environment']`` (issue 42)."""
    from sparse_tui.reports import firmness as firm

    entry, ids = rep.entry, list(rep.run_ids)
    f = firm.firmness(store, entry, ids, rep.verdict.word,
                      lambda sub: verdicts.verdict(store, fn(store, entry, sub)).word)
    env = firm.environment([store.get(r) for r in ids])
    rep.firmness = f
    rep.text = "\n".join([rep.text, f"  {f.line()}", f"  environment: {firm.environment_line(env)}"])
    rep.data["firmness"] = f.to_dict()
    rep.data["environment"] = env
    return rep


def _with_verdict(store: Any, rep: Report, v: "verdicts.Verdict | None" = None, note: str = "") -> Report:
    """``rep`` ending with its verdict line (``verdict.verdict``): the claim checked (curves entries), then the
    word and the numbers that decide it; ``data['verdict']`` holds the same."""
    v = v or verdicts.verdict(store, rep)
    tail = [f"  claim: {v.claim}"] if v.claim else []
    rep.text = "\n".join([rep.text, *tail, f"  {v.line()}{note}"])
    rep.verdict = v
    rep.data["verdict"] = v.word
    rep.data["verdict_detail"] = v.to_dict()
    return rep


def p_table_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Fig. 3 right: the plateau against d for each cross-sample repetition p, the learning rate chosen per p among
    the preset's as the paper does (App. D.3: "based on the shortest average plateau length"; a censored run counts
    with its last step, a lower bound). The paper fits no law here (App. D.2); it states that repetition speeds
    emergence up, more so as d grows (§2.4)."""
    runs: list[dict[str, Any]] = []
    for rid in run_ids:
        rec = store.get(rid)
        pl = rec.plateau_step
        runs.append({"run_id": rid, "d": config_get(rec.config, "task.d"), "p": config_get(rec.config, "task.p", 0.0),
                     "lr": config_get(rec.config, "train.lr"), "seed": rec.seed,
                     "plateau": pl, "censored": pl is None, "value": float(pl if pl is not None else rec.step)})
    ps = sorted({r["p"] for r in runs})
    ds = sorted({r["d"] for r in runs})
    chosen: dict[float, Any] = {}
    for p in ps:
        by_lr: dict[Any, list[float]] = {}
        for r in runs:
            if r["p"] == p:
                by_lr.setdefault(r["lr"], []).append(math.log(r["value"]))
        chosen[p] = min(by_lr, key=lambda lr: sum(by_lr[lr]) / len(by_lr[lr]))
    table: dict[float, dict[float, Any]] = {}
    for p in ps:
        for d in ds:
            vals = [r for r in runs if r["p"] == p and r["d"] == d and r["lr"] == chosen[p]]
            if vals:
                table.setdefault(p, {})[d] = {"mean": _gmean(r["value"] for r in vals), "n": len(vals),
                                              "censored": sum(r["censored"] for r in vals)}
    lines = ["  paper: no power law fits (App. D.2); repetition speeds emergence up, more so at larger d (§2.4)",
             "  lr chosen per p (shortest mean log plateau over d and seeds, App. D.3): "
             + ", ".join(f"p = {p:g}: {chosen[p]:g}" for p in ps),
             "  plateau (geometric mean over seeds; * = includes censored runs, a lower bound) and speed-up over p = 0:",
             "  " + f"{'d':>6}" + "".join(f"{'p = ' + format(p, 'g'):>18}" for p in ps)]
    for d in ds:
        cells = []
        base = table.get(ps[0], {}).get(d) if ps and ps[0] == 0 else None
        for p in ps:
            c = table.get(p, {}).get(d)
            if c is None:
                cells.append(f"{'—':>18}")
                continue
            star = "*" if c["censored"] else " "
            sp = f" (×{base['mean'] / c['mean']:.2f})" if base and p != 0 else ""
            cells.append(f"{c['mean']:>9.0f}{star}{sp:>8}")
        lines.append("  " + f"{d:>6g}" + "".join(cells))
    data = {"chosen_lr": {str(p): chosen[p] for p in ps}, "runs": runs,
            "table": {str(p): {str(d): c for d, c in row.items()} for p, row in table.items()}}
    return make_report(entry, run_ids, lines, data)


def nearest_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Blog 3: ``nearest_rows`` as a table, and over the runs the log-log slope of the best perplexity against n_embd
    (the blog: steeper than −1, the slope of V/n_embd)."""
    rows = figures.nearest_rows(store, run_ids)
    lines = ["  blog: random guess among the other context tokens = (C−2)/(C−1)·V; best perplexity falls faster "
             "than V/n_embd",
             f"  {'attention':<9} {'self key':>8} {'V':>4} {'C':>3} {'n_embd':>6} {'seed':>4} {'final ppl':>9} {'best (step)':>15} "
             f"{'(C−2)V/(C−1)':>12} {'final/that':>10} {'V/n_embd':>8} {'best/that':>9} {'acc':>6} {'attn→target':>11}"]
    for r in rows:
        g, vn = r["guess"], r["v_over_n"]
        best = "—" if r["best"] is None else f"{r['best']:.2f} ({r['best_step']})"
        lines.append(f"  {r['attention']:<9} {'yes' if r['self_key'] else 'no':>8} {r['V']:>4} {r['C']:>3} {r['n_embd']:>6} {r['seed']:>4} "
                     f"{_num(r['final'], '9.2f')} {best:>15} {_num(g, '12.2f')} "
                     f"{_num(r['final'] / g if (g and r['final']) else None, '10.2f')} {_num(vn, '8.2f')} "
                     f"{_num(r['best'] / vn if (vn and r['best']) else None, '9.2f')} {_num(r['final_acc'], '6.3f')} "
                     f"{_num(r['attn_relevant'], '11.3f')}")
    slope = _loglog_slope([(r["n_embd"], r["best"]) for r in rows if r["best"] and r["n_embd"]])
    if slope is not None:
        lines.append(f"  best perplexity ∝ n_embd^{slope:.2f} over n_embd {sorted({r['n_embd'] for r in rows})} "
                     "(V/n_embd: exponent −1; the blog: faster)")
    return make_report(entry, run_ids, lines, {"runs": rows, "n_embd_slope": slope})


def geometry_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Blog 3's embedding geometry: per run its n_embd, final test perplexity and accuracy, and how ordered its final
    embedding is (``geometry.order``: Spearman's rho of embedding distance against value distance; the share of
    tokens whose nearest token is a numerical neighbour) with the share of variance its two drawn axes hold."""
    lines = ["  blog: numerically closer tokens are embedded closer together; the geometry improves with n_embd "
             "(pictures only)",
             f"  {'n_embd':>6} {'seed':>4} {'final ppl':>9} {'acc':>6} {'rho':>6} {'neighbours':>10} {'2-D share':>9}"]
    rows = []
    for rid in run_ids:
        rec = store.get(rid)
        E = store.array(rid, geometry.ARRAY)
        loss = (rec.final or {}).get("test/loss")
        row = {"run_id": rid, "n_embd": config_get(rec.config, "model.d_model"), "seed": rec.seed,
               "final_ppl": math.exp(loss) if loss is not None and math.isfinite(loss) else None,
               "final_acc": (rec.final or {}).get("test/acc"), "rho": None, "neighbours": None, "explained": None}
        if E is not None:
            row.update(geometry.order(E), explained=geometry.plane(E).explained)
        rows.append(row)
    rows.sort(key=lambda r: (r["n_embd"] or 0, r["seed"] or 0))
    for r in rows:
        lines.append(f"  {r['n_embd']:>6} {r['seed']:>4} {_num(r['final_ppl'], '9.2f')} {_num(r['final_acc'], '6.3f')}"
                     f" {_num(r['rho'], '6.2f')} {_num(r['neighbours'], '10.2f')} {_num(r['explained'], '9.2f')}")
    if any(r["rho"] is None for r in rows):
        lines.append("  (—: no stored embedding; runs store theirs when they end)")
    return make_report(entry, run_ids, lines, {"runs": rows})


def phase_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Blog 6's suggested phase diagram: over the two swept parameters (``phase.sweep_axes``, e.g. N × lr) the
    plateau step (first evaluation at the preset's threshold; — never) and the final test accuracy, each cell the
    mean over its seeds (``phase.phase_grid``, as the console's Phase panel and ``figures.phase_entry_figure``)."""
    recs = [store.get(r) for r in run_ids]
    x, y = sweep_axes(recs)
    xs, ys, plateau, counts = phase_grid(recs, x, y, "plateau")
    acc = phase_grid(recs, x, y, "acc")[2]
    lines = [f"  blog: 'it would be interesting to draw phase diagrams'; rows {y}, columns {x}; {cell_note(counts)}",
             "  plateau step (— never) / final test accuracy",
             "  " + f"{y:>14}" + "".join(f"{format(v, 'g'):>16}" for v in xs)]
    for j, yv in enumerate(ys):
        lines.append("  " + f"{format(yv, 'g'):>14}" + "".join(
            f"{_num(None if math.isnan(p) else p, '6.0f')} / {_num(None if math.isnan(a) else a, '5.3f')}".rjust(16)
            for p, a in zip(plateau[j], acc[j])))
    cells = [{x: xv, y: yv, "plateau": None if math.isnan(plateau[j][i]) else plateau[j][i],
              "acc": None if math.isnan(acc[j][i]) else acc[j][i], "n": counts[j][i]}
             for j, yv in enumerate(ys) for i, xv in enumerate(xs)]
    return make_report(entry, run_ids, lines, {"x": x, "y": y, "cells": cells})


def draw(store: Any, rep: Report, path: Path) -> Path:
    """Write the entry's figure (``Entry.plot_fn``): a law entry's draws its fit, a table entry's its table, the
    others the store's runs. Raises ``figures.FigureError``."""
    title = f"{rep.entry.figure} ({rep.entry.source}) — {rep.entry.shows}"
    args = {"law": (rep.fit,), "table": (rep.data,)}.get(rep.entry.kind, (store, list(rep.run_ids)))
    return rep.entry.plot_fn()(*args, path, title=title)


def plot_paths(path: Path, entries_: Sequence[Entry]) -> list[Path]:
    """One file per entry: ``path`` itself for one entry, ``STEM-KEY.SUFFIX`` beside it for several."""
    if len(entries_) == 1:
        return [path]
    return [path.with_name(f"{path.stem}-{e.key}{path.suffix}") for e in entries_]
