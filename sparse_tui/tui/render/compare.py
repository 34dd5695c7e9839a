"""Two runs, or two groups of runs, side by side: the final metrics (a group's as mean ± std over its runs, with n)
and the config keys they differ in. Pure: the compare dialog shows what this returns."""

from __future__ import annotations

from rich.console import Group as RichGroup
from rich.table import Table
from rich.text import Text

from sparse_tui.base.dotted import flatten
from sparse_tui.base.numbers import fmt_short
from sparse_tui.science.phase import final_metric
from sparse_tui.store import RunRecord
from sparse_tui.tui.render.groups import Stat

METRICS = (("plateau step", None), ("final test/loss", ("test/loss", "train/loss")), ("final test/acc", ("test/acc",)),
           ("final train/loss", ("train/loss",)))


def _side_name(key: str, members: list[RunRecord]) -> str:
    if len(members) == 1:
        return f"{members[0].run_id}: {members[0].name}"
    return f"{key.removeprefix('g:')} ({len(members)} runs)"


def _stat(members: list[RunRecord], names, last: dict) -> Stat:
    if names is None:
        return Stat.of(r.plateau_step for r in members)
    return Stat.of(final_metric(r, last.get(r.run_id), names) for r in members)


def common_config(members: list[RunRecord]) -> dict[str, str]:
    """The config keys (flattened) with one value over all ``members``; keys whose values differ show "(varies)"."""
    flat = [flatten(r.config or {}) for r in members]
    keys = list(dict.fromkeys(k for f in flat for k in f))
    out = {}
    for k in keys:
        vals = {str(f.get(k, "-")) for f in flat}
        out[k] = vals.pop() if len(vals) == 1 else "(varies)"
    out["preset"] = members[0].preset if len({r.preset for r in members}) == 1 else "(varies)"
    return out


def compare_body(sides: list[tuple[str, list[RunRecord]]], last: dict) -> tuple[str, RichGroup]:
    """(title, body) of the compare dialog for two sides (a run or a group's runs each)."""
    (ka, a), (kb, b) = sides
    na, nb = _side_name(ka, a), _side_name(kb, b)
    m = Table(expand=True, show_edge=False, title="final metrics" + (" (mean ± std, n)" if len(a) + len(b) > 2 else ""),
              title_justify="left")
    m.add_column("metric", style="bold", no_wrap=True)
    m.add_column(f"A {na}", overflow="fold")
    m.add_column(f"B {nb}", overflow="fold")
    m.add_column("B − A", no_wrap=True)
    for title, names in METRICS:
        sa, sb = _stat(a, names, last), _stat(b, names, last)
        if sa.n == 0 and sb.n == 0:
            continue
        cell = lambda s, many: "-" if s.n == 0 else (f"{s.text(4)} (n={s.n})" if many else s.text(4))  # noqa: E731
        d = sb.mean - sa.mean  # in the format of the row's values (21.48k, 42.04k, +20.56k; not +2.056e+04)
        diff = f"{'+' if d >= 0 else '-'}{fmt_short(abs(d), 4)}" if sa.n and sb.n else "-"
        m.add_row(title, cell(sa, len(a) > 1), cell(sb, len(b) > 1), diff)
    ca, cb = common_config(a), common_config(b)
    c = Table(expand=True, show_edge=False, title="config differences", title_justify="left")
    c.add_column("config key", style="bold", no_wrap=True)
    c.add_column("A", overflow="fold")
    c.add_column("B", overflow="fold")
    n_diff = 0
    for k in dict.fromkeys(["preset", *ca, *cb]):
        va, vb = ca.get(k, "-"), cb.get(k, "-")
        if k in ("name", "description") or va == vb:
            continue
        c.add_row(k, va, vb)
        n_diff += 1
    parts = [m, Text("")]
    parts.append(c if n_diff else Text("the two have the same config", style="dim"))
    title = f"Compare A {ka.removeprefix('g:')} and B {kb.removeprefix('g:')}"
    return title, RichGroup(*parts)
