"""Are two stores' runs the same numbers? Every metric point of every run of STORE_A is compared with the run of
STORE_B that has the same parameters and seed: equal bit for bit, or how far apart. The machine's own readings
(``sys/*``: CPU, memory, GPU use) and wall-clock times are not numbers of the run and are left out.

    python benchmarks/same_numbers.py RUNS_A RUNS_B

The bit-stability record of docs/REPRODUCTION.md ("What is bit-stable, measured here") was made with it: one preset
trained into two fresh stores by two installs (e.g. two torch versions), then compared. Exit 0 when every value is
equal, 1 when any differs, 2 when the stores do not hold the same runs. Reads SQLite only; no torch.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections import Counter
from pathlib import Path


def series(runs_dir: Path) -> dict[tuple[str, int], list[tuple[str, int, float]]]:
    """(params as stored, seed) → the run's metric points, sorted, without the machine's readings."""
    con = sqlite3.connect(f"file:{runs_dir / 'runs.db'}?mode=ro", uri=True)
    out = {}
    for run_id, params, seed in con.execute("SELECT run_id, params, seed FROM runs"):
        rows = con.execute("SELECT name, step, value FROM metrics WHERE run_id=? ORDER BY name, step", (run_id,))
        out[(params, seed)] = [r for r in rows if not r[0].startswith("sys/")]
    con.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    args = ap.parse_args(argv)
    a, b = series(args.a), series(args.b)
    if set(a) != set(b):
        print(f"the stores hold different runs: {len(set(a) ^ set(b))} not in both", file=sys.stderr)
        return 2
    same, moved, worst = 0, Counter(), 0.0
    for key, points in a.items():
        other = b[key]
        if [p[:2] for p in points] != [p[:2] for p in other]:
            print(f"a run logged other metrics or steps in the two stores (seed {key[1]})", file=sys.stderr)
            return 2
        for (name, _, x), (_, _, y) in zip(points, other):
            if x == y or (x != x and y != y):  # NaN logged in both counts as the same
                same += 1
            else:
                moved[name] += 1
                worst = max(worst, abs(x - y))
    print(f"{len(a)} runs, {same + sum(moved.values())} metric values: {same} identical, {sum(moved.values())} differ"
          + (f" (largest difference {worst:.3g}; by metric: {dict(moved)})" if moved else ""))
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
