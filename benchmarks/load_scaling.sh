#!/usr/bin/env bash
# benchmarks/load_scaling.sh [PRESET] [BUSY...]: how load scales a preset's time (presets/timing.py, LOAD_RULE).
# Trains PRESET (default paper_fig17_cpu, one single-thread worker, a fresh store each time) once per BUSY count
# (default: 0 3 0 2 0), with that many CPU-bound processes (`python3 -c 'while 1: pass'`) at the same priority
# beside it, side by side in one session, and prints each wall time, its ratio to the mean of the BUSY=0 runs, and the
# mean number of runnable processes weighted by their nice level (nice 0 = 1; /proc, sampled every second) over the
# run: the load the run saw, which the 1-minute load average only lags behind.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
preset=${1:-paper_fig17_cpu}
shift || true
counts=${*:-0 3 0 2 0}
py=${PYTHON:-python3}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
"$py" - "$work/samples" <<'PY' &
import os, sys, time
W = {n: 1 / 1.25 ** n for n in range(-20, 20)}  # the kernel's weight of a nice level, relative to nice 0
with open(sys.argv[1], "w") as out:
    while True:
        w = 0.0
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    rest = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if rest[0] == "R" and pid != str(os.getpid()):
                w += W.get(int(rest[16]), 1.0)
        print(f"{time.time():.1f} {w:.2f}", file=out, flush=True)
        time.sleep(1)
PY
for n in $counts; do
  pids=()
  for _ in $(seq 1 "$n"); do "$py" -c 'while 1: pass' & pids+=($!); done
  sleep 1
  t0=$(date +%s.%N)
  OMP_NUM_THREADS=1 "$py" -m sparse_tui run "$preset" --headless --workers 1 --runs-dir "$work/runs_$RANDOM" \
    > "$work/log" 2>&1 || { echo "run failed:"; tail -3 "$work/log"; exit 1; }
  t1=$(date +%s.%N)
  for p in "${pids[@]}"; do kill "$p"; done
  echo "$n $t0 $t1" >> "$work/runs"
done
"$py" - "$work/runs" "$work/samples" "$preset" <<'PY'
import sys
runs = [line.split() for line in open(sys.argv[1])]
samples = [tuple(map(float, line.split())) for line in open(sys.argv[2]) if len(line.split()) == 2]
base = [float(b) - float(a) for n, a, b in runs if n == "0"]
ref = sum(base) / len(base) if base else None
print(f"{sys.argv[3]}: one single-thread worker, BUSY CPU-bound processes beside it")
for n, a, b in runs:
    a, b = float(a), float(b)
    seen = [w for t, w in samples if a <= t <= b]
    load = f"{sum(seen) / len(seen):.1f}" if seen else "?"
    ratio = f"x{(b - a) / ref:.2f}" if ref else ""
    print(f"  busy {n}: {b - a:6.1f} s  {ratio:6}  weighted runnable {load}")
PY
