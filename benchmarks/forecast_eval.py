"""Does the emergence forecast predict? (issue 41) Runs held out of stores of atlas law entries are forecast from the
others with the forecast `runs` and the console show (sparse_tui/science/forecast.py), their plateau hidden, and
measured / forecast is scored:

* ``loo``: in-grid leave-one-out, a whole grid point (every seed of it) out, forecast from the rest;
* ``out-hi`` / ``out-lo``: out of range, every run at the largest (smallest) value of each swept fit variable,
  forecast from the runs at the other values;
* ``first3`` / ``first5`` / ``first8``: every later run forecast from the first 3, 5, 8 runs that ended (in the order
  they ended, the scheduler's).

For each: runs scored (held-out runs that left their plateau; censored ones cannot be scored and are counted), the
share within +-30 %, the median |log(measured / forecast)|, and the share inside the displayed interval against its
nominal coverage (80 %). Per entry and in total.

    python benchmarks/forecast_eval.py --store fig15_adam=RUNS1 --store fig4_right=RUNS2 ... [--json]

A store is ``ENTRY=RUNS_DIR``: an atlas entry with a law (``sparse-tui reproduce --list``) and a store holding runs of
its CPU preset, e.g. made by ``sparse-tui reproduce ENTRY --size cpu --runs-dir RUNS_DIR`` (docs/THEORY.md,
"Forecast benchmark", gives the commands of the record).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

from sparse_tui import atlas
from sparse_tui.science.forecast import _law, _row, _x, forecasts
from sparse_tui.store import RunStore

SCENARIOS = ("loo", "out-hi", "out-lo", "first3", "first5", "first8")


def _blind(r):
    """A run as its forecast sees it before its plateau: queued, the plateau hidden."""
    return SimpleNamespace(run_id=r.run_id, preset=r.preset, params=r.params, plateau_step=None, status="queued",
                           step=0, started_at=None, heartbeat_at=None)


def _score(held, train) -> list[tuple[float, bool] | None]:
    """(measured / forecast, inside the interval) of each held-out run, None where no forecast came."""
    blinds = [_blind(r) for r in held]
    fc = forecasts(blinds, list(train) + blinds)
    out = []
    for r in held:
        f = fc.get(r.run_id)
        if not f or f.get("step") is None or f.get("source") == "theory":
            out.append(None)
            continue
        out.append((r.plateau_step / f["step"], f["low"] <= r.plateau_step <= f["high"]))
    return out


def _scorable(r) -> bool:
    """A plateau the forecast can be scored against: a positive step (a run whose metric crossed the threshold at
    step 0, e.g. test accuracy at chance within noise of it, has no plateau to forecast; the fit leaves it out too)."""
    return isinstance(r.plateau_step, (int, float)) and r.plateau_step > 0


def evaluate(preset: str, recs: list) -> dict[str, list]:
    """Scored forecasts of each scenario over the runs of ``preset``."""
    done = [r for r in recs if r.status == "finished" and _scorable(r)]
    _, fit_vars = _law(preset)
    point = {r.run_id: tuple(round(math.log(_x(_row(r), v)), 9) for v in fit_vars) for r in done}
    res: dict[str, list] = {s: [] for s in SCENARIOS}
    for p in sorted(set(point.values())):
        held = [r for r in done if point[r.run_id] == p]
        res["loo"] += _score(held, [r for r in done if point[r.run_id] != p])
    for j, _v in enumerate(fit_vars):
        vals = sorted({point[r.run_id][j] for r in done})
        if len(vals) < 3:  # two values: out of range leaves one, no slope to extrapolate with but the prior's
            continue
        for name, edge in (("out-hi", vals[-1]), ("out-lo", vals[0])):
            held = [r for r in done if point[r.run_id][j] == edge]
            res[name] += _score(held, [r for r in done if point[r.run_id][j] != edge])
    order = sorted([r for r in recs if r.status == "finished"], key=lambda r: (r.ended_at or 0, r.position))
    for k in (3, 5, 8):
        if len(order) > k:
            first = order[:k]
            later = [r for r in order[k:] if _scorable(r)]
            res[f"first{k}"] += _score(later, first)
    return res


def summary(scored: list) -> dict:
    got = [s for s in scored if s is not None]
    if not got:
        return {"n": 0, "no_forecast": len(scored)}
    logs = [abs(math.log(r)) for r, _ in got]
    return {"n": len(got), "no_forecast": len(scored) - len(got),
            "within_30": round(sum(abs(r - 1) <= 0.30 for r, _ in got) / len(got), 3),
            "median_abs_log": round(statistics.median(logs), 3),
            "inside": round(sum(i for _, i in got) / len(got), 3), "nominal": 0.8,
            "late": round(sum(r > 1 for r, _ in got) / len(got), 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", action="append", required=True, metavar="ENTRY=RUNS_DIR")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    table: dict[str, dict] = {}
    total: dict[str, list] = {s: [] for s in SCENARIOS}
    for spec in a.store:
        key, _, path = spec.partition("=")
        entry = atlas.ENTRIES.get(key)
        if entry is None or not entry.law or not path:
            print(f"--store {spec}: give ENTRY=RUNS_DIR with an atlas entry that has a law", file=sys.stderr)
            return 2
        preset = entry.presets["cpu"]
        store = RunStore(Path(path))
        recs = store.runs(preset=preset)
        store.close()
        res = evaluate(preset, recs)
        unscored = sum(r.plateau_step is not None and not _scorable(r) for r in recs)
        table[key] = {"preset": preset, "runs": len(recs), "plateau_not_positive": unscored,
                      **{s: summary(v) for s, v in res.items()}}
        for s, v in res.items():
            total[s] += v
    table["total"] = {s: summary(v) for s, v in total.items()}
    if a.json:
        print(json.dumps(table, indent=1))
        return 0
    print(f"{'entry':<12} {'scenario':<8} {'n':>4} {'±30%':>6} {'med|log|':>9} {'inside':>7} {'nominal':>7} "
          f"{'late':>5}")
    for key, row in table.items():
        for s in SCENARIOS:
            m = row[s]
            if not m.get("n"):
                continue
            print(f"{key:<12} {s:<8} {m['n']:>4} {m['within_30']:>6.2f} {m['median_abs_log']:>9.3f} "
                  f"{m['inside']:>7.2f} {m['nominal']:>7.2f} {m['late']:>5.2f}"
                  + (f"  ({m['no_forecast']} without a forecast)" if m["no_forecast"] else ""))
        if row.get("plateau_not_positive"):
            print(f"{key:<12} {row['plateau_not_positive']} run(s) with a plateau at step 0 (not scored)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
