"""The report of the atlas entries ``diversity`` and ``diversity_linreg``: arXiv 2505.17863 §4's proposal ("decrease
data diversity to accelerate learning, then increase diversity after the critical transition") measured with
repetition schedules (repetition.py).

Per run: the step of the switch (the first evaluation whose logged ``sched/p`` / ``sched/B`` differs from the
start), the first evaluation at each level of the run's plateau metric (recall: test accuracy 5% (App. D.1) and 60%;
a loss: the plateau threshold and a tenth of it), the final value. Per setting (its task.p and task.B), seed by seed:
the speed-up at each level over the same seed's run without repetition (B = 1, p = 0), and the final value's
difference to that run's (final: the mean of the last ``LAST`` evaluations). The target (issue 33): a switch reaches
the last level ``TARGET_SPEEDUP`` x sooner than no
repetition and ends within ``TARGET_FINAL`` of its final value (accuracy: not below by more; loss: not above by
more), in every seed; each setting's line says whether it holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from sparse_tui.atlas import Entry
from sparse_tui.reports.base import Claim, Report, _crossing, _num, make_report, run_config

TARGET_SPEEDUP = 1.5
TARGET_FINAL = 0.02


@dataclass
class DiversityData:
    runs: list[dict[str, Any]]
    settings: dict[str, Any]  # per setting: its speed-ups and final differences, seed by seed


def _levels(rec: Any) -> tuple[str, bool, tuple[float, float]]:
    """(metric, higher is better, the two levels) from the run's [plateau]."""
    plateau = run_config(rec).plateau
    metric, mode, value = plateau.metric, plateau.mode, float(plateau.value)
    if mode == "above":
        return metric, True, (value, 0.6)
    return metric, False, (value, value / 10)


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
    p, B = run_config(rec).task.p, run_config(rec).task.B
    parts = [f"p {p}" if not isinstance(p, (int, float)) or p != 0 else "",
             f"B {B}" if not isinstance(B, (int, float)) or B != 1 else ""]
    return ", ".join(x for x in parts if x) or "no repetition"


LAST = 5  # "final": the mean of the last LAST evaluations (one evaluation moves by a few points)


