"""Fig. 5 (arXiv 2505.17863 §3.2): in-context (B) and cross-sample (p) repetition on recall."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from sparse_tui.atlas import Entry
from sparse_tui.reports.base import RECALL_LEVEL, Claim, Report, _crossing, _fmt, _gmean, _num, make_report, run_config
from sparse_tui.science.repetition import all_values


@dataclass
class Fig5Data:
    levels: list[float]  # the test accuracies whose first crossing is read
    runs: list[dict[str, Any]]


def varied_task_key(recs: Sequence[Any]) -> str:
    """The first ``[task]`` key whose value differs between the runs (``"B"`` for Fig. 5 left's runs), read from
    their configurations (a reused run's own sweep may have named another key); "" when none differs."""
    tasks = [task_values(r) for r in recs]
    keys = list(dict.fromkeys(k for t in tasks for k in t))
    return next((k for k in keys if len({json.dumps(t.get(k), sort_keys=True) for t in tasks}) > 1), "")


def task_values(rec: Any) -> dict[str, Any]:
    """A run's ``[task]`` as its typed config writes it (a schedule as its string)."""
    return run_config(rec).task.model_dump(mode="json")


def _is_baseline(rec: Any) -> bool:
    """No repetition of either kind (B = 1, p = 0, at every step: a scheduled run is not the baseline): the run a
    recall speed-up is measured against."""
    task = run_config(rec).task
    return all_values(task.B) == [1] and all_values(task.p) == [0]


def fig5_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Fig. 5 (§3.2): per run the first test accuracy (no repetition) >= 5% (App. D.1), 30% and ``RECALL_LEVEL``, the
    speed-up at each over the baseline (B = 1, p = 0) of the same seed, and the final test accuracy against the
    baseline's (a large deficit: the overfitting). The paper: a small B (p) speeds emergence up about 4× (2×); too
    much overfits, with a late grokking-like recovery."""
    levels = (0.05, 0.3, RECALL_LEVEL)
    recs = [store.get(r) for r in run_ids]
    var = varied_task_key(recs) or "run"
    rows: list[dict[str, Any]] = []
    for rec in recs:
        steps, vals = store.metrics(rec.run_id).get("test/acc", ([], []))
        cross = [_crossing((steps, vals), lv) for lv in levels]
        rows.append({"run_id": rec.run_id, "variable": var, "value": task_values(rec).get(var),
                     "seed": rec.seed, "baseline": _is_baseline(rec), "cross": cross,
                     "best": max((v for v in vals if v is not None), default=None),
                     "final": vals[-1] if vals else None})
    base = {r["seed"]: r for r in rows if r["baseline"]}
    for r in rows:
        b = base.get(r["seed"])
        r["speedup"] = [b["cross"][i] / c if (b and b["cross"][i] and c) else None for i, c in enumerate(r["cross"])]
        r["final_vs_baseline"] = r["final"] - b["final"] if (b and r["final"] is not None
                                                              and b["final"] is not None) else None
    rows.sort(key=lambda r: (float(r["value"]) if isinstance(r["value"], (int, float)) else 0.0, r["seed"] or 0))
    pct = [format(lv, ".0%") for lv in levels]
    lines = [f"  {len(rows)} run(s); paper: a small amount of repetition speeds emergence up (B: about 4×, "
             "p: about 2×), "
             "too much overfits; measured on the test set without repetition: first step at each accuracy, the "
             "speed-up over the same seed's B = 1, p = 0 run (×), final accuracy and its difference to that run's",
             f"  {var:>6} {'seed':>4} " + " ".join(f"{'at ' + x:>7} {'×':>5}" for x in pct)
             + f" {'best':>5} {'final':>5} {'vs base':>7}"]
    for r in rows:
        val = format(r["value"], "g") if isinstance(r["value"], (int, float)) else str(r["value"] or "—")
        lines.append(f"  {val:>6} {_num(r['seed'], '4g')} "
                     + " ".join(f"{_num(c, '7g')} {_num(x, '5.2f')}" for c, x in zip(r["cross"], r["speedup"]))
                     + f" {_num(r['best'], '5.2f')} {_num(r['final'], '5.2f')} {_num(r['final_vs_baseline'], '+7.2f')}")
    return make_report(entry, run_ids, lines, Fig5Data(list(levels), rows))


def _check_repetition(factor: float):
    """Fig. 5 (§3.2): a small amount of repetition speeds emergence (App. D.1's 5%) up by the paper's factor, a
    large one overfits. Held: a value that does not overfit (final test accuracy within 0.1 of its seed's baseline,
    ours) reaches 5% at least 3/4 of the paper's factor sooner (geometric mean over seeds), and some value overfits;
    in kind: a value that does not overfit is sooner, but one half of the claim is missing (the size, or a value that
    overfits); not reproduced: no value that does not overfit is sooner."""
    def check(store, rep):
        runs = rep.data.runs
        by: dict[Any, list[dict]] = {}
        for r in runs:
            if not r["baseline"]:
                by.setdefault(r["value"], []).append(r)
        rows = []
        for v, rs in sorted(by.items(), key=lambda kv: float(kv[0])):
            sp = _gmean([r["speedup"][0] for r in rs if r["speedup"][0]])
            fin = [r["final_vs_baseline"] for r in rs if r["final_vs_baseline"] is not None]
            over = bool(fin) and sum(fin) / len(fin) < -0.1
            rows.append((v, sp, over))
        good = [sp for _, sp, over in rows if not over and sp]
        overfits = any(over for _, _, over in rows)
        word = ("reproduced" if overfits and any(sp >= 0.75 * factor for sp in good)
                else "in kind" if any(sp > 1 for sp in good) else "not reproduced")
        return word, ("× sooner to 5% (overfits: final accuracy > 0.1 below the baseline): "
                      + ", ".join(f"{v:g}: {_fmt([sp])}{' overfits' if over else ''}" for v, sp, over in rows)
                      + f"; held at ≥ {0.75 * factor:g}× without overfitting")
    return check


LEFT = Claim("a small B speeds emergence up about 4×, a large B overfits (§3.2)", _check_repetition(4.0), fig5_report)
RIGHT = Claim("a small p speeds emergence up about 2×, a large p overfits (§3.2)", _check_repetition(2.0), fig5_report)
