"""The run table's text: one ``Row`` per run (display cells, sort keys, the text the filter searches), run names,
tags, the config difference of two runs, the swept keys of a set of runs, and name cutting for narrow columns."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from rich.text import Text

from sparse_tui.store import RunRecord
from sparse_tui.tui.render.numbers import fmt_age, fmt_num, fmt_short

STATUS_STYLE = {
    "queued": "dim",
    "running": "bold cyan",
    "finished": "green",
    "diverged": "yellow",
    "failed": "bold red",
    "interrupted": "magenta",
    "cancelled": "dim magenta",
}

COLUMNS = ("run", "status", "preset", "params", "step", "plateau", "loss", "acc", "device", "age", "name")
STATUS = COLUMNS.index("status")


def run_name(rec: RunRecord) -> str:
    """What tells a run apart (tables, legends, the compare view): its preset and its label (the swept values and
    the keys edited away from the preset file, then the seed)."""
    return f"{rec.preset} {rec.label or ''}".strip()


def run_tags(rec: RunRecord) -> list[str]:
    tags = (rec.config or {}).get("tags") or []
    return [str(t) for t in tags] if isinstance(tags, list) else []


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            if isinstance(v, dict):
                out.update(_flat(v, f"{prefix}{k}."))
            else:
                out[f"{prefix}{k}"] = v
    return out


def config_diff(a: RunRecord, b: RunRecord) -> list[tuple[str, str, str]]:
    """The config keys two runs differ in, as (dotted key, value of a, value of b), in a's key order then b's; a key
    one of them lacks shows "-". What the compare view lists (with the preset when that differs)."""
    fa, fb = _flat(a.config or {}), _flat(b.config or {})
    rows = []
    if a.preset != b.preset:
        rows.append(("preset", a.preset, b.preset))
    for k in dict.fromkeys([*fa, *fb]):
        va, vb = fa.get(k, "-"), fb.get(k, "-")
        if k in ("name", "description") or va == vb:
            continue
        rows.append((k, str(va), str(vb)))
    return rows



def fit_name(name: str, width: int) -> str:
    """A run name cut to ``width`` the same way for every run: from the front, so that its end stays (the swept
    values and the seed tell runs of one preset apart; the detail line shows the whole name)."""
    if len(name) <= width:
        return name
    return "…" + name[-(width - 1):] if width > 1 else "…"



def params_text(rec: RunRecord) -> str:
    """The swept params (short names) of a run, or its label."""
    parts = [f"{k.split('.')[-1]}={v}" for k, v in rec.swept.items()]
    return " ".join(parts) if parts else (rec.label or "")


def final_metric(rec: RunRecord, last: dict | None, names: Sequence[str]) -> float | None:
    src = rec.final or last or {}
    for n in names:
        if n in src and src[n] is not None:
            return src[n]
    return None


@dataclass
class Row:
    run_id: str
    cells: tuple[Any, ...]  # display values (str or Text)
    keys: tuple[Any, ...]  # sort keys, one per column
    text: str  # lower-case text searched by the filter


def run_row(rec: RunRecord, last: dict | None, now: float) -> Row:
    loss = final_metric(rec, last, ("test/loss", "train/loss"))
    acc = final_metric(rec, last, ("test/acc",))
    age = now - rec.created_at if rec.created_at else None
    status = rec.status
    st = Text(status, style=STATUS_STYLE.get(status, ""))
    total = rec.total_steps or 0
    cells = (
        rec.run_id,
        st,
        rec.preset,
        params_text(rec),
        f"{fmt_short(rec.step)}/{fmt_short(total)}",
        fmt_short(rec.plateau_step, 4),
        fmt_short(loss),
        fmt_num(acc, ".3f"),
        rec.device or "-",
        fmt_age(age),
        run_name(rec),
    )
    nan_last = lambda v: (v is None or (isinstance(v, float) and math.isnan(v)), v if v is not None else 0)  # noqa
    keys = (
        rec.run_id,
        status,
        rec.preset,
        params_text(rec),
        rec.step / total if total else 0.0,
        nan_last(rec.plateau_step),
        nan_last(loss),
        nan_last(acc),
        rec.device or "",
        -(rec.created_at or 0.0),
        run_name(rec),
    )
    text = " ".join([rec.run_id, status, rec.preset, params_text(rec), rec.label or "", rec.device or "",
                     *run_tags(rec)]).lower()
    return Row(rec.run_id, cells, keys, text)


def matches(row: Row, query: str) -> bool:
    """Every whitespace-separated word must occur (``status:running`` style words match exactly on status)."""
    for word in query.lower().split():
        if word.startswith("status:"):
            if row.keys[STATUS] != word[7:]:
                return False
        elif word not in row.text:
            return False
    return True


def sort_rows(rows: list[Row], column: int, reverse: bool) -> list[Row]:
    return sorted(rows, key=lambda r: r.keys[column], reverse=reverse)


# ---------------------------------------------------------------------------------------------------------------
# Heatmaps
# ---------------------------------------------------------------------------------------------------------------

# A perceptual ramp (viridis-like): dark blue -> green -> yellow.

def swept_keys(records: Iterable[RunRecord]) -> list[str]:
    """Params that take more than one value among the runs (seed excluded), in first-seen order."""
    seen: dict[str, set] = {}
    order: list[str] = []
    for r in records:
        for k, v in r.params.items():
            if k in ("seed", "name", "description"):
                continue
            key = repr(v)
            if k not in seen:
                seen[k] = set()
                order.append(k)
            seen[k].add(key)
    swept = [k for k in order if len(seen[k]) > 1]
    # Prefer keys that the presets declared as swept.
    declared: list[str] = []
    for r in records:
        for k in r.swept:
            if k != "seed" and k not in declared:
                declared.append(k)
    return [k for k in declared if k in swept] + [k for k in swept if k not in declared]
