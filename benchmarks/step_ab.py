"""A/B timing of one model's training step between two source trees, side by side in one run.

    python benchmarks/step_ab.py --before /path/to/old/checkout --after . [--rounds 5] [--steps 200] [--d-model 64]

Each round runs one child process per tree, alternately (so that the drift of a shared host hits both), each
training the blog model (presets/blog_nembd.toml: 2 layers, vocabulary 64, 32 pairs, batch 128) at ``--d-model``
on one CPU thread through ``trainer.train_run``, and times the steps after the first 10 (no evaluation in between).
It prints ms per step for every round, and the minimum and median of each tree, and checks that both trees end
at the same test loss (the change must not change the numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys, time
import torch
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.training.trainer import RunLogger, train_run
torch.set_num_threads(1)
steps, d, preset = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
cfg = expand(load_preset(preset, [f"train.steps={steps}", f"eval.every={steps}", "sweep={}", "seeds=[0]",
                                  f"model.d_model={d}", 'train.device="cpu"']))[0].config
marks = {}
def on_step(s):
    if s in (10, steps - 1):
        marks[s] = time.perf_counter()
r = train_run(cfg, device="cpu", logger=RunLogger(), on_step=on_step)
print(json.dumps({"ms": 1e3 * (marks[steps - 1] - marks[10]) / (steps - 11), "loss": r.summary["final"]["test/loss"]}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="source tree of the old code (a checkout)")
    ap.add_argument("--after", default=".", help="source tree of the new code")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--d-model", type=int, default=64)
    args = ap.parse_args()
    trees = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    times: dict[str, list[float]] = {k: [] for k in trees}
    losses: dict[str, float] = {}
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for r in range(args.rounds):
        for name, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
            out = subprocess.run([sys.executable, "-c", CHILD, str(args.steps), str(args.d_model),
                                  str(tree / "presets" / "blog_nembd.toml")], env=env, capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{name}: FAILED\n{out.stderr[-2000:]}")
                return 1
            res = json.loads(out.stdout.strip().splitlines()[-1])
            times[name].append(res["ms"])
            losses[name] = res["loss"]
            print(f"round {r + 1} {name:6s} {res['ms']:7.2f} ms/step  final test loss {res['loss']:.9g}")
    for name, t in times.items():
        print(f"{name:6s} min {min(t):7.2f} ms  median {statistics.median(t):7.2f} ms  over {len(t)} rounds")
    print(f"after / before: min x{min(times['after']) / min(times['before']):.3f}, median "
          f"x{statistics.median(times['after']) / statistics.median(times['before']):.3f}")
    print(f"same final test loss: {losses['before'] == losses['after']} ({losses['before']!r} vs {losses['after']!r})")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
