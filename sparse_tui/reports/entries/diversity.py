"""The report of the atlas entries ``diversity`` and ``diversity_linreg``: arXiv 2505.17863 §4's proposal ("decrease
data diversity to accelerate learning, then increase diversity after the critical transition") measured with
repetition schedules (repetition.py).

Per run: the step of the switch (the first evaluation whose logged ``sched/p`` / ``sched/B`` differs from the
start), the first evaluation at each level of the run's plateau metric (recall: test accuracy 5% (App. D.1) and 60%;
a loss: the plateau threshold and a tenth of it), the final value. Per setting (its task.p and task.B), seed by seed:
the speed-up at each level over the same seed's run without repetition (B = 1, p = 0), and the final value's
difference to that run's (final: the mean of the last ``LAST`` evaluations). The target (issue 33): a switch reaches the last level ``TARGET_SPEEDUP`` x sooner than no
repetition and ends within ``TARGET_FINAL`` of its final value (accuracy: not below by more; loss: not above by
more), in every seed; each setting's line says whether it holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from sparse_tui.atlas import Entry
from sparse_tui.presets.loading import config_get
from sparse_tui.reports.base import Claim, Report, make_report

TARGET_SPEEDUP = 1.5
TARGET_FINAL = 0.02


@dataclass
class DiversityData:
    runs: list[dict[str, Any]]
    settings: dict[str, Any]  # per setting: its speed-ups and final differences, seed by seed


def _levels(rec: Any) -> tuple[str, bool, tuple[float, float]]:
    """(metric, higher is better, the two levels) from the run's [plateau]."""
    metric = config_get(rec.config, "plateau.metric", "test/loss")
    mode = config_get(rec.config, "plateau.mode", "fraction")
    value = float(config_get(rec.config, "plateau.value", 0.2))
    if mode == "above":
        return metric, True, (value, 0.6)
    return metric, False, (value, value / 10)


def _first(steps, vals, level: float, higher: bool) -> float | None:
    for s, v in zip(steps, vals):
        if v is not None and not math.isnan(v) and (v >= level if higher else v <= level):
            return float(s)
    return None


def _mean(vals) -> float | None:
    vals = [v for v in vals if v is not None and not math.isnan(v)]
    return sum(vals) / len(vals) if vals else None


def _switch(series: dict) -> float | None:
    for key in ("sched/p", "sched/B"):
        steps, vals = series.get(key, ([], []))
        if vals:
            return next((float(s) for s, v in zip(steps, vals) if v != vals[0]), None)
    return None


def _setting(rec: Any) -> str:
    p, B = config_get(rec.config, "task.p", 0.0), config_get(rec.config, "task.B", 1.0)
    parts = [f"p {p}" if not isinstance(p, (int, float)) or p != 0 else "",
             f"B {B}" if not isinstance(B, (int, float)) or B != 1 else ""]
    return ", ".join(x for x in parts if x) or "no repetition"


def _f(x: Any, spec: str) -> str:
    if x is None:
        width = "".join(c for c in spec.split(".")[0] if c.isdigit())
        return "—".rjust(int(width or 0))
    return format(x, spec)


LAST = 5  # "final": the mean of the last LAST evaluations (one evaluation moves by a few points)