def diversity_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    recs = [store.get(r) for r in run_ids]
    rows: list[dict[str, Any]] = []
    for rec in recs:
        metric, higher, levels = _levels(rec)
        series = store.metrics(rec.run_id)
        steps, vals = series.get(metric, ([], []))
        if run_config(rec).plateau.mode == "fraction" and vals and vals[0]:
            levels = tuple(lv * vals[0] for lv in levels)  # a fraction of the initial value (App. D.1)
        rows.append({"run_id": rec.run_id, "setting": _setting(rec), "seed": rec.seed, "metric": metric,
                     "higher": higher, "levels": list(levels), "switch": _switch(series),
                     "cross": [_crossing((steps, vals), lv, higher) for lv in levels],
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
             f"the final value (mean of the last {LAST} evaluations) and its difference to that run's; "
             f"the switch step (sched/p, sched/B). Target: × at "
             f"{lv[1]} >= {TARGET_SPEEDUP:g} and final within {TARGET_FINAL:g}, every seed",
             f"  {'setting':<52} {'seed':>4} {'switch':>6} {'at ' + lv[0]:>7} {'×':>5} {'at ' + lv[1]:>7} {'×':>5} "
             f"{'final':>6} {'vs none':>7}"]
    summary = {}
    for s in order:
        mine = [r for r in rows if r["setting"] == s]
        for r in sorted(mine, key=lambda r: r["seed"] or 0):
            lines.append(f"  {s[:52]:<52} {_num(r['seed'], '4g')} {_num(r['switch'], '6g')} "
                         f"{_num(r['cross'][0], '7g')} {_num(r['speedup'][0], '5.2f')} {_num(r['cross'][1], '7g')} "
                         f"{_num(r['speedup'][1], '5.2f')} {_num(r['final'], '6.3f')} "
                         f"{_num(r['final_vs_base'], '+7.3f')}")
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
def _uses(switch: str, const: str) -> bool:
    """Whether the switch setting ``switch`` ("p 0.9 -> 0 when test/acc >= 0.05", "p steps 0:0.3 1079:0") repeats
    at the constant setting ``const``'s value ("p 0.9")."""
    import re

    var, value = const.split(" ", 1)
    if not switch.startswith(var + " "):
        return False
    body = re.sub(r"when .*?(?=->|$)", " ", switch[len(var) + 1:])  # the conditions' own numbers are not values
    body = re.sub(r"\b\d+:", " ", body.replace("steps", " "))  # "1079:0" -> "0"
    return any(float(x) == float(value) for x in re.findall(r"\d+(?:\.\d+)?", body))


def _check_diversity(store: Any, rep: Any) -> tuple[str, str]:
    """§4's proposal, judged on what a switch can change (issue 42): a switch is its constant repetition until it
    switches, so the first level (5 %, or the plateau) is the constant's by construction and is not read. Read:
    the step at the last level (60 % accuracy; a tenth of the loss threshold) against no repetition and against the
    constant repetition it starts from, and the final value. Held: some switch, in every seed, reaches the last
    level ≥ ``TARGET_SPEEDUP``× sooner than no repetition (a run that never reaches it is slower than any that does),
    no later than its constant repetition, and ends within ``TARGET_FINAL`` of no repetition (or better); in kind:
    the same but sooner by less than the target; not reproduced otherwise (a tie with no repetition is not sooner)."""
    runs = rep.data.runs
    by: dict[str, dict[Any, dict]] = {}
    for r in runs:
        by.setdefault(r["setting"], {})[r["seed"]] = r
    none = by.get("no repetition", {})
    consts = [s for s in by if s != "no repetition" and "->" not in s and "steps" not in s]
    switches = [s for s in by if s not in consts and s != "no repetition"]

    def last(r: dict | None) -> float | None:
        return None if r is None else r["cross"][-1]

    def within(r: dict) -> bool:
        d = r["final_vs_base"]
        return d is not None and (d >= -TARGET_FINAL if r["higher"] else d <= TARGET_FINAL)

    held, kind, lines = [], [], []
    for s in switches:
        mine = [c for c in consts if _uses(s, c)]
        ok_all, big_all, parts = True, True, []
        for seed, r in sorted(by[s].items(), key=lambda kv: kv[0] or 0):
            t, tn = last(r), last(none.get(seed))
            tc = [last(by[c].get(seed)) for c in mine]
            sooner = t is not None and (tn is None or t < tn)
            not_later = t is not None and all(x is None or t <= x for x in tc)
            big = t is not None and (tn is None or tn / t >= TARGET_SPEEDUP)
            ok_all = ok_all and sooner and not_later and within(r)
            big_all = big_all and big
            parts.append(f"{'—' if t is None else f'{t:g}'} vs none {'never' if tn is None else f'{tn:g}'}"
                         + (f", constant {'/'.join('never' if x is None else f'{x:g}' for x in tc)}" if mine else ""))
        if ok_all and big_all:
            held.append(s)
        elif ok_all:
            kind.append(s)
        lines.append(f"{s}: " + "; ".join(parts))
    word = "reproduced" if held else "in kind" if kind else "not reproduced"
    lv = runs[0]["levels"][-1] if runs else None
    lv_s = "" if lv is None else (format(lv, ".0%") if runs[0]["higher"] else format(lv, "g"))
    head = (f"held by {'; '.join(held)}" if held else f"sooner than none and no later than its constant, final within "
            f"{TARGET_FINAL:g}, target {TARGET_SPEEDUP:g}× missed, by {'; '.join(kind)}" if kind
            else "no switch is sooner than none, no later than its constant and as good as none in every seed")
    return word, f"{head} (step at {lv_s}, per seed: " + " | ".join(lines) + ")"


CLAIM = Claim("§4: repetition while stuck, none after the transition, accelerates learning and generalises as none: "
              "judged at the last level (60% accuracy, a tenth of the loss threshold) against both constants and on "
              "the final value, never at 5% (issue 42; held: 1.5× sooner than none, no later than the constant, final "
              "within 0.02, every seed: issue 33's target)", _check_diversity,
              diversity_report)
