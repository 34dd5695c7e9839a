"""Sweep benchmark: the plain one-model-at-a-time loop against the sweep scheduler, side by side in one run.

    python benchmarks/sweep_bench.py            # full (a few minutes on a 2-core CPU)
    python benchmarks/sweep_bench.py --quick    # fewer steps (about a minute or two)
    python benchmarks/sweep_bench.py --device cuda --schedules auto,stacked

Suites (the shipped presets with shorter step counts):

* ``blog``: the blog's n_embd sweep (presets/blog_nembd.toml: 2-layer attention-only, vocab 64, 32 pairs,
  batch 128, 8 n_embd values x 3 seeds = 24 runs);
* ``paper``: the paper's recall configuration (presets/paper_fig4_recall.toml, Table 1: 4 layers, 4 heads,
  d_model 256, d_qk 64, MLP, LayerNorm; n_pairs {8, 16, 32} x 3 seeds = 9 runs).

For each suite and device it times, each in a fresh child process (so peak memory is the phase's own):

* ``plain``: ``train_run`` for every run, one after another, torch's default thread count, no store (on CPU
  also with one thread: the better of the two is the baseline to beat);
* ``scheduler``: what ``sparse-tui run --headless`` does: the runs go into a temporary run store and
  ``runner.run_batch`` trains them with the plan of ``training.scheduler.plan`` (``--schedules`` lists which
  schedules to time; ``auto`` is the default one).

On CUDA the suites are the real workloads: the whole ``blog_nembd.toml`` as shipped (24 runs x 2,000 steps with
evaluations, snapshots and the store) and ``paper_fig4_recall.toml`` reduced to 2,000 steps (3 seeds x n_pairs
{8, 16, 32}); the plain loop is then eager (``train.cuda_graph = "off"``) and trains one seed of every sweep point
(8 and 3 runs: a plain loop's model-steps/s does not depend on how many runs it trains, and all 33 would take
minutes), so phases are compared by model-steps/s; one paper-size run is timed eagerly and as a CUDA graph in one
process; and an independent plain-PyTorch anchor (benchmarks/anchor.py: the blog model written the ordinary way,
sharing no code with sparse_tui) gives what one model costs on the card, eager and as a CUDA graph.

A phase in which any run did not train (failed, interrupted, or its process crashed) prints FAILED and no speed,
and the benchmark exits 1: a time for runs that failed is not a speed.

It reports wall time, model-steps/s, the ratio to the plain loop, peak memory, and the fraction of the machine's
measured matmul throughput (a large float32 matmul timed in the same run) that the training steps reach:
training FLOPs (matmuls, counted with torch.utils.flop_counter on one step of every run) divided by wall time.
It also times a single N = 64 blog model alone (one thread, and default threads) against a matmul timed in the
same child process with the same thread count. On CPU it prints the best ratio that one single-thread process per
core could reach (the one-thread plain loop divided by the core count, over the plain loop). The load average is
printed: other processes on the machine disturb the timings.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SUITES = {
    "blog": {
        "preset": "presets/blog_nembd.toml",
        "full": ["train.steps=300", "eval.every=100", "eval.snapshot_every=0"],
        "quick": ["train.steps=60", "eval.every=30", "eval.snapshot_every=0"],
        # on CUDA: the whole preset as shipped (16 runs x 2,000 steps, evaluations, snapshots, the store)
        "cuda": [],
    },
    "paper": {
        "preset": "presets/paper_fig4_recall.toml",
        "full": ["train.steps=20", "eval.every=10", "eval.test_size=128", "eval.snapshot_every=0"],
        "quick": ["train.steps=6", "eval.every=3", "eval.test_size=64", "eval.snapshot_every=0"],
        # on CUDA: 3 seeds x n_pairs {8, 16, 32} (the preset's sweep), 2,000 steps with its evaluations
        "cuda": ["train.steps=2000"],
    },
}
# The plain baseline is the eager one-run-at-a-time loop: no CUDA graph (no effect on CPU); on CUDA one seed of every
# sweep point (its model-steps/s is what is compared).
PLAIN = ['train.cuda_graph="off"']
PLAIN_CUDA_SUBSET = ["seeds=[0]"]
OK_STATUSES = ("finished", "diverged")


# ------------------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------------------


# --set KEY=VALUE (repeatable): overrides applied to every phase's preset after the suite's own (the CPU mode of
# benchmarks/gpu_session.sh trims the blog suite to one tiny run with them); children get them as JSON.
SETS: list[str] = []


def load_specs(suite: str, quick: bool, device: str, extra: list[str] | None = None):
    from sparse_tui.presets.loading import expand, load_preset

    s = SUITES[suite]
    size = "quick" if quick else ("cuda" if device.startswith("cuda") else "full")
    overrides = s[size] + [f'train.device="{device}"'] + SETS + list(extra or [])
    return expand(load_preset(ROOT / s["preset"], overrides))


def plain_specs(suite: str, quick: bool, device: str, plain_steps: int | None = None):
    """The runs the plain loop trains: all of the suite on CPU, one seed of every sweep point on CUDA;
    ``plain_steps``: each for that many steps (its model-steps/s is what is compared: a plain loop's rate is the
    same at 300 steps as at 2,000, and the 2,000 cost about 155 s on the H100 of 2026-11-26)."""
    steps = [f"train.steps={plain_steps}"] if plain_steps else []
    return load_specs(suite, quick, device, PLAIN + (PLAIN_CUDA_SUBSET if device.startswith("cuda") else []) + steps)


def matmul_gflops(threads: int, device: str = "cpu", n: int = 2048) -> float:
    """Best-of-5 float32 matmul throughput (GFLOP/s) with ``threads`` torch threads."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a = torch.randn(n, n, device=device)
        b = torch.randn(n, n, device=device)
        best = float("inf")
        reps = 20 if device != "cpu" else 3
        for _ in range(6):
            if device != "cpu":
                torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(reps):
                c = a @ b
            if device != "cpu":
                torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - t) / reps)
        del c
        return 2 * n**3 / best / 1e9
    finally:
        torch.set_num_threads(old)


