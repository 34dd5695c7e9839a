"""``sparse-tui reproduce --list``: one row per atlas entry, its verdict (computed from the store's runs where
it holds all of them, else the record's), cost, stored runs, figure.

No torch, no textual at import."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from sparse_tui.atlas import SIZES, AtlasError, Entry, entries, records
from sparse_tui.lifecycle.estimate import LENT_CARD, CardProjection, project
from sparse_tui.reports import verdict as verdicts
from sparse_tui.reports.library import report
from sparse_tui.reports.planner import index_runs, load_specs, match_runs


@dataclass
class StatusRow:
    entry: Entry
    stored: dict[str, str]  # size -> "12/30" finished runs of that preset in the store, "" when unknown
    verdict: "verdicts.Verdict | None" = None  # computed from the store's runs (``with_verdicts``), else the record's
    cpu_minutes: float | None = None  # the stored CPU runs' summed wall time, else the record's
    gpu_projection: "CardProjection | None" = None  # the GPU preset's range on the lent card (estimate.project)
    firmness: Any = None  # firmness.Firmness of the verdict: the stored runs' bootstrap, else what the preset says
    environment: dict[str, Any] | None = None  # what produced the verdict's runs (the store's), else the record's


def status_rows(store: Any | None, presets_dir: Path | None = None, with_verdicts: bool = False) -> list[StatusRow]:
    """Every atlas entry with, per size, how many of its preset's runs the store holds as results.
    ``with_verdicts``: where the store holds every run of the entry's CPU preset, its verdict (``verdict.verdict``
    of its report) and the runs' summed wall time; elsewhere the record's (``Entry.verdict``, ``Entry.cpu_minutes``)."""
    rows = []
    index = index_runs(store) if store is not None else {}
    for e in entries():
        stored: dict[str, str] = {}
        row = StatusRow(e, stored)
        if e.preset("gpu") not in (None, e.preset("cpu")) and not e.built:
            try:
                row.gpu_projection = project(load_specs(e, "gpu", presets_dir)[1])
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
                    row.verdict, row.firmness, row.environment = rep.verdict, rep.firmness, rep.environment
                except Exception as ex:  # noqa: BLE001 - a report that fails is listed, not fatal
                    row.verdict = verdicts.Verdict("not reproduced", f"the report failed: {ex}")
                row.cpu_minutes = sum(found[i].duration or 0.0 for i in found) / 60
        row.verdict = row.verdict or recorded_verdict(e)
        row.firmness = row.firmness or _recorded_firmness(e, presets_dir)
        row.environment = row.environment or records.environment(e.key)
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


def _gpu_cell(p: "CardProjection | None") -> str:
    """The range in minutes (``3–7``), or hours past 99 minutes (``1.2–2.5h``)."""
    if p is None:
        return "—"
    if p.high < 99.5 * 60:
        return f"{max(1, int(p.low / 60))}–{max(1, math.ceil(p.high / 60))}"
    return f"{p.low / 3600:.1f}–{p.high / 3600:.1f}h"


def list_lines(rows: Sequence[StatusRow], with_store: bool, width: int = 80) -> list[str]:
    """``reproduce --list`` for a terminal: one line per entry (key, verdict, CPU minutes, GPU projection, stored
    runs, figure), the figure wrapped at word boundaries within ``width``; a record's verdict is marked ``*``."""
    import textwrap

    gpu_head = LENT_CARD  # the card the projections name (minutes, a range)
    head = f"{'key':<17} {'verdict':<15} {'CPU min':>7} {gpu_head:>5} {'stored':>7}  "
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
               f"{n['not reproduced']} not reproduced. ~ fragile (a seed bootstrap flips it > 20%, or post-plateau "
               "numbers from < 3 seeds; --json: firmness, environment)")
    out.append("* the record's verdict (docs/REPRODUCTION.md): no complete set of stored CPU runs here. CPU min: the "
               f"stored runs' wall time, else the record's (shared 2-core CPU). {gpu_head}: projected minutes "
               f"of the GPU preset on one {LENT_CARD}, a range (estimate.project: from the card's own calibration "
               "where a GPU run here left one, else from the H100 measured 2026-11-26; a projection, not a "
               "measurement; — where the entry has no GPU preset or nothing steps). sparse-tui reproduce KEY prints "
               "the numbers behind each verdict.")
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
    got = Counter(sentence.get(r.entry.key, r.verdict.word) for r in rows
                  if r.verdict and verdicts.counted(r.entry.key))
    return {w: got[w] for w in verdicts.COUNTED}


def list_json(rows: Sequence[StatusRow], with_store: bool) -> list[dict[str, Any]]:
    """``reproduce --list --json``: everything the atlas knows of each entry, its verdict, how firm it is
    (``firmness``), what produced it (``environment``: the stored runs', else the record's), whether its word counts
    (one per source sentence: ``verdict.SENTENCES``; ``no claim`` and ``not run`` never) and, on a sentence's first
    entry, the sentence's word, and its cost."""
    sentence = sentence_words(rows)
    out = []
    for r in rows:
        e, v, gpu = r.entry, r.verdict, r.gpu_projection
        out.append({"key": e.key, "figure": e.figure, "source": e.source, "section": e.section, "shows": e.shows,
                    "kind": e.kind, "presets": dict(e.presets), "fit_vars": list(e.fit_vars), "law": e.law,
                    "threshold": e.threshold.text() if e.threshold else None, "notes": e.notes, "record": e.record,
                    "measured": e.measured, "built": e.built,
                    "targets": ({v: verdicts.target(e, v) for v in e.fit_vars} if e.kind == "law" else {}),
                    "stored": dict(r.stored) if with_store else None,
                    "verdict": v.word if v else "not run", "verdict_source": v.source if v else None,
                    "verdict_why": v.why if v else None,
                    "firmness": r.firmness.to_dict() if r.firmness else None,
                    "environment": r.environment,
                    "counted": verdicts.counted(e.key) and bool(v) and v.word in verdicts.COUNTED,
                    "sentence": verdicts.sentence_of(e.key),
                    "sentence_verdict": sentence.get(e.key),
                    "cost": {"cpu_minutes": r.cpu_minutes,
                             "cpu_source": "store" if (v and v.source == "runs") else "record",
                             "gpu_minutes_projected": round(gpu.seconds / 60, 1) if gpu else None,
                             "gpu_projection": gpu.line() if gpu else None, "gpu_card": gpu.card if gpu else None,
                             "gpu_minutes_range": [round(gpu.low / 60, 1), round(gpu.high / 60, 1)] if gpu else None}})
    return out
