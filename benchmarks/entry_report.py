"""An atlas entry's report and verdict over every finished run of a store, whatever preset trained them: how the
open-choice grids of docs/REPRODUCTION.md ("Open choices tested on the CPU") are read with the entry's own report
and rule (``sparse-tui reproduce KEY`` reads only the runs of the entry's preset).

    python benchmarks/entry_report.py --runs-dir runs_exp/f5B12 --entry fig5_left
    python benchmarks/entry_report.py --runs-dir runs_exp/f15sgd --entry fig15_sgd
    python benchmarks/entry_report.py --runs-dir runs_exp/b3C --entry blog3_C --where model.readout_self_key=false

Prints the report, ending with its verdict line; nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    from sparse_tui import atlas
    from sparse_tui.reports import library, planner
    from sparse_tui.store import RunStore

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs-dir", type=Path, required=True)
    ap.add_argument("--entry", required=True, help="an atlas key (sparse-tui reproduce --list)")
    ap.add_argument("--where", action="append", default=[], help="KEY=VALUE filters, as sparse-tui fit --where")
    a = ap.parse_args()
    if a.entry not in atlas.ENTRIES:
        sys.exit(f"--entry: {a.entry!r} is not an atlas key (sparse-tui reproduce --list)")
    store = RunStore(a.runs_dir)
    ids = [r.run_id for r in sorted(store.runs(status=list(planner.REUSED)), key=lambda r: (r.created_at, r.position))]
    if a.where:
        from sparse_tui.reports import selection

        kept = {row["run_id"] for row in selection.select_runs(store, where=a.where).rows}
        ids = [i for i in ids if i in kept]
    if not ids:
        sys.exit(f"--runs-dir: {a.runs_dir} holds no finished run")
    from sparse_tui.science.fitting import FitError

    try:
        print(library.report(store, atlas.ENTRIES[a.entry], ids).text)
    except (FitError, atlas.AtlasError) as e:
        sys.exit(f"{a.entry}: {e}")


if __name__ == "__main__":
    main()