def step_flops(cfg, device: str = "cpu") -> float:
    """Matmul FLOPs of one training step of this run (forward + backward), counted by torch's FlopCounterMode."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from sparse_tui.training.loop import Prepared

    prep = Prepared([cfg], torch.device(device))  # the training step itself: a stack of one
    prep.opt.set_lr(1, prep.lr_dev)
    with FlopCounterMode(display=False) as fc:
        prep.step_fn()
    del prep
    if device != "cpu":
        torch.cuda.empty_cache()
    return float(fc.get_total_flops())


def peak_rss_mb() -> tuple[float, float]:
    """(this process, largest child) peak resident memory in MiB."""
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return me, kids


def load_avg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover
        return "?"


# ------------------------------------------------------------------------------------------------------------
# phases (each in its own child process)
# ------------------------------------------------------------------------------------------------------------


def phase_plain(args) -> dict:
    import torch

    from sparse_tui.training.trainer import RunLogger, train_run

    if args.threads:
        torch.set_num_threads(args.threads)
    specs = plain_specs(args.suite, args.quick, args.device, args.plain_steps)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    statuses = []
    for s in specs:
        try:
            statuses.append(train_run(s.config, device=args.device, logger=RunLogger()).status)
        except Exception as e:  # noqa: BLE001 - recorded as a failed run, like the run store does
            print(f"plain loop: a run failed: {type(e).__name__}: {e}", file=sys.stderr)
            statuses.append("failed")
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    wall = time.perf_counter() - t
    out = {"wall": wall, "statuses": statuses, "threads": torch.get_num_threads()}
    out["rss_mb"], out["child_rss_mb"] = peak_rss_mb()
    if args.device.startswith("cuda"):
        out["cuda_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def phase_scheduler(args) -> dict:
    import torch

    from sparse_tui.executors import LocalExecutor
    from sparse_tui.lifecycle import runner
    from sparse_tui.store import RunStore
    from sparse_tui.training.scheduler import plan

    specs = load_specs(args.suite, args.quick, args.device)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()  # planning counts: `auto` may time a few training steps before it chooses
    p = plan(specs, args.schedule, args.device)
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(Path(tmp) / "runs")
        batch, ids = store.create_runs(specs)
        if p.threads and p.workers == 1:
            torch.set_num_threads(p.threads)
        runner.run_batch(store, batch, LocalExecutor(), workers=p.workers, group=p.group, device=args.device)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        wall = time.perf_counter() - t
        statuses = [store.get(i).status for i in ids]
        n_metrics = [len(store.metrics(i).get("test/loss", ([], []))[0]) for i in ids]
        store.close()
    out = {"wall": wall, "statuses": statuses, "plan": p.describe(), "evals_per_run": sorted(set(n_metrics))}
    out["rss_mb"], out["child_rss_mb"] = peak_rss_mb()
    out["workers"] = p.workers
    if args.device.startswith("cuda"):
        out["cuda_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def phase_single(args) -> dict:
    """One blog model with d_model 64 trained alone; steps/s over the training steps only (no evaluation)."""
    import torch

    from sparse_tui.training.trainer import RunLogger, train_run

    if args.threads:
        torch.set_num_threads(args.threads)
    steps = 60 if args.quick else 200
    specs = load_specs(
        "blog", args.quick, args.device, [f"train.steps={steps}", f"eval.every={steps}", 'sweep={}', "seeds=[0]",
                                          "model.d_model=64"]
    )
    cfg = specs[0].config
    marks = {}

    def on_step(step: int) -> None:
        if step in (10, steps - 1):
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            marks[step] = time.perf_counter()

    # The matmul reference is timed in this child, just before and after the model, with the same thread count:
    # the machine's speed drifts by 10-20% over minutes on a shared host, and a ratio needs both sides together.
    threads = torch.get_num_threads()
    mm_before = matmul_gflops(threads, args.device)
    train_run(cfg, device=args.device, logger=RunLogger(), on_step=on_step)
    per_step = (marks[steps - 1] - marks[10]) / (steps - 1 - 10)
    mm = max(mm_before, matmul_gflops(threads, args.device))
    return {"s_per_step": per_step, "threads": threads, "flops": step_flops(cfg, args.device), "matmul_gflops": mm}


def phase_graph(args) -> dict:
    """One paper-size run (paper_fig4_recall, 16 pairs) timed eagerly and with its step captured as a CUDA graph,
    in one process: ms per training step over the steps after warm-up and capture (evaluations excluded)."""
    import torch

    from sparse_tui.training.trainer import RunLogger, train_run

    steps = 60 if args.quick else 300
    out = {}
    for mode in ("off", "on"):
        specs = load_specs("paper", args.quick, args.device, [f"train.steps={steps}", f"eval.every={steps}",
                                                               "sweep={}", "seeds=[0]", "task.n_pairs=16",
                                                               f'train.cuda_graph="{mode}"'])
        marks = {}

        def on_step(step: int) -> None:
            if step in (20, steps - 1):
                torch.cuda.synchronize()
                marks[step] = time.perf_counter()

        res = train_run(specs[0].config, device=args.device, logger=RunLogger(), on_step=on_step)
        if res.status != "finished":
            raise RuntimeError(f"cuda_graph={mode}: run {res.status} ({res.reason})")
        out["eager_ms" if mode == "off" else "graph_ms"] = 1e3 * (marks[steps - 1] - marks[20]) / (steps - 21)
        if mode == "on":
            out["captured"] = bool(res.summary.get("cuda_graph"))
    return out


def phase_anchor(args) -> dict:
    """The independent plain-PyTorch anchor (benchmarks/anchor.py), in its own process."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import anchor

    return anchor.measure(args.device, 48, 60 if args.quick else 300)


