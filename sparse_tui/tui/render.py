"""Pure helpers of the console: run-table rows, sorting/filtering, colour heatmaps and phase-diagram grids.

Nothing here imports Textual; the functions return plain values or Rich ``Text`` and run in worker threads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from rich.style import Style
from rich.text import Text

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


def fmt_num(v: Any, spec: str = ".3g") -> str:
    if v is None:
        return "-"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if not math.isfinite(f):
        return "nan" if math.isnan(f) else ("inf" if f > 0 else "-inf")
    if f.is_integer() and abs(f) < 1e7 and spec == "g":
        return str(int(f))
    return format(f, spec)


def fmt_short(v: Any, digits: int = 3) -> str:
    """A number in at most about 6 characters for narrow columns: 0.221, 2.5e-6, 21.5k, 1.2M."""
    if v is None:
        return "-"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if not math.isfinite(f):
        return "nan" if math.isnan(f) else ("inf" if f > 0 else "-inf")
    a = abs(f)
    if a >= 1e6:
        return f"{f / 1e6:.{max(1, digits - 1)}g}M"
    if a >= 1e4:
        return f"{f / 1e3:.{digits}g}k"
    if a != 0 and a < 1e-3:
        m, e = f"{f:.{max(0, digits - 2)}e}".split("e")
        return f"{m.rstrip('0').rstrip('.')}e{int(e)}"
    return f"{f:.{digits}g}" if a < 1000 else str(int(round(f)))


def fit_name(name: str, preset: str, width: int) -> str:
    """A run name cut to ``width``, keeping its end (the swept values tell runs of one preset apart)."""
    if len(name) <= width:
        return name
    import re

    rest = name[len(preset):].strip() if name.startswith(preset) else name
    rest = re.sub(r"\s*\bseed=0$", "", rest)  # the default seed says nothing; the detail line has it
    if not rest:
        return preset[: width - 1] + "…"
    if len(rest) + 3 <= width:
        return preset[: width - len(rest) - 2] + "… " + rest
    return "…" + rest[-(width - 1):]


def fmt_age(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}"
    return f"{s // 86400}d"


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
_RAMP = [
    (68, 1, 84),
    (72, 40, 120),
    (62, 74, 137),
    (49, 104, 142),
    (38, 130, 142),
    (31, 158, 137),
    (53, 183, 121),
    (109, 205, 89),
    (180, 222, 44),
    (253, 231, 37),
]


def ramp(x: float) -> tuple[int, int, int]:
    """Colour of a value in [0, 1]."""
    if not math.isfinite(x):
        return (40, 40, 40)
    x = min(1.0, max(0.0, x))
    pos = x * (len(_RAMP) - 1)
    i = min(int(pos), len(_RAMP) - 2)
    f = pos - i
    a, b = _RAMP[i], _RAMP[i + 1]
    return tuple(int(round(a[j] + (b[j] - a[j]) * f)) for j in range(3))  # type: ignore[return-value]


def _bg(rgb: tuple[int, int, int]) -> Style:
    lum = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]
    return Style(bgcolor=f"rgb({rgb[0]},{rgb[1]},{rgb[2]})", color="black" if lum > 140 else "white")


def scale_bar(vmin: float, vmax: float, width: int = 20, label: str = "", log: bool = False) -> Text:
    t = Text()
    if label:
        t.append(label + " ")
    t.append(fmt_num(vmin) + " ")
    for i in range(width):
        t.append(" ", style=_bg(ramp(i / max(1, width - 1))))
    t.append(" " + fmt_num(vmax))
    if log:
        t.append(" (log)")
    return t


def heatmap(
    matrix: Sequence[Sequence[float]],
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    vmin: float | None = None,
    vmax: float | None = None,
    cell: int = 2,
    marks: dict[tuple[int, int], str] | None = None,
    values: bool = False,
    log: bool = False,
) -> Text:
    """A colour heatmap as Rich text: one coloured cell per entry, row labels left, column labels on top.

    ``marks`` puts a character into given cells (e.g. the copy/selection targets); ``values`` prints the numbers."""
    flat = [v for row in matrix for v in row if v is not None and math.isfinite(v) and (not log or v > 0)]
    tr: Callable[[float], float] = (lambda v: math.log10(v)) if log else (lambda v: v)
    lo = tr(vmin) if vmin is not None else (tr(min(flat)) if flat else 0.0)
    hi = tr(vmax) if vmax is not None else (tr(max(flat)) if flat else 1.0)
    span = hi - lo if hi > lo else 1.0
    lw = max((len(s) for s in row_labels), default=0)
    out = Text(no_wrap=True, overflow="crop")
    # column header (labels truncated to the cell width)
    out.append(" " * (lw + 1))
    for lab in col_labels:
        out.append(str(lab)[:cell].rjust(cell), style="dim")
    out.append("\n")
    marks = marks or {}
    for i, row in enumerate(matrix):
        out.append(str(row_labels[i]).rjust(lw) + " ", style="dim")
        for j, v in enumerate(row):
            ok = v is not None and math.isfinite(v) and (not log or v > 0)
            rgb = ramp((tr(v) - lo) / span) if ok else (40, 40, 40)
            if values and ok:
                txt = fmt_num(v, ".3g")[:cell].rjust(cell)
            else:
                txt = marks.get((i, j), "").center(cell)[:cell] if (i, j) in marks else " " * cell
                if not ok and (i, j) not in marks:
                    txt = "·".center(cell)
            out.append(txt, style=_bg(rgb))
        out.append("\n")
    return out


def token_label(tok: Any, n_tokens: int | None = None) -> str:
    return str(tok)


# ---------------------------------------------------------------------------------------------------------------
# Phase diagrams
# ---------------------------------------------------------------------------------------------------------------


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


def _sortable(v: Any) -> tuple:
    return (0, float(v), "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0.0, str(v))


PHASE_VALUES = {
    "plateau": "plateau step (mean over seeds; runs that never emerged count as missing)",
    "acc": "final test accuracy (mean over seeds)",
    "loss": "final test loss (mean over seeds)",
    "emerged": "fraction of seeds whose plateau ended",
}


def phase_grid(records: Iterable[RunRecord], x_key: str, y_key: str, value: str = "plateau",
               last: dict[str, dict] | None = None) -> tuple[list[Any], list[Any], list[list[float]], list[list[int]]]:
    """Grid of a value over two params: (xs, ys, values[y][x], counts[y][x]). Only ended runs count."""
    cells: dict[tuple[Any, Any], list[float]] = {}
    xs: set = set()
    ys: set = set()
    for r in records:
        if x_key not in r.params or y_key not in r.params:
            continue
        if r.status not in ("finished", "diverged", "cancelled", "interrupted", "failed") and value != "acc":
            pass
        x, y = r.params[x_key], r.params[y_key]
        xs.add(x)
        ys.add(y)
        if value == "plateau":
            v = r.plateau_step if r.plateau_step is not None else math.nan
        elif value == "emerged":
            if r.status == "running" or r.status == "queued":
                continue
            v = 1.0 if r.plateau_step is not None else 0.0
        elif value == "acc":
            v = final_metric(r, (last or {}).get(r.run_id), ("test/acc",))
            v = math.nan if v is None else v
        else:
            v = final_metric(r, (last or {}).get(r.run_id), ("test/loss", "train/loss"))
            v = math.nan if v is None else v
        cells.setdefault((x, y), []).append(v)
    xs_l = sorted(xs, key=_sortable)
    ys_l = sorted(ys, key=_sortable)
    grid, counts = [], []
    for y in ys_l:
        row, crow = [], []
        for x in xs_l:
            vals = [v for v in cells.get((x, y), []) if math.isfinite(v)]
            row.append(sum(vals) / len(vals) if vals else math.nan)
            crow.append(len(cells.get((x, y), [])))
        grid.append(row)
        counts.append(crow)
    return xs_l, ys_l, grid, counts


# ---------------------------------------------------------------------------------------------------------------
# Attention maps
# ---------------------------------------------------------------------------------------------------------------


def render_attention(maps: dict, meta: dict, layer: str, head: int, example: int, width: int = 76,
                     task: str | None = None) -> tuple[Text, str]:
    """One attention map [Lq, L] (layer, head, example) as a heatmap with marks and a scale. Returns (text, info).

    Marks: ``s`` the readout's target (recall: the relevant value = selection, Fig. 17 right; linreg / nearest: the
    relevant token), ``c`` the copy target (recall: relevant value position -> its key, Fig. 17 middle)."""
    a = maps[layer]  # [H, E, Lq, L]
    H, E, Lq, L = a.shape
    head = min(head, H - 1)
    example = min(example, E - 1)
    m = a[head, example]
    off = L - Lq
    tokens = (meta.get("tokens") or [None] * E)[example] if meta.get("tokens") else None
    rel = (meta.get("relevant") or [[0] * L] * E)[example]
    marks: dict[tuple[int, int], str] = {}
    for j, r in enumerate(rel[:L]):
        if r:
            marks[(Lq - 1, j)] = "s"
    if meta.get("copy_q") is not None and meta.get("copy_k") is not None:
        cq = meta["copy_q"][example]
        ck = meta["copy_k"][example]
        if cq is not None and cq >= 0 and cq - off >= 0:
            marks[(cq - off, ck)] = "c"
    lw = 6
    cell = max(1, min(3, (width - lw - 2) // max(1, L)))
    row_labels = [f"{off + i}" + (f":{tokens[off + i]}" if tokens else "") for i in range(Lq)]
    col_labels = [str(tokens[j]) if tokens else str(j) for j in range(L)] if cell >= 2 else [""] * L
    body = heatmap(m.tolist(), row_labels, col_labels, vmin=0.0, vmax=1.0, cell=cell, marks=marks)
    body.append("\n")
    body.append_text(scale_bar(0.0, 1.0, width=min(20, max(8, width - 20)), label="attention"))
    body.append("   s: selection / relevant   c: copy (value → its key)" if meta.get("copy_q") is not None
                else "   s: relevant token")
    readout = m[-1]
    sel = sum(float(readout[j]) for j, r in enumerate(rel[:L]) if r)
    info = f"{layer} head {head}/{H - 1} example {example}/{E - 1} · rows: query position" + (":token" if tokens else "")
    info += f" · readout → relevant {sel:.2f}"
    if (Lq - 1, 0) and meta.get("copy_q") is not None:
        cq, ck = meta["copy_q"][example], meta["copy_k"][example]
        if cq - off >= 0:
            info += f" · copy {float(m[cq - off][ck]):.2f}"
    return body, info


# ---------------------------------------------------------------------------------------------------------------
# Fits
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class FitRequest:
    """A fit as ``sparse-tui fit`` arguments: what the Fit panel asks ``fitreport.fit_store`` for, and the command
    line that prints the same numbers (``argv``)."""

    variables: list[str]
    run_ids: list[str] = field(default_factory=list)  # empty: every run (narrowed by preset / batch / where)
    preset: str | None = None
    batch: str | None = None
    where: list[str] = field(default_factory=list)
    tie: str | None = None
    bootstrap: int = 0
    seed: int = 0
    target: str = "plateau_step"
    paper: str = "auto"

    def kwargs(self) -> dict[str, Any]:
        return {"run_ids": list(self.run_ids), "preset": self.preset, "batch": self.batch, "where": list(self.where),
                "tie": self.tie, "bootstrap": self.bootstrap, "seed": self.seed, "target": self.target,
                "paper": self.paper}

    def argv(self, max_ids: int | None = None) -> list[str]:
        """``sparse-tui fit`` arguments (without --runs-dir); ``max_ids`` shortens a long id list for display."""
        ids = list(self.run_ids)
        if max_ids is not None and len(ids) > max_ids:
            ids = ids[:max_ids] + [f"…(+{len(ids) - max_ids})"]
        out = ids
        for flag, v, default in (("--preset", self.preset, None), ("--batch", self.batch, None)):
            if v != default:
                out += [flag, str(v)]
        for w in self.where:
            out += ["--where", w]
        out += ["--vars", ",".join(self.variables)]
        for flag, v, default in (("--tie", self.tie, None), ("--bootstrap", self.bootstrap, 0),
                                 ("--seed", self.seed, 0), ("--target", self.target, "plateau_step"),
                                 ("--paper", self.paper, "auto")):
            if v != default:
                out += [flag, str(v)]
        return out

    def command(self, max_ids: int | None = 3) -> str:
        import shlex

        return "sparse-tui fit " + " ".join(a if a.startswith("…") else shlex.quote(a) for a in self.argv(max_ids))


FIT_OPTIONS = {"preset": str, "batch": str, "where": list, "tie": str, "bootstrap": int, "seed": int,
               "target": str, "paper": str}
_FIT_ALIASES = {"boot": "bootstrap"}


def parse_fit_options(text: str) -> dict[str, Any]:
    """The Fit panel's options line, ``sparse-tui fit`` style: ``--tie d:0.5,T:1 --bootstrap 200 --seed 1
    --target plateau_time --paper none --where task.B=2 --preset NAME --batch ID`` (also ``--opt=value``,
    ``opt=value``, ``boot 200``). Returns {option: value} (``where`` a list); raises ``FitError`` in one line."""
    import shlex

    from sparse_tui.fitreport import FitError, parse_tie, parse_where

    try:
        toks = shlex.split(text or "")
    except ValueError as e:
        raise FitError(f"options: {e}") from None
    out: dict[str, Any] = {}
    known = ", ".join("--" + k for k in FIT_OPTIONS)
    i = 0
    while i < len(toks):
        tok = toks[i]
        name, sep, val = tok.lstrip("-").partition("=")
        name = _FIT_ALIASES.get(name, name)
        if name == "vars":
            raise FitError("options: put the variables in the vars field (e.g. d T/B)")
        if name not in FIT_OPTIONS:
            raise FitError(f"options: unknown {tok!r}; use {known}")
        if not sep:
            if i + 1 >= len(toks):
                raise FitError(f"options: --{name} needs a value")
            val = toks[i + 1]
            i += 1
        i += 1
        kind = FIT_OPTIONS[name]
        if kind is int:
            try:
                out[name] = int(val)
            except ValueError:
                raise FitError(f"options: --{name} needs a whole number, got {val!r}") from None
            if out[name] < 0:
                raise FitError(f"options: --{name}: must be >= 0")
        elif kind is list:
            parse_where([val])
            out.setdefault(name, []).append(val)
        else:
            if name == "tie":
                parse_tie(val)
            out[name] = val
    return out


def run_fit(store: Any, req: FitRequest) -> Any:
    """The fit of ``sparse-tui fit REQ.argv()``: ``fitreport.fit_store`` (a ``FitReport``)."""
    from sparse_tui import fitreport

    return fitreport.fit_store(store, req.variables, **req.kwargs())


def fit_plot(report: Any) -> dict:
    """Plot data of a ``FitReport``: x = the theory forecast prod x_i^forecast_i (variables that have one),
    y = the measured target and the fitted law at each run; censored runs at their lower bound."""
    from sparse_tui import fitting
    from sparse_tui.theory import forecast_exponents

    res = report.result
    rows = report.selection.rows
    target = res.target
    if target == "plateau_time":
        from sparse_tui.fitreport import _with_time_target

        rows = _with_time_target(rows)
    fc = forecast_exponents()
    fc["T/B"] = 1.0
    analog = getattr(fitting, "_RECALL_ANALOGUE", {})
    resolver = fitting._Resolver(rows)
    censored = {c["row"]: c for c in res.censored}
    pts, cens = [], []
    for i, r in enumerate(rows):
        try:
            xv = {v: resolver.value(r, v, i) for v in res.variables}
        except Exception:  # noqa: BLE001 - a row the fit also could not use
            continue
        f = 1.0
        for v, x in xv.items():
            e = fc.get(analog.get(fitting.short_name(v), fitting.short_name(v)))
            if e is not None:
                f *= x ** e
        if i in censored:
            lb = censored[i].get("lower_bound")
            if lb:
                cens.append((f, float(lb)))
            continue
        y = r.get(target)
        if y is None or (isinstance(y, float) and math.isnan(y)):
            continue
        pts.append((f, float(y), res.predict(**xv)))
    pts.sort()
    return {
        "x": [p[0] for p in pts],
        "y": [p[1] for p in pts],
        "fit": [p[2] for p in pts],
        "cx": [c[0] for c in cens],
        "cy": [c[1] for c in cens],
    }


def fit_table(report: Any, req: FitRequest | None = None) -> Text:
    """Fitted exponents with intervals (and bootstrap intervals) beside the theory forecast and the paper's fit,
    the tied scale, the selection, and the equivalent ``sparse-tui fit`` command."""
    def f(x, fmt="+.2f"):
        return "—" if x is None else format(x, fmt)

    res, comp = report.result, report.comparison
    boot = bool(res.boot_ci)
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{'var':>9} {'fitted':>7} {'95% CI':>15}" + (f" {'bootstrap':>15}" if boot else "")
             + f" {'theory':>6} {'paper':>6}\n", style="bold")
    for r in comp:
        v = r["variable"]
        ci = f"[{r['ci'][0]:+.2f},{r['ci'][1]:+.2f}]"
        ok = r["forecast_in_ci"]
        t.append(f"{str(v)[-9:]:>9} {r['fitted']:>+7.2f} {ci:>15} ")
        if boot:
            b = res.boot_ci.get(v)
            t.append(f"{'—' if b is None else f'[{b[0]:+.2f},{b[1]:+.2f}]':>15} ")
        t.append(f"{f(r['forecast']):>6}", style="green" if ok else ("red" if ok is False else ""))
        pok = r["paper_in_ci"]
        t.append(f" {f(r['paper']):>6}", style="green" if pok else ("red" if pok is False else ""))
        t.append(f" {r['paper_fig'] or ''}\n", style="dim")
    t.append(f"R² = {res.r2:.3f} · n = {res.n} · censored = {res.n_censored}", style="bold")
    if res.n_censored_inconsistent:
        t.append(f" ({res.n_censored_inconsistent} above the law)", style="yellow")
    t.append(f" · C = {res.C:.3g}")
    if res.tie:
        lo, hi = res.tie_scale_ci
        t.append(f" · tied s = {res.tie_scale:.3f} [{lo:.2f},{hi:.2f}]")
    if res.boot_skipped:
        t.append(f" · {res.boot_skipped} resamples skipped", style="yellow")
    sel = report.selection
    line = f"\n{len(sel.rows)} of {sel.matched} finished"
    if sel.skipped:
        line += " (skipped " + ", ".join(f"{n} {st}" for st, n in sorted(sel.skipped.items())) + ")"
    if req is not None:
        line += " · " + req.command()
    elif sel.criteria:
        line += " · " + ", ".join(sel.criteria)
    t.append(line, style="dim")
    return t
