"""Groups of runs over seeds (W&B's "group by", TensorBoard's HParams): the runs that share the values of some swept
parameters, one row per group with the mean ± standard deviation (and n) of the final metrics and the plateau step.

The Runs table shows these rows (``g``), the compare view compares two groups, and the Curves grid draws one chart
per group; the Phase diagram averages the same way (over the runs of a cell). Pure: no Textual.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from rich.text import Text

from sparse_tui.base.numbers import fmt_short
from sparse_tui.science.phase import differing_keys, final_metric
from sparse_tui.store import RunRecord
from sparse_tui.tui.render.runs import STATUS_STYLE, Row, natural, param_text, short_keys, value_key

CELL = 12  # width of a group's mean ± std cells in the run table
GROUP_PREFIX = "g:"  # row keys of group rows in the run table (run ids are hex, never contain ':')


@dataclass
class Stat:
    """Mean, sample standard deviation and count of the finite values."""

    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, values: Iterable[Any]) -> "Stat":
        xs = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
        if not xs:
            return cls(math.nan, math.nan, 0)
        m = sum(xs) / len(xs)
        sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
        return cls(m, sd, len(xs))

    def text(self, digits: int = 3, width: int = 0) -> str:
        """``0.95±0.03`` (``-`` without values; no ± for one value); with ``width``, fewer digits until it fits."""
        if self.n == 0:
            return "-"
        if self.n == 1:
            return fmt_short(self.mean, digits)
        for d in range(digits, 0, -1):
            sd = fmt_short(self.std, 3) if 1 <= abs(self.std) < 1e4 else fmt_short(self.std, min(2, d))
            out = f"{fmt_short(self.mean, d)}±{sd}"  # the spread as 140, not 1.4e+02
            if not width or len(out) <= width:
                return out
        return out


@dataclass
class Group:
    key: str  # the row key in the run table: GROUP_PREFIX + label
    label: str  # "d_model=32" (the short keys and their values)
    values: dict[str, Any]  # {param key: value}
    run_ids: list[str] = field(default_factory=list)
    loss: Stat = field(default_factory=lambda: Stat.of([]))
    acc: Stat = field(default_factory=lambda: Stat.of([]))
    plateau: Stat = field(default_factory=lambda: Stat.of([]))
    emerged: int = 0  # runs whose plateau ended
    ended: int = 0  # runs in a terminal state
    statuses: Counter = field(default_factory=Counter)
    pooled: list[str] = field(default_factory=list)  # the short keys whose values this group's runs pool (g: one key)

    @property
    def n(self) -> int:
        return len(self.run_ids)

    def status_text(self) -> Text:
        """The common status, or the counts (``2 fin 1 fail``)."""
        if len(self.statuses) == 1:
            (st,) = self.statuses
            return Text(st, style=STATUS_STYLE.get(st, ""))
        return Text(" ".join(f"{n}{st[:3]}" for st, n in self.statuses.most_common()), style="yellow")

    def detail(self) -> str:
        over = f"pooled over {', '.join(self.pooled)} and the seeds" if self.pooled else "over the seeds"
        return (f"group {self.label}: {self.n} run(s), {self.emerged} of {self.ended} ended runs left the plateau; "
                f"plateau {self.plateau.text(4)} (n={self.plateau.n}) · loss {self.loss.text()} (n={self.loss.n})"
                f" · acc {self.acc.text()} (n={self.acc.n}) · mean ± sample std {over}")


def group_label(values: dict[str, Any], titles: dict[str, str]) -> str:
    return " ".join(f"{titles[k]}={param_text(v)}" for k, v in values.items() if v is not None) or "other runs"


def group_runs(records: Sequence[RunRecord], keys: Sequence[str], last: dict[str, dict] | None = None,
               pooled: Sequence[str] = ()) -> list[Group]:
    """The runs grouped by the values of ``keys`` (in order of those values: numbers by value), with their stats.
    Like with like: a group's runs agree in every key but the seed and those ``pooled`` (asked for: g by one swept
    key); the other keys in which the runs differ (``phase.differing_keys``: a run trained longer, one from another
    preset) split the groups and join their labels. ``last``: latest metrics of runs without final ones (running,
    failed)."""
    keys = [*keys, *split_keys(records, keys, pooled)]
    titles = short_keys(list(keys))
    by: dict[tuple, list[RunRecord]] = {}
    for r in records:
        vals = tuple((k, r.params.get(k)) for k in keys)
        by.setdefault(vals, []).append(r)
    groups = []
    for vals in sorted(by, key=lambda t: tuple(value_key(v) for _, v in t)):
        recs = by[vals]
        values = dict(vals)
        label = group_label(values, titles)
        lasts = [(last or {}).get(r.run_id) for r in recs]
        g = Group(GROUP_PREFIX + label, label, values, [r.run_id for r in recs])
        g.loss = Stat.of(final_metric(r, lm, ("test/loss", "train/loss")) for r, lm in zip(recs, lasts))
        g.acc = Stat.of(final_metric(r, lm, ("test/acc",)) for r, lm in zip(recs, lasts))
        g.plateau = Stat.of(r.plateau_step for r in recs)
        g.emerged = sum(1 for r in recs if r.plateau_step is not None)
        g.ended = sum(1 for r in recs if r.status not in ("queued", "running"))
        g.statuses = Counter(r.status for r in recs)
        g.pooled = [t for k, t in short_keys(list(pooled)).items()
                    if len({repr(value_key(r.params.get(k))) for r in recs}) > 1]
        groups.append(g)
    return groups


def split_keys(records: Sequence[RunRecord], keys: Sequence[str], pooled: Sequence[str] = ()) -> list[str]:
    """The keys besides ``keys`` (and the seed, and those ``pooled``) in which the runs differ: they split groups."""
    return differing_keys(records, [*keys, *pooled])


def group_row(g: Group, members: Sequence[Row]) -> Row:
    """A run-table row of a group (``render.runs.COLUMNS`` order): the metrics as mean ± std, sortable by mean."""
    miss = lambda s: (s.n == 0, s.mean if s.n else 0.0)  # noqa: E731
    progress = sum(m.keys[4] for m in members) / max(1, len(members))
    cells = (
        f"{g.n} runs", g.status_text(), "", "", f"{progress:.0%}",
        g.plateau.text(3, CELL), g.loss.text(3, CELL), g.acc.text(3, CELL), "", "", f"{g.label} (n={g.n})",
    )
    keys = (
        natural(g.label), " ".join(sorted(g.statuses)), "", g.label, progress,
        miss(g.plateau), miss(g.loss), miss(g.acc), "", max((m.keys[9] for m in members), default=0.0),
        natural(g.label),
    )
    text = " ".join(m.text for m in members)
    return Row(g.key, cells, keys, text, dict(g.values))
