"""The report library: ``report`` (an entry's report, its verdict line at the end), ``draw`` (its figure), and
the generic kinds: ``law_report`` (fit of ``entry.fit_vars`` with the entry's law, exponents against their
targets, plateau per grid point against the law) and ``curves_report`` (plateaus and the transition's sharpness).

No torch, no textual at import."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from sparse_tui.atlas import AtlasError, Entry
from sparse_tui.reports import curves, figures
from sparse_tui.reports import verdict as verdicts
from sparse_tui.reports.base import Claim, Report, Runs, _crossing, _gmean, _num, make_report, run_config


@dataclass
class LawData:
    """A fitted law's report: per exponent the paper's value, the measured one, its interval and target (``rows``),
    the plateau per grid point beside the law (``points``), the fit itself."""

    figure: str
    law: str | None
    rows: list[dict[str, Any]]
    points: list[dict[str, Any]]
    fit: dict[str, Any]


def law_report(store: Any, entry: Entry, run_ids: Sequence[str], threshold: float | None = None) -> Report:
    """Fit ``entry.fit_vars`` over the runs (App. D.2) and set each exponent beside the paper's law (``entry.law``)
    with the tolerance the record is held to (``entry.targets``). ``threshold``: re-read every plateau from the
    stored curves at that absolute value first (``fitreport.reread_plateaus``; `reproduce FIG --threshold X`)."""
    from sparse_tui.reports import fitreport, selection
    from sparse_tui.science.theory import PAPER_FITS

    sel = selection.select_runs(store, run_ids=list(run_ids))
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
        lines.append(f"  paper ({pf.figure}): T_plateau = {fitreport.law_text(pf)}, R² = {pf.r2:g}")
    lines += [f"  measured: {res.formula()}, R² = {res.r2:.3f}",
              f"  {'':>10}  {'paper':>7}  {'measured':>8}  {'95% CI':>18}  {'CI holds paper':>14}  {'diff':>7}  target"]
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
        names = list(points[0]["x"])
        lines += ["  per point (mean over seeds; paper = its law at that point):",
                  "    " + "  ".join(f"{n:>8}" for n in names) + f"  {'seeds':>5}  {'measured':>9}  {'paper':>9}"
                  + f"  {'ratio':>6}"]
        for pt in points:
            lines.append("    " + "  ".join(f"{pt['x'][n]:>8g}" for n in names)
                         + f"  {pt['n']:>5}  {_num(pt['measured'], '9.1f')}  {_num(pt['paper'], '9.1f')}  "
                         + f"{_num(pt['ratio'], '6.2f')}")
    return make_report(entry, run_ids, lines, LawData(entry.figure, entry.law, rows, points, rep.to_dict()), fit=rep)


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
        if isinstance(pl, (int, float)) and pl > 0:
            groups[k].append(float(pl))
    out = []
    for k in sorted(groups):
        vals = groups[k]
        m = _gmean(vals)
        try:
            law = pf.predict(**{v: laws[k][v] for v in pf.exponents}) if pf is not None else None
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
    names = [f"{curves.run_key(rec)} seed={rec.seed}" for rec in recs]
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
    return make_report(entry, run_ids, lines, Runs(out))


def train_plateau(series: dict, rec: Any) -> float | None:
    """The first logged step at which train/loss crosses the run's absolute plateau threshold (on training data,
    which repetition changes: Fig. 12's top row); None for other plateau modes or without a crossing."""
    plateau = run_config(rec).plateau
    if plateau.mode != "below" or "train/loss" not in series:
        return None
    return _crossing(series["train/loss"], plateau.value, above=False)


def transition_steps(series: dict, rec: Any) -> float | None:
    """Steps from the last evaluation at or above 90% of the plateau level (the median of the watched metric before
    the plateau) to the plateau step; None without a plateau."""
    metric = run_config(rec).plateau.metric
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


def refits(entry: Entry) -> bool:
    """Whether ``entry``'s report fits a law to plateaus (so `reproduce --threshold X` can re-read them)."""
    return entry.report_fn() is law_report


def report(store: Any, entry: Entry, run_ids: Sequence[str], threshold: float | None = None,
           verdict: bool = True) -> Report:
    """The report of ``entry`` over ``run_ids`` (``Entry.report_fn``: its own or its kind's). ``threshold`` (law
    reports only, ``refits``): re-read the plateaus at that absolute value. ``verdict`` False: the report without
    its verdict line (points still training elsewhere: reproduce.py)."""
    fn = entry.report_fn()
    if threshold is None:
        rep = fn(store, entry, run_ids)
        return _with_firmness(store, _with_verdict(store, rep), fn) if verdict else rep
    if fn is not law_report:
        raise AtlasError(f"{entry.key}: --threshold re-reads the plateaus of a fitted law; {entry.figure} is a "
                         f"{entry.kind} entry")
    # A re-read at another threshold is a diagnosis: the verdict is the fit at the preset's own threshold.
    rep = law_report(store, entry, run_ids, threshold=threshold)
    rep.text = rep.text.replace(f"{entry.key} — ", f"{entry.key} (diagnosis: plateaus re-read at {threshold:g}) — ", 1)
    if not verdict:
        return rep
    own = verdicts.verdict(store, law_report(store, entry, run_ids))
    return _with_firmness(store, _with_verdict(store, rep, own, note=f" (at the preset's threshold; the re-read at "
                                                                    f"{threshold:g} above is a diagnosis)"), law_report)


def _with_firmness(store: Any, rep: Report, fn: Any) -> Report:
    """``rep`` with how firm its verdict is (``firmness.firmness``: a seed bootstrap of the word, each draw's word
    from ``fn``'s report over the draw's runs) and what produced its runs (``firmness.environment``), as two lines
    after the verdict (issue 42)."""
    from sparse_tui.reports import firmness as firm

    entry, ids = rep.entry, list(rep.run_ids)
    rep.firmness = firm.firmness(store, entry, ids, rep.verdict.word,
                                 lambda sub: verdicts.verdict(store, fn(store, entry, sub)).word)
    rep.environment = firm.environment([store.get(r) for r in ids])
    rep.text = "\n".join([rep.text, f"  {rep.firmness.line()}",
                          f"  environment: {firm.environment_line(rep.environment)}"])
    return rep


def _with_verdict(store: Any, rep: Report, v: "verdicts.Verdict | None" = None, note: str = "") -> Report:
    """``rep`` ending with its verdict line (``verdict.verdict``): the claim checked (curves entries), then the
    word and the numbers that decide it."""
    v = v or verdicts.verdict(store, rep)
    tail = [f"  claim: {v.claim}"] if v.claim else []
    rep.text = "\n".join([rep.text, *tail, f"  {v.line()}{note}"])
    rep.verdict = v
    return rep


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


def _law_check(store: Any, rep: Report) -> tuple[str, str]:
    v = verdicts.law_verdict(rep.data.rows)
    return v.word, v.why


# The generic kinds (``atlas.CLAIMS``): a fitted law is checked by the one rule for laws (``verdict.law_verdict``);
# learning curves have no claim of their own: an entry of curves names its claim (reports/entries/).
LAW = Claim("", _law_check, law_report, figures.fit_figure)
CURVES = Claim("", None, curves_report, curves.curves_figure)
