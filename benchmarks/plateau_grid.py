"""The plateaus of a store's runs on a grid: per point and learning rate (geometric mean over seeds), the local
log-log slope between neighbouring values of each variable, and the power-law fit (App. D.2 of arXiv 2505.17863)
with the learning rate chosen per point as App. D.3 does for Fig. 4 right ("we additionally tune the learning rate
... as large vocabulary sizes and number of pairs need smaller learning rates"): at each point the lr with the
shortest mean log plateau over seeds; a run without a plateau counts with its last step (a lower bound).

    python benchmarks/plateau_grid.py --runs-dir runs_exp/f4joint --vars n_tokens,n_pairs
    python benchmarks/plateau_grid.py --runs-dir runs_exp/f15sgd --vars d,T
    python benchmarks/plateau_grid.py --runs-dir DIR --vars n_tokens,n_pairs --threshold 0.6   # re-read at 0.6
    python benchmarks/plateau_grid.py --runs-dir DIR --vars T,model.n_layers --where model.n_heads=4

A name without a dot is a task key (d = task.d); --where filters as `sparse-tui fit --where` does.

Prints tables; nothing is written. docs/REPRODUCTION.md quotes its output with the command and date.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _gmean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main() -> None:
    from sparse_tui.reports import fitreport, selection
    from sparse_tui.science.fitting import fit_power_law
    from sparse_tui.store import RunStore

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs-dir", type=Path, required=True)
    ap.add_argument("--vars", default="d,T", help="task keys of the grid, comma-separated")
    ap.add_argument("--threshold", type=float, help="re-read every plateau at this absolute value first")
    ap.add_argument("--where", action="append", default=[], help="KEY=VALUE filters, as sparse-tui fit --where")
    a = ap.parse_args()
    names = [n if "." in n else f"task.{n}" for n in a.vars.split(",")]
    store = RunStore(a.runs_dir)
    sel = selection.select_runs(store, where=a.where)
    if a.threshold is not None:
        sel, _ = fitreport.reread_plateaus(store, sel, a.threshold)
    if not sel.rows:
        sys.exit(f"--runs-dir: no run of {a.runs_dir} matches" + (f" {' '.join(a.where)}" if a.where else ""))
    cells: dict[tuple, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    censored = defaultdict(int)
    rows_by: dict[tuple, list[dict]] = defaultdict(list)
    for r in sel.rows:
        x = tuple(float(r[f"params.{n}"]) for n in names)
        lr = float(r["params.train.lr"])
        pl = r.get("plateau_step")
        if pl is None:
            censored[(x, lr)] += 1
            pl = r.get("last_step") or r.get("step")
        cells[x][lr].append(float(pl))
        rows_by[(x, lr)].append(r)
    lrs = sorted({lr for c in cells.values() for lr in c})
    print(f"{len(sel.rows)} runs; plateau (geometric mean over seeds; * = a seed never crossed: its last step, a lower "
          "bound) per point and lr:")
    print("  " + " ".join(f"{n:>9}" for n in names) + "".join(f"{'lr ' + format(lr, 'g'):>12}" for lr in lrs)
          + f"{'chosen lr':>11}")
    chosen_rows = []
    best: dict[tuple, float] = {}
    for x in sorted(cells):
        by = cells[x]
        pick = min(by, key=lambda lr: sum(math.log(v) for v in by[lr]) / len(by[lr]))
        best[x] = _gmean(by[pick])
        chosen_rows.extend(rows_by[(x, pick)])
        line = "  " + " ".join(f"{v:>9g}" for v in x)
        for lr in lrs:
            v = by.get(lr)
            line += f"{_gmean(v):>11.0f}{'*' if censored[(x, lr)] else ' '}" if v else f"{'—':>12}"
        print(line + f"{pick:>11g}")
    for i, n in enumerate(names):  # local slopes of the chosen plateaus along each variable
        others = sorted({x[:i] + x[i + 1:] for x in best})
        for o in others:
            pts = sorted((x[i], best[x]) for x in best if x[:i] + x[i + 1:] == o)
            sl = [math.log(b[1] / a_[1]) / math.log(b[0] / a_[0]) for a_, b in zip(pts, pts[1:])]
            rest = ", ".join(f"{m} = {v:g}" for m, v in zip([m for m in names if m != n], o))
            print(f"  local {n} slopes at {rest}: " + " / ".join(f"{s:+.2f}" for s in sl)
                  + f"  ({' → '.join(format(p[0], 'g') for p in pts)})")
    for label, rows in (("every lr pooled", sel.rows), ("lr chosen per point (App. D.3)", chosen_rows)):
        if len(lrs) == 1 and label != "every lr pooled":
            continue
        res = fit_power_law(rows, names)
        ex = ", ".join(f"{n} {res.exponents[n]:+.2f} [{res.ci[n][0]:+.2f}, {res.ci[n][1]:+.2f}]" for n in names)
        print(f"fit, {label}: {ex}; R² {res.r2:.3f}, n = {res.n}, censored {res.n_censored}")


if __name__ == "__main__":
    main()
