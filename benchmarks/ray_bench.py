"""The Ray executor's two targets (issue 13), measured side by side in one run (docs/PERFORMANCE.md, "Ray executor"):

1. **Overhead on one machine.** ``sparse-tui run presets/blog_nembd.toml --headless`` (24 runs; ``--set
   train.steps=STEPS`` keeps it to minutes) with the local executor (``--schedule processes``: one single-thread
   worker process per core) and with ``--executor ray`` on a one-node Ray cluster with as many CPUs as cores
   (started before, as ``ray start --head`` would be: its start-up is timed and reported apart). Both commands are
   timed end to end (process start to exit: torch import, planning, Ray connect and worker start-up included),
   alternately, ``--repeat`` times each. Target: the Ray command's wall time at most 10% above the local one's.
2. **Scaling.** A CPU sweep (the smoke preset, ``--sweep-runs`` seeds of ``--sweep-steps`` steps) on a simulated
   cluster (``ray.cluster_utils.Cluster``) of one node with 1 CPU, then of two nodes with 1 CPU each. Throughput =
   runs / wall time of the ``sparse-tui run --executor ray`` command. Target: two nodes at least 1.6x one node.

The script also checks that the Ray runs' final metrics equal the local runs' (the executors must agree), prints the
load average before and after each measurement (the machine may be shared), and prints one JSON line at the end.

    .venv/bin/python benchmarks/ray_bench.py                 # defaults: 150 steps of blog_nembd, 8 x 1500-step runs
    .venv/bin/python benchmarks/ray_bench.py --steps 300 --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0", "COLUMNS": "200"}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed_run(args: list[str]) -> float:
    """Wall seconds of one ``sparse-tui`` command (fails loudly on a non-zero exit)."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True, env=ENV,
                       cwd=ROOT)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"sparse-tui {' '.join(args)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    return wall


def finals(runs_dir: Path) -> dict:
    from sparse_tui.store import RunStore

    store = RunStore(runs_dir)
    return {(r.label, r.seed): r.final for r in store.runs()}


def start_cluster(nodes: int, cpus: int):
    from ray.cluster_utils import Cluster

    t0 = time.perf_counter()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus, "include_dashboard": False})
    for _ in range(nodes - 1):
        c.add_node(num_cpus=cpus)
    c.wait_for_nodes(timeout=120)
    return c, time.perf_counter() - t0


def overhead(steps: int, repeat: int, tmp: Path) -> dict:
    cores = os.cpu_count() or 1
    preset = str(ROOT / "presets" / "blog_nembd.toml")
    common = ["run", preset, "--headless", "--set", f"train.steps={steps}", "--set", "eval.every=50"]
    cluster, start_s = start_cluster(1, cores)
    print(f"one-node Ray cluster ({cores} CPUs) started in {start_s:.1f} s; load {load()}", flush=True)
    out = {"steps": steps, "cores": cores, "ray_cluster_start_s": round(start_s, 2), "local_s": [], "ray_s": [],
           "load": []}
    try:
        for i in range(repeat):
            for kind in ("local", "ray"):
                runs_dir = tmp / f"{kind}{i}"
                extra = (["--schedule", "processes"] if kind == "local"
                         else ["--executor", "ray", "--ray-address", cluster.address])
                before = load()
                wall = timed_run([*common, "--runs-dir", str(runs_dir), *extra])
                out[f"{kind}_s"].append(round(wall, 2))
                out["load"].append(f"{kind}{i}: {before} -> {load()}")
                print(f"  blog_nembd x {steps} steps, {kind:5s}: {wall:7.1f} s   (load {before} -> {load()})",
                      flush=True)
        same = all(finals(tmp / f"local{i}") == finals(tmp / f"ray{i}") for i in range(repeat))
    finally:
        cluster.shutdown()
    local, ray = min(out["local_s"]), min(out["ray_s"])
    out["same_final_metrics"] = same
    out["overhead_pct"] = round(100 * (ray - local) / local, 1)
    print(f"overhead: ray {ray:.1f} s vs local {local:.1f} s (best of {repeat}) = {out['overhead_pct']:+.1f}% "
          f"(target <= +10%); final metrics equal: {same}", flush=True)
    return out


def scaling(runs: int, steps: int, tmp: Path) -> dict:
    preset = str(ROOT / "presets" / "smoke.toml")
    seeds = "[" + ",".join(str(s) for s in range(runs)) + "]"
    out: dict = {"runs": runs, "steps": steps}
    for nodes in (1, 2):
        cluster, start_s = start_cluster(nodes, 1)
        try:
            before = load()
            wall = timed_run(["run", preset, "--headless", "--set", f"train.steps={steps}", "--set", f"seeds={seeds}",
                              "--runs-dir", str(tmp / f"nodes{nodes}"), "--executor", "ray", "--ray-address",
                              cluster.address])
        finally:
            cluster.shutdown()
        from sparse_tui.store import RunStore

        busy = sum(r.duration or 0.0 for r in RunStore(tmp / f"nodes{nodes}").runs())
        out[f"nodes{nodes}_parallelism"] = round(busy / wall, 2)  # run-seconds per wall second
        out[f"nodes{nodes}_mean_run_s"] = round(busy / runs, 2)
        out[f"nodes{nodes}_s"] = round(wall, 2)
        out[f"nodes{nodes}_runs_per_min"] = round(60 * runs / wall, 2)
        out[f"nodes{nodes}_load"] = f"{before} -> {load()}"
        print(f"  {runs} x {steps}-step smoke runs on {nodes} node(s) x 1 CPU: {wall:6.1f} s = "
              f"{60 * runs / wall:.2f} runs/min; a run took {busy / runs:.1f} s, {busy / wall:.2f} runs at once "
              f"(load {before} -> {load()}; cluster start {start_s:.1f} s)",
              flush=True)
    out["speedup"] = round(out["nodes1_s"] / out["nodes2_s"], 2)
    out["same_final_metrics"] = finals(tmp / "nodes1") == finals(tmp / "nodes2")
    print(f"2 nodes vs 1: x{out['speedup']} throughput (target >= x1.6); final metrics equal: "
          f"{out['same_final_metrics']}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=150, help="train.steps of blog_nembd for the overhead target")
    ap.add_argument("--repeat", type=int, default=1, help="local/ray pairs for the overhead target (best is kept)")
    ap.add_argument("--sweep-runs", type=int, default=8)
    ap.add_argument("--sweep-steps", type=int, default=1500)
    ap.add_argument("--only", choices=("overhead", "scaling"), default=None)
    a = ap.parse_args()
    print(f"ray_bench: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {os.cpu_count()} cores, load {load()}", flush=True)
    result = {}
    # Ray's files in a directory of their own: a simulated cluster writes Ray's "current cluster" file, which
    # under /tmp/ray would point this machine's `--ray-address auto` at a cluster that is gone after the run.
    ray_tmp = tempfile.mkdtemp(prefix="st-ray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    os.environ["RAY_TMPDIR"] = ENV["RAY_TMPDIR"] = ray_tmp
    with tempfile.TemporaryDirectory() as d:
        if a.only in (None, "overhead"):
            result["overhead"] = overhead(a.steps, a.repeat, Path(d))
        if a.only in (None, "scaling"):
            result["scaling"] = scaling(a.sweep_runs, a.sweep_steps, Path(d))
    shutil.rmtree(ray_tmp, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
