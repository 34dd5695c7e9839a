"""The Fit panel's request (the ``sparse-tui fit`` arguments of its fields), its options line, the fit itself
(``fitreport.fit_store``, the function behind ``sparse-tui fit``), and what the panel shows of the report: the
table beside the theory forecast and the paper's fits, and the log-log plot's data."""

from __future__ import annotations

import math
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.text import Text

from sparse_tui.base.plotting import fmt_r2


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
    threshold: float | None = None  # re-read the plateaus at this absolute value (``fitreport.reread_plateaus``)

    def kwargs(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "variables"}

    def argv(self, max_ids: int | None = None) -> list[str]:
        """``sparse-tui fit`` arguments (without --runs-dir); ``max_ids`` shortens a long id list for display."""
        ids = list(self.run_ids)
        if max_ids is not None and len(ids) > max_ids:
            ids = ids[:max_ids] + [f"…(+{len(ids) - max_ids})"]
        flags = [("--preset", self.preset, None), ("--batch", self.batch, None),
                 *(("--where", w, None) for w in self.where), ("--vars", ",".join(self.variables), None),
                 ("--tie", self.tie, None), ("--bootstrap", self.bootstrap, 0), ("--seed", self.seed, 0),
                 ("--target", self.target, "plateau_step"), ("--paper", self.paper, "auto"),
                 ("--threshold", self.threshold, None)]
        return ids + [a for flag, v, default in flags if v != default for a in (flag, str(v))]

    def command(self, max_ids: int | None = 3) -> str:
        return "sparse-tui fit " + " ".join(a if a.startswith("…") else shlex.quote(a) for a in self.argv(max_ids))


FIT_OPTIONS = {"preset": str, "batch": str, "where": list, "tie": str, "bootstrap": int, "seed": int,
               "target": str, "paper": str, "threshold": float}
_FIT_ALIASES = {"boot": "bootstrap"}


def parse_fit_options(text: str) -> dict[str, Any]:
    """The Fit panel's options line, ``sparse-tui fit`` style: ``--tie d:0.5,T:1 --bootstrap 200 --seed 1
    --target plateau_time --paper none --threshold 0.4 --where task.B=2 --preset NAME --batch ID`` (also
    ``--opt=value``, ``opt=value``, ``boot 200``). Returns {option: value} (``where`` a list); raises ``FitError``
    in one line."""
    from sparse_tui.reports.fitreport import parse_threshold
    from sparse_tui.reports.selection import parse_tie, parse_where
    from sparse_tui.science.fitting import FitError

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
        elif kind is float:
            out[name] = parse_threshold(val)
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
    from sparse_tui.reports import fitreport

    return fitreport.fit_store(store, req.variables, **req.kwargs())


def fit_plot(report: Any) -> dict:
    """Plot data of a ``FitReport``: x = the theory forecast prod x_i^forecast_i (variables that have one),
    y = the measured target and the fitted law at each run; censored runs at their lower bound. ``curve``: the fitted
    law is a function of x (every fitted variable has a forecast exponent), so it is drawn as a line; else (a fit over
    n_layers, lr, embed_scale ...) as one point per run, since runs at one x may have different fitted values. When
    no fitted variable has a forecast (lr, train_size) x would be 1 for every run: x is then the fitted law itself
    (``xlabel`` says which), measured against fitted, the law the line y = x."""
    from sparse_tui.science import fitting
    from sparse_tui.science.theory import forecast_exponents

    res = report.result
    rows = report.selection.rows
    target = res.target
    if target == "plateau_time":
        from sparse_tui.reports.fitreport import with_time_target

        rows = with_time_target(rows)
    fc = forecast_exponents()
    fc["T/B"] = 1.0
    analog = getattr(fitting, "_RECALL_ANALOGUE", {})
    resolver = fitting.Resolver(rows)
    censored = {c["row"]: c for c in res.censored}
    exps = {v: fc.get(analog.get(fitting.short_name(v), fitting.short_name(v))) for v in res.variables}
    by_law = all(e is None for e in exps.values())  # no theory axis: measured against the fitted law
    pts, cens = [], []
    for i, r in enumerate(rows):
        try:
            xv = {v: resolver.value(r, v, i) for v in res.variables}
        except Exception:  # noqa: BLE001 - a row the fit also could not use
            continue
        f = res.predict(**xv) if by_law else math.prod(x ** exps[v] for v, x in xv.items() if exps[v] is not None)
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
    return {"x": [p[0] for p in pts], "y": [p[1] for p in pts], "fit": [p[2] for p in pts],
            "cx": [c[0] for c in cens], "cy": [c[1] for c in cens],
            "curve": by_law or all(e is not None for e in exps.values()),
            "xlabel": "fitted law C·Πxᵢ^βᵢ (no variable has a theory exponent)" if by_law else FORECAST_AXIS}


FORECAST_AXIS = "theory forecast Πxᵢ^forecastᵢ"


def fit_table(report: Any, req: FitRequest | None = None) -> Text:
    """Fitted exponents with intervals (and bootstrap intervals) beside the theory forecast and the paper's fit,
    the tied scale, the selection, and the equivalent ``sparse-tui fit`` command."""
    def f(x, fmt="+.2f"):
        return "—" if x is None else format(x, fmt)

    res, comp = report.result, report.comparison
    boot = bool(res.boot_ci)
    t = Text(no_wrap=True, overflow="ellipsis")
    short = {str(r["variable"]): "/".join(k.split(".")[-1] for k in str(r["variable"]).split("/")) for r in comp}
    names = {v: n if list(short.values()).count(n) == 1 else v for v, n in short.items()}  # d_model, never l.d_model
    vw = max([9] + [len(n) for n in names.values()])
    t.append(f"{'var':>{vw}} {'fitted':>7} {'95% CI':>15}" + (f" {'bootstrap':>15}" if boot else "")
             + f" {'theory':>6} {'paper':>6}\n", style="bold")
    for r in comp:
        v = r["variable"]
        ci = f"[{r['ci'][0]:+.2f},{r['ci'][1]:+.2f}]"
        ok = r["forecast_in_ci"]
        t.append(f"{names[str(v)]:>{vw}} {r['fitted']:>+7.2f} {ci:>15} ")
        if boot:
            b = res.boot_ci.get(v)
            t.append(f"{'—' if b is None else f'[{b[0]:+.2f},{b[1]:+.2f}]':>15} ")
        t.append(f"{f(r['forecast']):>6}", style="green" if ok else ("red" if ok is False else ""))
        pok = r["paper_in_ci"]
        t.append(f" {f(r['paper']):>6}", style="green" if pok else ("red" if pok is False else ""))
        t.append(f" {r['paper_fig'] or ''}\n", style="dim")
    t.append(f"R² = {fmt_r2(res.r2)} · n = {res.n} · censored = {res.n_censored}", style="bold")
    if res.n_censored_inconsistent:
        t.append(f" ({res.n_censored_inconsistent} above the law)", style="yellow")
    t.append(f" · C = {res.C:.3g}")
    if res.tie:
        lo, hi = res.tie_scale_ci
        t.append(f" · tied s = {res.tie_scale:.3f} [{lo:.2f},{hi:.2f}]")
    if res.boot_skipped:
        t.append(f" · {res.boot_skipped} resamples skipped", style="yellow")
    if report.reread is not None:
        t.append("\n" + report.reread.text(), style="yellow")
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
