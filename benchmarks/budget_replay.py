"""Replays the compute-budget planner (sparse_tui/lifecycle/budget.py, issue 41) on a store that holds a preset's
whole grid: the planner chooses runs and caps within a budget (default: half the grid's measured time), each chosen
run "trains" by reading its stored plateau (censored when its cap falls before it) and costs its measured wall time
up to the cap; the planner re-plans after each. The exponents fitted on the chosen runs are compared with the whole
grid's fit: inside its 95 % interval? how wide is their interval against the grid's?

    python benchmarks/budget_replay.py --runs-dir RUNS --preset paper_fig4_recall_cpu [--fraction 0.5] [--json]
                                       [--cost wall|steps]

No training: the store's runs are read. Targets (issue 41): each exponent within the full grid's 95 % interval, and
its interval at most 1.5x as wide, at half the grid's time.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

from sparse_tui.lifecycle import budget as bd
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.science.fitting import fit_power_law
from sparse_tui.science.forecast import _law
from sparse_tui.store import RunStore

ROOT = Path(__file__).resolve().parents[1]


def _fit(recs, fit_vars):
    rows = [{**{f"params.{k}": v for k, v in r.params.items()}, "plateau_step": r.plateau_step} for r in recs]
    f = fit_power_law(rows, list(fit_vars))
    return {v: (f.exponents[v], f.ci[v]) for v in fit_vars}, f.n, f.n_censored


def replay(store: RunStore, preset: str, fraction: float, cost: str = "wall") -> dict:
    specs = expand(load_preset(ROOT / "presets" / f"{preset}.toml"))
    recs = [r for r in store.runs(preset=preset) if r.status == "finished"]
    by_point = {}
    for r in recs:
        by_point.setdefault((r.params.get("task.d"), r.params.get("task.T"), r.params.get("task.n_tokens"),
                             r.params.get("task.n_pairs"), r.params.get("task.B"), r.params.get("task.p"),
                             r.seed), r)
    _, fit_vars = _law(preset)
    total = sum(r.duration or 0 for r in recs)
    steps = sum(r.step for r in recs)
    step_s = total / max(1, steps)  # (--cost steps: the grid's time is then steps x step_s, the same total)
    full, n_full, _ = _fit(recs, fit_vars)
    now = [0.0]
    chosen: list = []
    fake = SimpleNamespace(runs=lambda preset=None: list(chosen))

    def train(spec):
        p = spec.params
        key = (p.get("task.d"), p.get("task.T"), p.get("task.n_tokens"), p.get("task.n_pairs"), p.get("task.B"),
               p.get("task.p"), spec.seed)
        r = by_point.get(key)
        if r is None:
            return []
        cap = spec.config.train.steps
        ran = min(r.step, cap)
        now[0] += ((r.duration or 0) / max(1, r.step) if cost == "wall" else step_s) * ran
        plateau = r.plateau_step if r.plateau_step is not None and r.plateau_step <= cap else None
        chosen.append(SimpleNamespace(run_id=r.run_id, preset=preset, params=r.params, status="finished",
                                      plateau_step=plateau, step=ran, started_at=None, heartbeat_at=None))
        return [r.run_id]

    budget_s = fraction * total
    bd.spend(fake, specs, budget_s, step_s, preset, train, say=lambda s: None, clock=lambda: now[0])
    part, n_part, n_cens = _fit(chosen, fit_vars)
    out = {"preset": preset, "grid_runs": len(recs), "grid_s": round(total, 1), "budget_s": round(budget_s, 1),
           "spent_s": round(now[0], 1), "runs": len(chosen), "censored": n_cens,
           "chosen": [" ".join(f"{k.split('.')[-1]}={v}" for k, v in r.params.items()
                               if k.split(".")[-1] in (*fit_vars, "seed")) for r in chosen], "exponents": {}}
    for v in fit_vars:
        b, (lo, hi) = full[v]
        pb, (plo, phi) = part[v]
        out["exponents"][v] = {"grid": round(b, 3), "grid_ci": [round(lo, 3), round(hi, 3)], "budget": round(pb, 3),
                               "budget_ci": [round(plo, 3), round(phi, 3)], "inside": lo <= pb <= hi,
                               "width_ratio": round((phi - plo) / (hi - lo), 2)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs-dir", type=Path, required=True)
    ap.add_argument("--preset", required=True)
    ap.add_argument("--fraction", type=float, default=0.5)
    ap.add_argument("--cost", choices=("wall", "steps"), default="wall",
                    help="what a chosen run costs: its measured wall time (up to its cap), or its steps x the grid's "
                         "mean seconds per step (the planner's cost model: free of the load at the minute it ran)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    store = RunStore(a.runs_dir)
    res = replay(store, a.preset, a.fraction, a.cost)
    if a.json:
        print(json.dumps(res))
        return
    print(f"{res['preset']}: budget {res['budget_s']:.0f} s of the grid's {res['grid_s']:.0f} s; spent "
          f"{res['spent_s']:.0f} s on {res['runs']} of {res['grid_runs']} runs ({res['censored']} censored): "
          + ", ".join(res["chosen"]))
    for v, e in res["exponents"].items():
        print(f"  {v:>9}: budget {e['budget']:+.3f} [{e['budget_ci'][0]:+.3f}, {e['budget_ci'][1]:+.3f}]  grid "
              f"{e['grid']:+.3f} [{e['grid_ci'][0]:+.3f}, {e['grid_ci'][1]:+.3f}]  inside: "
              f"{'yes' if e['inside'] else 'no'}  width x{e['width_ratio']:.2f}")


if __name__ == "__main__":
    main()