def child(phase: str, **kw) -> dict:
    cmd = [sys.executable, __file__, "--phase", phase, "--sets-json", json.dumps(SETS)]
    for k, v in kw.items():
        if v is None or v is False:
            continue
        cmd += [f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:  # a crashed phase is reported as FAILED (report_row), never as a speed
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"  phase {phase} {kw} crashed:\n{r.stderr[-3000:]}", file=sys.stderr)
        return {"error": f"the phase's process exited {r.returncode}: {tail}", "statuses": []}
    return json.loads(r.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------------------------
# driver
# ------------------------------------------------------------------------------------------------------------


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def report_row(name: str, r: dict, plain: dict, steps: int, flops: float, ref: float,
               plain_steps: int | None = None) -> tuple[str, bool, dict]:
    """One phase's line: wall, model-steps/s, ratio to the plain loop's model-steps/s, fraction of the matmul rate,
    memory. ``steps`` / ``flops``: the phase's model-steps and training FLOPs; ``plain_steps``: the plain loop's
    (default ``steps``). A phase in which any run did not finish (failed, interrupted, a crashed child) prints
    FAILED and no speed at all: a time for runs that did not train is not a speed. The ratio needs a plain loop
    that trained too."""
    bad = r.get("error") or [s for s in r.get("statuses", []) if s not in OK_STATUSES]
    if bad or not r.get("statuses"):
        why = r.get("error") or f"{len(bad)} of {len(r.get('statuses', []))} runs did not train: {sorted(set(bad))}"
        return f"  {name:24s} FAILED ({why})", False, {"failed": True}
    mem = f"peak RSS {r['rss_mb']:.0f} MiB" + (
        f" + {r.get('workers', 1)} x {r['child_rss_mb']:.0f} MiB workers" if r.get("workers", 1) > 1 else ""
    )
    if "cuda_peak_mb" in r:
        mem += f", GPU peak {r['cuda_peak_mb']:.0f} MiB"
    plain_ok = not plain.get("error") and all(s in OK_STATUSES for s in plain.get("statuses", ["?"]))
    rate = steps / r["wall"]
    ratio = rate / ((plain_steps or steps) / plain["wall"]) if plain_ok else None
    ratio_txt = f"x{ratio:.2f} the plain loop's rate" if ratio is not None else "ratio n/a (plain loop FAILED)"
    frac = flops / r["wall"] / 1e9 / ref
    line = (f"  {name:24s} {r['wall']:8.1f} s  {rate:8.1f} model-steps/s  {ratio_txt}  "
            f"{frac:.3f} of matmul peak  {mem}")
    return line, True, {"ratio_to_plain": ratio, "matmul_fraction": frac, "failed": False}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps")
    ap.add_argument("--suites", default="blog,paper", help="comma list: blog, paper")
    ap.add_argument("--device", default="auto", help="cpu, cuda or auto (= cpu, plus cuda when available)")
    ap.add_argument("--schedules", default="auto", help="scheduler schedules to time, e.g. auto,stacked,processes")
    ap.add_argument("--json", default=None, help="also write the results here (rewritten after every phase)")
    ap.add_argument("--plain-steps", type=int, default=None,
                    help="train the plain loop's runs for this many steps (its rate is compared per model-step)")
    ap.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE",
                    help="override a preset key in every phase (repeatable)")
    ap.add_argument("--no-single", action="store_true", help="skip the single N = 64 model's timing")
    ap.add_argument("--matmul-n", type=int, default=2048, help="the CPU reference matmul's size (n x n)")
    # internal: one phase in a child process
    ap.add_argument("--phase", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--suite", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--schedule", default="auto", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--sets-json", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    SETS[:] = json.loads(args.sets_json) if args.sets_json else args.sets

    if args.phase:
        fn = {"plain": phase_plain, "scheduler": phase_scheduler, "single": phase_single, "graph": phase_graph,
              "anchor": phase_anchor}[args.phase]
        print(json.dumps(fn(args)))
        return 0

    import torch

    from sparse_tui.training.scheduler import cpu_cores

    failed = False
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else []) if args.device == "auto" else [args.device]
    cores = cpu_cores()
    when = time.strftime("%Y-%m-%d %H:%M")
    print(f"sweep_bench {when}  torch {torch.__version__}  python {platform.python_version()}")
    print(f"cpu: {cpu_name()}, {cores} core(s) usable; load average at start: {load_avg()}")
    results: dict = {"date": when, "torch": torch.__version__, "cpu": cpu_name(), "cores": cores, "runs": []}
    mm = {"cpu_1": matmul_gflops(1, n=args.matmul_n), f"cpu_{cores}": matmul_gflops(cores, n=args.matmul_n)}
    for d in devices:
        if d.startswith("cuda"):
            mm[d] = matmul_gflops(1, d, n=8192)
            print(f"gpu: {torch.cuda.get_device_name(d)}")
    results["matmul_gflops"] = mm

    def save() -> None:  # the JSON as it goes: a benchmark stopped at a time limit keeps the phases it measured
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))

    save()
    print("matmul throughput (float32, 2048^2; GPU 8192^2): "
          + ", ".join(f"{k} {v:.1f} GFLOP/s" for k, v in mm.items()))

    # a single N = 64 model
    for th in (1, None):
        if "cpu" not in devices or args.no_single:
            break
        r = child("single", device="cpu", threads=th, quick=args.quick)
        if "error" in r:
            print(f"single blog model N=64 on cpu: FAILED ({r['error']})")
            failed = True
            continue
        ref = r["matmul_gflops"]
        frac = r["flops"] / r["s_per_step"] / 1e9 / ref
        line = (
            f"single blog model N=64 on cpu, {r['threads']} thread(s): {1 / r['s_per_step']:.1f} steps/s, "
            f"{r['flops'] / r['s_per_step'] / 1e9:.1f} GFLOP/s = {frac:.2f} of the {r['threads']}-thread matmul "
            f"({ref:.0f} GFLOP/s, timed in the same process)"
        )
        print(line)
        results["runs"].append({"suite": "single_n64", "device": "cpu", **r, "matmul_fraction": frac})
        save()

    for device in devices:
        if device.startswith("cuda"):  # the plain-PyTorch anchor: one blog model, eager and as a CUDA graph
            r = child("anchor", device=device, quick=args.quick)
            if "error" in r:
                print(f"plain-PyTorch anchor on {device}: FAILED ({r['error']})")
                failed = True
            else:
                print(f"plain-PyTorch anchor on {device} (benchmarks/anchor.py, blog model N=48 alone): eager "
                      f"{r['eager_ms']:.2f} ms/step ({1e3 / r['eager_ms']:.0f} model-steps/s), CUDA graph "
                      f"{r['graph_ms']:.2f} ms/step ({1e3 / r['graph_ms']:.0f} model-steps/s)")
                results["runs"].append({"suite": "anchor", "device": device, **r})
                save()
        if device.startswith("cuda"):  # one paper-size run: eager against the whole step as a CUDA graph
            r = child("graph", device=device, quick=args.quick)
            if "error" in r:
                print(f"one paper-size run on {device}: FAILED ({r['error']})")
                failed = True
            else:
                print(f"one paper-size run on {device}: eager {r['eager_ms']:.2f} ms/step, CUDA graph "
                      f"{r['graph_ms']:.2f} ms/step: x{r['eager_ms'] / r['graph_ms']:.2f} (graph captured: "
                      f"{r['captured']})")
                results["runs"].append({"suite": "paper_single_graph", "device": device, **r})
                save()
        for suite in args.suites.split(","):
            specs = load_specs(suite, args.quick, device)
            steps = sum(s.config.train.steps for s in specs)
            flops = sum(step_flops(s.config, "cpu") * s.config.train.steps for s in specs)
            print(f"\n[{suite} on {device}] {len(specs)} runs, {steps} model-steps, "
                  f"{flops / 1e12:.3f} TFLOP of training matmuls; load {load_avg()}")
            # the machine's matmul throughput: the best measured (on a busy machine N threads can lose to one)
            ref = mm[device] if device.startswith("cuda") else max(mm[f"cpu_{cores}"], mm["cpu_1"])
            psp = plain_specs(suite, args.quick, device, args.plain_steps)
            p_steps = sum(s.config.train.steps for s in psp)
            p_flops = sum(step_flops(s.config, "cpu") * s.config.train.steps for s in psp)
            plain = child("plain", suite=suite, device=device, quick=args.quick, plain_steps=args.plain_steps)
            rows = [(f"plain loop ({len(psp)} runs)" if len(psp) != len(specs) else "plain loop", plain)]
            if device == "cpu" and plain.get("threads", 1) != 1:  # the plain loop as it would run best on one thread
                rows.append(("plain loop, 1 thread", child("plain", suite=suite, device=device, quick=args.quick,
                                                           threads=1, plain_steps=args.plain_steps)))
            for sched in args.schedules.split(","):
                rows.append((f"scheduler ({sched})", child("scheduler", suite=suite, device=device, quick=args.quick,
                                                          schedule=sched)))
            for name, r in rows:
                mine = (p_steps, p_flops) if name.startswith("plain loop") else (steps, flops)
                line, ok, row = report_row(name, r, plain, *mine, ref, plain_steps=p_steps)
                failed |= not ok
                print(line)
                if "plan" in r:
                    print(f"  {'':24s} {r['plan']}")
                results["runs"].append({"suite": suite, "device": device, "phase": name, "model_steps": steps,
                                        "tflop": flops / 1e12, **row, **r})
                save()
            if len(rows) > 1 and rows[1][0] == "plain loop, 1 thread" and "error" not in rows[1][1] \
                    and "error" not in plain:
                # One single-thread process per core can at best divide the one-thread time by the core count.
                bound = plain["wall"] / (rows[1][1]["wall"] / cores)
                print(f"  {'':24s} bound for {cores} single-thread processes scaling perfectly: "
                      f"x{bound:.2f} the plain loop's rate (plain / (plain 1 thread / {cores}))")
                results.setdefault("process_bound", {})[f"{suite}/{device}"] = bound
    print(f"\nload average at end: {load_avg()}")
    results["load_end"] = load_avg()
    results["failed"] = failed
    save()
    if failed:
        print("FAILED: at least one phase had a run that did not train (see the FAILED lines); no speed is claimed "
              "for it", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
