"""Leave-one-out accuracy of the live emergence forecast (sparse_tui/science/forecast.py, issue 33): every finished run
of a
preset that left its plateau is forecast from the preset's other runs (its own plateau hidden), and measured /
forecast is printed with the share within +-30%.

    python benchmarks/forecast_loo.py --runs-dir RUNS --preset paper_fig15_adam_cpu [--json]

Without --runs-dir, the 9 grid points of docs/REPRODUCTION.md's "Fig. 15 right" record (the geometric mean of seeds 0
and 1 per (d, T)) stand in for runs.
"""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

from sparse_tui.science.forecast import loo

FIG15_MEANS = {16: (310, 435, 694), 32: (740, 945, 1392), 64: (1770, 2393, 3285)}  # T = 16, 32, 64


def record_means() -> list:
    return [SimpleNamespace(run_id=f"d{d}-T{T}", preset="paper_fig15_adam_cpu", status="finished", step=6000,
                            params={"task.kind": "linreg", "task.d": d, "task.T": T, "model.kind": "transformer"},
                            plateau_step=float(v), started_at=None, heartbeat_at=None)
            for d, vs in FIG15_MEANS.items() for T, v in zip((16, 32, 64), vs)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs-dir")
    ap.add_argument("--preset", default="paper_fig15_adam_cpu")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.runs_dir:
        from sparse_tui.store import RunStore

        recs = [r for r in RunStore(a.runs_dir).runs(preset=a.preset) if r.status == "finished"]
    else:
        recs = record_means()
    res = loo(recs)
    rows = [{"run": r.run_id, "d": r.params.get("task.d"), "T": r.params.get("task.T"), "plateau": r.plateau_step,
             "ratio": ratio} for r, ratio in res]
    ok = sum(1 for x in rows if x["ratio"] is not None and abs(x["ratio"] - 1) <= 0.30)
    if a.json:
        print(json.dumps({"runs": rows, "within_30pct": ok, "n": len(rows)}, indent=1))
        return
    for x in rows:
        ratio = "-" if x["ratio"] is None else f"{x['ratio']:.3f}"
        print(f"{x['run']:>10}  d {x['d']!s:>3}  T {x['T']!s:>3}  plateau {x['plateau']:>7g}  "
              f"measured/forecast {ratio}")
    print(f"within +-30%: {ok} of {len(rows)}")


if __name__ == "__main__":
    main()