def diversity_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    recs = [store.get(r) for r in run_ids]
    rows: list[dict[str, Any]] = []
    for rec in recs:
        metric, higher, levels = _levels(rec)
        series = store.metrics(rec.run_id)
        steps, vals = series.get(metric, ([], []))
        if config_get(rec.config, "plateau.mode", "fraction") == "fraction" and vals and vals[0]:
            levels = tuple(lv * vals[0] for lv in levels)  # a fraction of the initial value (App. D.1)
        rows.append({"run_id": rec.run_id, "setting": _setting(rec), "seed": rec.seed, "metric": metric,
                     "higher": higher, "levels": list(levels), "switch": _switch(series),
                     "cross": [_first(steps, vals, lv, higher) for lv in levels],
                     "final": _mean(vals[-LAST:])})
    base = {r["seed"]: r for r in rows if r["setting"] == "no repetition"}
    for r in rows:
        b = base.get(r["seed"])
        r["speedup"] = [b["cross"][i] / c if (b and b["cross"][i] and c) else None for i, c in enumerate(r["cross"])]
        d = None if (b is None or r["final"] is None or b["final"] is None) else r["final"] - b["final"]
        r["final_vs_base"] = d
        r["target"] = bool(r["speedup"][1] is not None and r["speedup"][1] >= TARGET_SPEEDUP and d is not None
                           and (d >= -TARGET_FINAL if r["higher"] else d <= TARGET_FINAL))
    order = list(dict.fromkeys(r["setting"] for r in rows))
    if not rows:
        return make_report(entry, run_ids, ["  no runs"], DiversityData([], {}))
    metric, levels = rows[0]["metric"], rows[0]["levels"]
    lv = [format(x, ".0%") if rows[0]["higher"] else format(x, "g") for x in levels]
    lines = [f"  {len(rows)} run(s); §4's proposal: repetition while stuck, none after the transition. Per run the "
             f"first {metric} at {lv[0]} and {lv[1]}, the speed-up (×) over the same seed's run without repetition, "
             f"the final value (mean of the last {LAST} evaluations) and its difference to that run's; the switch step (sched/p, sched/B). Target: × at "
             f"{lv[1]} >= {TARGET_SPEEDUP:g} and final within {TARGET_FINAL:g}, every seed",
             f"  {'setting':<52} {'seed':>4} {'switch':>6} {'at ' + lv[0]:>7} {'×':>5} {'at ' + lv[1]:>7} {'×':>5} "
             f"{'final':>6} {'vs none':>7}"]
    summary = {}
    for s in order:
        mine = [r for r in rows if r["setting"] == s]
        for r in sorted(mine, key=lambda r: r["seed"] or 0):
            lines.append(f"  {s[:52]:<52} {_f(r['seed'], '4g')} {_f(r['switch'], '6g')} {_f(r['cross'][0], '7g')} "
                         f"{_f(r['speedup'][0], '5.2f')} {_f(r['cross'][1], '7g')} {_f(r['speedup'][1], '5.2f')} "
                         f"{_f(r['final'], '6.3f')} {_f(r['final_vs_base'], '+7.3f')}")
        if s != "no repetition":
            n_ok = sum(r["target"] for r in mine)
            summary[s] = {"seeds": len(mine), "target_held": n_ok}
            x60 = [r["speedup"][1] for r in mine if r["speedup"][1] is not None]
            dfin = [r["final_vs_base"] for r in mine if r["final_vs_base"] is not None]
            rng = lambda xs, spec: f"{min(xs):{spec}} to {max(xs):{spec}}" if xs else "—"  # noqa: E731
            lines.append(f"  {'':<52} × at {lv[1]} {rng(x60, '.2f')} ({len(x60)}/{len(mine)} reached it), final vs "
                         f"none {rng(dfin, '+.3f')}: target held in {n_ok} of {len(mine)} seed(s)")
    return make_report(entry, run_ids, lines, DiversityData(rows, summary))



# key -> (the claim checked, check(store, report) -> (word, the numbers that decide it))
def _check_diversity(store, rep):
    """§4's proposal (issue 33): held when a switch meets the target (the last level
    ``TARGET_SPEEDUP``× sooner than no repetition, the final value within ``TARGET_FINAL``) in every seed; in kind
    when a switch leaves the plateau sooner than no repetition and ends within ``TARGET_FINAL`` of it in every seed;
    not reproduced otherwise."""
    by: dict[str, list[dict]] = {}
    for r in rep.data.runs:
        if "->" in r["setting"] or "steps" in r["setting"]:
            by.setdefault(r["setting"], []).append(r)

    def within(r):
        d = r["final_vs_base"]
        return d is not None and (d >= -0.02 if r["higher"] else d <= 0.02)

    held = [s for s, rs in by.items() if all(r["target"] for r in rs)]
    kind = [s for s, rs in by.items() if all(r["speedup"][0] and r["speedup"][0] > 1 and within(r) for r in rs)]
    word = "reproduced" if held else "in kind" if kind else "not reproduced"
    best = held or kind
    return word, ("target held in every seed by: " + "; ".join(held) if held else
                  "sooner out of the plateau and final within 0.02 in every seed, target missed, by: "
                  + "; ".join(kind) if kind else "no switch is sooner and as good in every seed") + (
                      f" ({len(best)} of {len(by)} switch settings)" if best else "")


CLAIM = Claim("§4: repetition while stuck, none after the transition, is as fast as repetition and as good as none "
              "(held: 1.5× sooner to the second level and final within 0.02 in every seed, issue 33's)", _check_diversity,
              diversity_report)
