"""Batched against per-member evaluation of one stack (training/loop.py ``Prepared.measure``), alternated in one
process: the time of evaluating every member of a preset's stack, both ways, best and median of ``--rounds``.

    python benchmarks/eval_bench.py [--device cpu|cuda] [--rounds 3] [--cases 0,2] [--json FILE]

CPU: process CPU time on one thread; CUDA: wall time with the device synchronised. The stacks are blog_nembd's 24
widths (padded to 80), 8 seeds of its width 48 (no padding), blog_n80's 4 runs and paper_fig4_recall_cpu's 18.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.training.loop import Prepared

CASES = [("presets/blog_nembd.toml", []), ("presets/blog_nembd.toml", ['sweep={"model.d_model"=[48]}',
                                                                        "seeds=[0,1,2,3,4,5,6,7]"]),
         ("presets/blog_n80.toml", []), ("presets/paper_fig4_recall_cpu.toml", [])]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None, help="write the rows here (rewritten after each case)")
    ap.add_argument("--cases", default=None, help="only these cases, by index: e.g. 2 or 0,2 (a quick check)")
    args = ap.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cpu":
        torch.set_num_threads(1)
    clock = time.process_time if dev.type == "cpu" else time.perf_counter
    rows = []
    picked = [CASES[int(i)] for i in args.cases.split(",")] if args.cases else CASES
    for preset, sets in picked:
        cfgs = [s.config for s in expand(load_preset(preset, sets + [f'train.device="{args.device}"']))]
        prep = Prepared(cfgs, dev)
        prep.measure(prep.members)  # warm-up, both paths
        for mb in prep.members:
            mb.measure()
        times: dict[str, list[float]] = {"batched": [], "per_member": []}
        for _ in range(args.rounds):
            for way in times:
                prep.batched_eval = way == "batched"
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                t = clock()
                prep.measure(prep.members)
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                times[way].append(clock() - t)
        med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
        row = {"preset": preset, "set": sets, "runs": len(cfgs), "padded": bool(getattr(prep.stack, "padded", False)),
               "test_size": cfgs[0].eval.test_size, "seconds": times, "batched_over_per_member": med["batched"]
               / med["per_member"]}
        rows.append(row)
        print(f"{preset} {' '.join(sets)}: {len(cfgs)} runs{' (padded)' if row['padded'] else ''}, batched "
              f"{med['batched']:.3f} s, per member {med['per_member']:.3f} s: x{row['batched_over_per_member']:.2f}",
              flush=True)
        if args.json:  # as it goes: stopped at a time limit, it keeps the cases it measured
            with open(args.json, "w") as fh:
                json.dump({"device": str(dev), "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
