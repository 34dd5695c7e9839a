"""The run table's text: one ``Row`` per run (display cells, sort keys, the text the filter searches; ``table_row``),
tags, sort orders (natural, by value), the swept keys of a set of runs. Names cut to a column: ``names.py``."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from rich.text import Text

from sparse_tui.base.numbers import fmt_age, fmt_num, fmt_short
from sparse_tui.science.phase import final_metric
from sparse_tui.store import RunRecord

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


def run_tags(rec: RunRecord) -> list[str]:
    """The run's tags: the preset's, or as edited after launch (``sparse-tui tag``, T in the console)."""
    return list(rec.tags or [])


_NUM = re.compile(r"(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)", re.IGNORECASE)


def natural(text: str) -> tuple:
    """A sort key that orders the numbers inside a text by value: ``d_model=8`` before ``d_model=60``."""
    out = []
    for part in _NUM.split(str(text)):
        if not part:
            continue
        try:
            out.append((0, float(part), ""))
        except ValueError:
            out.append((1, 0.0, part.lower()))
    return tuple(out)


def value_key(v: Any) -> tuple:
    """A sort key of a parameter value: numbers by value, then texts in natural order, then missing values."""
    if v is None:
        return (2, 0.0, ())
    if isinstance(v, bool):
        return (1, 0.0, natural(str(v)))
    if isinstance(v, (int, float)):
        return (0, float(v), ()) if math.isfinite(v) else (2, 0.0, ())
    return (1, 0.0, natural(str(v)))


def short_keys(keys: Sequence[str]) -> dict[str, str]:
    """Column titles for dotted parameter keys: the last part (``model.d_model`` -> ``d_model``), or more of it
    when two keys would share a title."""
    out: dict[str, str] = {}
    for k in keys:
        parts = k.split(".")
        for n in range(1, len(parts) + 1):
            title = ".".join(parts[-n:])
            if sum(1 for o in keys if ".".join(o.split(".")[-n:]) == title) == 1:
                break
        out[k] = title
    return out


def param_text(v: Any) -> str:
    """A parameter value in a narrow cell."""
    if isinstance(v, float):
        return fmt_num(v, "g")
    return str(v)


def speed(rec: RunRecord) -> float | None:
    """Training steps per second of a running run since it started (its step over the time to its last
    heartbeat); None before it has one."""
    if rec.status != "running" or not rec.started_at or not rec.heartbeat_at or rec.step <= 0:
        return None
    dt = rec.heartbeat_at - rec.started_at
    return rec.step / dt if dt > 0 else None


def eta(rec: RunRecord) -> float | None:
    """Seconds a running run still needs at its speed so far."""
    v = speed(rec)
    if v is None or not rec.total_steps:
        return None
    return max(0.0, (rec.total_steps - rec.step) / v)


def batch_eta(records: Iterable[RunRecord], batch_id: str) -> float | None:
    """Seconds a batch still needs: the steps its running and queued runs have left, at the summed speed of its
    running runs (queued runs start as running ones end, at about that pace)."""
    recs = [r for r in records if r.batch_id == batch_id and r.status in ("running", "queued")]
    rates = [v for v in (speed(r) for r in recs) if v]
    if not rates:
        return None
    left = sum(max(0, (r.total_steps or 0) - r.step) for r in recs)
    return left / sum(rates)


def params_text(rec: RunRecord) -> str:
    """The swept params (short names) of a run, or its label."""
    parts = [f"{k.split('.')[-1]}={v}" for k, v in rec.swept.items()]
    return " ".join(parts) if parts else (rec.label or "")


@dataclass
class Row:
    run_id: str
    cells: tuple[Any, ...]  # display values (str or Text)
    keys: tuple[Any, ...]  # sort keys, one per column
    text: str  # lower-case text searched by the filter
    params: dict = field(default_factory=dict)  # the run's parameters (the hyperparameter columns)
    tags: tuple[str, ...] = ()
    step: int = 0


def table_row(rec: RunRecord, last: dict | None, now: float, forecast: dict | None = None) -> Row:
    """A run as the run table shows it: display cells, sort keys, the text the filter searches. The plateau cell
    shows the emergence forecast (forecast.py) until the run leaves its plateau: '~1.2k'."""
    loss = final_metric(rec, last, ("test/loss", "train/loss"))
    acc = final_metric(rec, last, ("test/acc",))
    age = now - rec.created_at if rec.created_at else None
    status, params, tags = rec.status, params_text(rec), run_tags(rec)
    total = rec.total_steps or 0
    cells = (
        rec.run_id,
        Text(status, style=STATUS_STYLE.get(status, "")),
        rec.preset,
        params,
        f"{fmt_short(rec.step)}/{fmt_short(total)}",
        plateau_text(rec.plateau_step, forecast),
        fmt_short(loss),
        fmt_num(acc, ".3f"),
        rec.device or "-",
        fmt_age(age),
        rec.name,
    )
    nan_last = lambda v: (v is None or (isinstance(v, float) and math.isnan(v)), v if v is not None else 0)  # noqa
    keys = (
        rec.run_id,
        status,
        rec.preset,
        params,
        rec.step / total if total else 0.0,
        nan_last(rec.plateau_step),
        nan_last(loss),
        nan_last(acc),
        rec.device or "",
        rec.created_at or 0.0,
        natural(rec.name),
    )
    text = " ".join([rec.run_id, status, rec.preset, params, rec.label or "", rec.device or "", *tags,
                     rec.note or ""]).lower()
    return Row(rec.run_id, cells, keys, text, dict(rec.params), tuple(tags), rec.step)


def plateau_text(step: float | None, forecast: dict | None) -> str:
    """The plateau cell: the plateau step (live: written when the run leaves it), else the emergence forecast
    ('~1.2k', forecast.py); the forecast in full is on the detail line."""
    from sparse_tui.science.forecast import short

    return fmt_short(step, 4) if step is not None or forecast is None else short(forecast)


# Columns whose natural first order is high to low (s picks it; r reverses): accuracy, progress, age (newest first).
DESCENDING_FIRST = {"acc", "step", "age"}


def _missing(k: Any) -> bool:
    return isinstance(k, tuple) and len(k) == 2 and k[0] is True  # the (missing, value) keys of table_row


def sort_key(column: str) -> Callable[[Row], Any]:
    """The sort key of a column: one of ``COLUMNS`` or ``hp:KEY`` (a hyperparameter, numbers by value)."""
    if column.startswith("hp:"):
        key = column[3:]
        return lambda r: value_key(r.params.get(key))
    i = COLUMNS.index(column)
    return lambda r: r.keys[i]


def sort_rows(rows: list[Row], column: str, descending: bool) -> list[Row]:
    """Rows sorted by a column, ascending or descending; rows without a value (no plateau, no accuracy yet, no
    such parameter) last either way."""
    key = sort_key(column)

    def absent(r: Row) -> bool:
        k = key(r)
        return _missing(k) or (isinstance(k, tuple) and len(k) == 3 and k[0] == 2)

    have = [r for r in rows if not absent(r)]
    rest = [r for r in rows if absent(r)]
    return sorted(have, key=key, reverse=descending) + rest


def sort_words(column: str, descending: bool) -> str:
    """What a sort order means, in words: ``↓ high→low``, ``↑ A→Z``, ``↓ newest first``."""
    if column == "age":
        return "↓ newest first" if descending else "↑ oldest first"
    if column in ("run", "name", "status", "preset", "device", "params"):
        return "↓ Z→A" if descending else "↑ A→Z"
    return "↓ high→low" if descending else "↑ low→high"


def _same(v: Any) -> Any:
    """A hashable stand-in of a parameter value under which equal values meet (1 and 1.0; every NaN), cheap enough
    for every parameter of thousands of runs per refresh (``repr(value_key(v))`` cost 0.5 s at 2,000 runs)."""
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, (int, float)):
        return v if math.isfinite(v) else ("nonfinite",)
    if isinstance(v, str) or v is None:
        return v
    return repr(value_key(v))


def swept_keys(records: Iterable[RunRecord]) -> list[str]:
    """Params that take more than one value among the runs (seed excluded), in first-seen order."""
    seen: dict[str, set] = {}  # (in first-seen order)
    for r in records:
        for k, v in r.params.items():
            if k not in ("seed", "name", "description"):
                seen.setdefault(k, set()).add(_same(v))  # 1 and 1.0 are one value
    swept = [k for k, values in seen.items() if len(values) > 1]
    # Prefer keys that the presets declared as swept.
    declared = list(dict.fromkeys(k for r in records for k in r.swept if k != "seed"))
    return [k for k in declared if k in swept] + [k for k in swept if k not in declared]


def varied_keys(records: Sequence[RunRecord]) -> list[str]:
    """The hyperparameters a researcher varied among these runs: the keys that take more than one value within the
    runs of one preset (a sweep, or runs launched with --set), the seed last. Keys that differ only between presets
    (task.kind between a recall and a linreg preset) are not: ``o`` in the Runs panel offers them too."""
    by: dict[str, list[RunRecord]] = {}
    for r in records:
        by.setdefault(r.preset, []).append(r)
    keys: list[str] = []
    for recs in by.values():
        keys += [k for k in swept_keys(recs) if k not in keys]
        if "seed" not in keys and len({r.params.get("seed") for r in recs}) > 1:
            keys.append("seed")
    return [k for k in keys if k != "seed"] + (["seed"] if "seed" in keys else [])
