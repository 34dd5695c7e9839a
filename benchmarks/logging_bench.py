"""Logging overhead per call: sparse-tui's ``run.log`` against TensorBoard's ``SummaryWriter.add_scalar`` and
MLflow's ``log_metric`` (a local SQLite store), side by side in one process, in the same loop (issue 40).

    python benchmarks/logging_bench.py                 # 20,000 steps each (MLflow: 500), 3 rounds
    python benchmarks/logging_bench.py --quick         # 2,000 steps (MLflow: 100), 1 round

Each tool logs the same thing, a training loop's ``k`` scalars per step (``--scalars``, default 1 and 8), into a
fresh store in a temporary folder:

* ``sparse-tui``: ``run.log({name: value, ...}, step=i)`` (one call per step);
* ``tensorboard``: ``writer.add_scalar(name, value, i)`` for each scalar (its API is one scalar a call);
* ``mlflow``: ``mlflow.log_metric(name, value, step=i)`` for each scalar (the default, synchronous), and
  ``mlflow.log_metrics({...}, step=i)`` once per step; a local ``sqlite:///`` tracking store.

Three numbers per tool, per scalar: ``in loop`` (the wall time the training loop spends in the logging calls),
``total`` (the same plus ending the run so that everything is on disk: ``run.finish()``, ``writer.close()``,
``mlflow.end_run()``) and ``cpu`` (the process's CPU time over ``total``, every thread: the background writers'
work included; on a loaded machine the steadiest of the three, since wall times stretch with the time slices the
process gets). The median of the rounds is printed. The values are Python floats (a loop that
logs ``loss.item()``); the time a tensor's ``.item()`` takes is the training loop's, the same for every tool.
Prints a table and the ratios to TensorBoard; no thresholds.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def names(k: int) -> list[str]:
    return ["train/loss"] + [f"probe/{i}" for i in range(k - 1)]


def bench_sparse_tui(folder: str, steps: int, k: int) -> tuple[float, float]:
    import sparse_tui

    keys = names(k)
    run = sparse_tui.init(name=f"bench k={k}", group="bench", config={"k": k}, runs_dir=folder)
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(steps):
        v = 1.0 / (i + 1)
        run.log({n: v for n in keys}, step=i)
    t1 = time.perf_counter()
    run.finish()
    return t1 - t0, time.perf_counter() - t0, time.process_time() - c0


def bench_sparse_tui_dict_only(steps: int, k: int) -> float:
    """The cost of building the dict each step, which the sparse-tui and mlflow.log_metrics loops pay (subtracted
    nowhere; printed for reference)."""
    keys = names(k)
    t0 = time.perf_counter()
    for i in range(steps):
        v = 1.0 / (i + 1)
        _ = {n: v for n in keys}
    return time.perf_counter() - t0


def bench_tensorboard(folder: str, steps: int, k: int) -> tuple[float, float]:
    from torch.utils.tensorboard import SummaryWriter

    keys = names(k)
    w = SummaryWriter(log_dir=folder)
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(steps):
        v = 1.0 / (i + 1)
        for n in keys:
            w.add_scalar(n, v, i)
    t1 = time.perf_counter()
    w.close()
    return t1 - t0, time.perf_counter() - t0, time.process_time() - c0


def bench_mlflow(folder: str, steps: int, k: int, batched: bool) -> tuple[float, float]:
    import logging

    import mlflow

    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    mlflow.set_tracking_uri(f"sqlite:///{folder}/mlflow.db")
    mlflow.set_experiment("bench")
    keys = names(k)
    mlflow.start_run()
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(steps):
        v = 1.0 / (i + 1)
        if batched:
            mlflow.log_metrics({n: v for n in keys}, step=i)
        else:
            for n in keys:
                mlflow.log_metric(n, v, step=i)
    t1 = time.perf_counter()
    mlflow.end_run()
    return t1 - t0, time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--mlflow-steps", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--scalars", default="1,8", help="scalars per step, e.g. 1,8")
    ap.add_argument("--skip", default="", help="tools to leave out: tensorboard,mlflow")
    a = ap.parse_args()
    steps = a.steps or (2000 if a.quick else 20000)
    msteps = a.mlflow_steps or (100 if a.quick else 500)
    rounds = a.rounds or (1 if a.quick else 3)
    skip = set(filter(None, a.skip.split(",")))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"logging_bench: python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, "
          f"load {load:.1f}; {steps} steps (mlflow {msteps}), {rounds} round(s)")
    rows = []
    for k in (int(x) for x in a.scalars.split(",")):
        tools = {"sparse-tui run.log": lambda f, k=k: bench_sparse_tui(f, steps, k)}
        n = {"sparse-tui run.log": steps * k}
        if "tensorboard" not in skip:
            tools["tensorboard add_scalar"] = lambda f, k=k: bench_tensorboard(f, steps, k)
            n["tensorboard add_scalar"] = steps * k
        if "mlflow" not in skip:
            tools["mlflow log_metric"] = lambda f, k=k: bench_mlflow(f, msteps, k, False)
            tools["mlflow log_metrics"] = lambda f, k=k: bench_mlflow(f, msteps, k, True)
            n["mlflow log_metric"] = n["mlflow log_metrics"] = msteps * k
        got: dict[str, list[tuple[float, float, float]]] = {t: [] for t in tools}
        for _ in range(rounds):
            for tool, fn in tools.items():  # interleaved: each round runs every tool under the same load
                with tempfile.TemporaryDirectory() as folder:
                    gc.collect()  # no tool pays for the garbage another left (MLflow's: 40 us a call after it)
                    got[tool].append(fn(folder))
        dict_us = bench_sparse_tui_dict_only(steps, k) / (steps * k) * 1e6
        for tool in tools:
            loop, total, cpu = (statistics.median(x[i] for x in got[tool]) / n[tool] * 1e6 for i in range(3))
            rows.append((k, tool, loop, total, cpu))
        print(f"  (k={k}: building the dict alone costs {dict_us:.2f} us per scalar, inside the sparse-tui and"
              " log_metrics numbers)")
    print(f"\n{'scalars/step':>12}  {'tool':<24} {'in loop us':>11} {'total us':>10} {'cpu us':>10}   "
          f"{'vs TB: loop':>11} {'total':>6} {'cpu':>6}   (per scalar)")
    for k, tool, loop, total, cpu in rows:
        tb = next((r for r in rows if r[0] == k and r[1] == "tensorboard add_scalar"), None)
        ratios = " ".join(f"{a / b:{w}.2f}" for a, b, w in zip((loop, total, cpu), tb[2:], (11, 6, 6))) if tb else "-"
        print(f"{k:>12}  {tool:<24} {loop:11.2f} {total:10.2f} {cpu:10.2f}   {ratios}")


if __name__ == "__main__":
    main()
