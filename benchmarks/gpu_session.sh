#!/usr/bin/env bash
# benchmarks/gpu_session.sh OUT [--budget SECONDS] [--steps LIST] [--dry-run]
#
# One prepared GPU session (issue 35): what a session lent a GPU runs first, in this order, each step stopped by
# `timeout -s TERM` at its own cap or at what is left of the budget (default 540 s: one device command may run
# 600 s), skipped when less than 20 s are left:
#   wheels    install the wheels ../shared/tools/device-prep.sh downloaded (.whl/, carried to the device machine)
#             into /tmp/site, or on a machine with .venv and no .whl/ run device-prep.sh to download them; then
#             check that sparse_tui, torch, textual and pydantic import
#   doctor    sparse-tui doctor --device cuda
#   tests     the CUDA tests
#   bench     benchmarks/sweep_bench.py --device cuda (plain loop, scheduler, independent anchor side by side)
#   evalbench benchmarks/eval_bench.py --device cuda (a stack's batched evaluation against one member at a time)
#   probe     ../shared/tools/cuda-probe/gpu_probe.py, each probe in its own process
#   atlas     the GPU-sized atlas entries (sparse-tui reproduce KEY --size gpu), cheapest first by the H100
#             projection (sparse_tui/lifecycle/estimate.py), each under `timeout -s TERM`: an interrupted entry resumes from
#             the store (OUT/runs) when the script is run again
# Logs (OUT/NN_step.log), JSON figures (OUT/bench.json, OUT/eval_bench.json, OUT/atlas_KEY.json), figures and the run store (OUT/runs)
# go under OUT; OUT/summary.tsv has one line per step (name, exit code, seconds, cap).
# --steps doctor,bench,...: only those steps (a second device call continues where the first stopped).
# --dry-run: list the steps, their caps and projected times (the atlas entries' from the H100 cost model of
# 2026-11-26: projections, not measurements), run nothing; works on a CPU (tests/test_gpu_session.py).
set -u
usage() { echo "usage: benchmarks/gpu_session.sh OUT [--budget SECONDS] [--steps LIST] [--dry-run]" >&2; exit 2; }
OUT=""; BUDGET=540; STEPS="wheels,doctor,tests,bench,evalbench,probe,atlas"; DRY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) [ $# -ge 2 ] || usage; BUDGET=$2; shift 2
              [[ "$BUDGET" =~ ^[0-9]+$ ]] && [ "$BUDGET" -gt 0 ] || { echo "gpu_session.sh: --budget: a whole number of seconds > 0, got '$BUDGET'" >&2; exit 2; } ;;
    --steps) [ $# -ge 2 ] || usage; STEPS=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) sed -n 2,24p "$0"; exit 0 ;;
    -*) echo "gpu_session.sh: unknown option '$1'" >&2; exit 2 ;;
    *) [ -z "$OUT" ] || usage; OUT=$1; shift ;;
  esac
done
[ -n "$OUT" ] || usage
ALL="wheels doctor tests bench evalbench probe atlas"
for s in ${STEPS//,/ }; do
  [[ " $ALL " == *" $s "* ]] || { echo "gpu_session.sh: --steps: unknown step '$s' (known: ${ALL// /, })" >&2; exit 2; }
done
cd "$(dirname "$0")/.."
PROBE=../shared/tools/cuda-probe/gpu_probe.py
PY=${PYTHON:-}
[ -n "$PY" ] || { [ -x .venv/bin/python ] && PY=.venv/bin/python || PY=python3; }
export PYTHONUNBUFFERED=1
CUDA_TESTS="tests/test_tasks.py tests/test_training.py::test_same_code_on_cuda tests/test_cudagraph.py
  tests/test_loop_trial.py tests/test_no_host_sync.py tests/test_models.py tests/test_batched_eval.py
  tests/test_restack.py::test_a_rebuilt_stack_is_captured_anew_on_cuda"

# name cap(s) "what": the caps are upper bounds, from the H100 session of 2026-11-26 where one was timed
# (doctor: 12 s of schedules; the CUDA tests; sweep_bench's blog suite: 77 s plain + 22 s scheduler)
declare -A CAP=([wheels]=60 [doctor]=90 [tests]=150 [bench]=300 [evalbench]=90 [probe]=240)
declare -A WHAT=([wheels]="install .whl/ into /tmp/site (or run ../shared/tools/device-prep.sh), check imports"
  [doctor]="sparse-tui doctor --device cuda" [tests]="pytest -x the CUDA tests"
  [bench]="sweep_bench.py --device cuda --suites blog,paper (plain loop, scheduler, anchor)"
  [evalbench]="eval_bench.py --device cuda (batched evaluation against one member at a time)"
  [probe]="gpu_probe.py env sdpa h2d poison capture timing fallback")

atlas_plan() {  # KEY PRESET SECONDS per GPU-sized atlas entry, cheapest first; an entry whose runs an earlier
  # entry trains (the same configurations: reproduce reuses them) costs 0 s
  "$PY" - <<'PY'
from sparse_tui import atlas
from sparse_tui.lifecycle.estimate import project_h100
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.reports.reproduce import config_key
rows = []
for e in atlas.entries():
    p = e.preset("gpu")
    if not p or e.built:
        continue
    specs = expand(load_preset(f"presets/{p}.toml"))
    pr = project_h100(specs)
    if pr is not None:
        rows.append((pr.seconds, e.key, p, frozenset(config_key(s.config.model_dump(mode="json")) for s in specs)))
seen = set()
for s, key, p, runs in sorted(rows, key=lambda r: r[:3]):
    print(key, p, 0 if runs <= seen else round(s))
    seen |= runs
PY
}

T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
n=0
run_step() {  # name cap command...: the step under timeout, its log and its line in summary.tsv
  local name=$1 cap=$2; shift 2
  n=$((n + 1)); local log; log=$(printf "%s/%02d_%s.log" "$OUT" "$n" "$name")
  local t; t=$(left); [ "$cap" -lt "$t" ] && t=$cap
  if [ "$t" -lt 20 ]; then echo "SKIP $name (budget spent: $(left) s left)"; printf "%s\tskipped\t0\t%s\n" "$name" "$cap" >> "$OUT/summary.tsv"; return; fi
  echo "=== $name (at most $t s): $*"
  local s0; s0=$(date +%s)
  timeout -s TERM -k 15 "$t" "$@" > "$log" 2>&1
  local rc=$?
  tail -n 25 "$log"
  echo "--- $name rc=$rc ($(( $(date +%s) - s0 )) s; log $log)"
  printf "%s\t%s\t%s\t%s\n" "$name" "$rc" "$(( $(date +%s) - s0 ))" "$cap" >> "$OUT/summary.tsv"
}

if [ $DRY = 1 ]; then
  echo "gpu_session.sh: dry run, budget $BUDGET s, output $OUT (nothing is run)"
  total=0
  for s in $ALL; do
    [[ ",$STEPS," == *",$s,"* ]] || continue
    if [ $s = atlas ]; then
      plan=$(atlas_plan) || { echo "gpu_session.sh: the atlas plan failed" >&2; exit 1; }
      while read -r key preset secs; do
        printf "%-9s %-22s projected %6s s  reproduce %s --size gpu (presets/%s.toml)\n" atlas "$key" "$secs" "$key" "$preset"
        total=$((total + secs))
      done <<< "$plan"
    else
      printf "%-9s %-22s at most   %6s s  %s\n" "$s" "" "${CAP[$s]}" "${WHAT[$s]}"
      total=$((total + CAP[$s]))
    fi
  done
  echo "total: at most about $total s against a budget of $BUDGET s; atlas times are projections from the H100 of 2026-11-26 (sparse_tui/lifecycle/estimate.py), not measurements; what the budget does not reach is skipped, and a second call with --steps atlas continues (stored runs are reused)"
  exit 0
fi

mkdir -p "$OUT/runs" || exit 1
: >> "$OUT/summary.tsv"
export SPARSE_TUI_RUNS="$PWD/$OUT/runs"; case "$OUT" in /*) export SPARSE_TUI_RUNS="$OUT/runs" ;; esac
echo "gpu_session.sh: $(date -u +%FT%TZ), budget $BUDGET s, python $PY"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | tee "$OUT/gpu.txt"
for s in $ALL; do
  [[ ",$STEPS," == *",$s,"* ]] || continue
  case $s in
    wheels)
      if [ -d .whl ]; then
        run_step wheels "${CAP[wheels]}" bash -c 'python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl'
        export PYTHONPATH=/tmp/site:$PWD PY=python3
      elif [ -x ../shared/tools/device-prep.sh ] && [ -x .venv/bin/pip ]; then
        run_step wheels "${CAP[wheels]}" bash ../shared/tools/device-prep.sh
      fi
      run_step imports 30 "$PY" -c "import torch, textual, pydantic, sparse_tui.cli; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" ;;
    doctor) run_step doctor "${CAP[doctor]}" "$PY" -m sparse_tui doctor --device cuda ;;
    tests) run_step tests "${CAP[tests]}" "$PY" -m pytest -q -x -p no:cacheprovider $CUDA_TESTS ;;
    bench) run_step bench "${CAP[bench]}" "$PY" benchmarks/sweep_bench.py --device cuda --suites blog,paper --json "$OUT/bench.json" ;;
    evalbench) run_step evalbench "${CAP[evalbench]}" "$PY" benchmarks/eval_bench.py --device cuda --json "$OUT/eval_bench.json" ;;
    probe)
      if [ -f $PROBE ]; then
        for p in env sdpa h2d poison capture timing fallback; do run_step "probe_$p" 60 "$PY" $PROBE $p --device cuda; done
      else echo "SKIP probe ($PROBE not found)"; fi ;;
    atlas)
      while read -r key preset secs; do
        run_step "atlas_$key" "$(left)" bash -c "'$PY' -m sparse_tui reproduce '$key' --size gpu --device cuda --plot '$OUT/atlas_$key.png' --json > '$OUT/atlas_$key.json'"
      done <<< "$(atlas_plan)" ;;
  esac
done
echo "gpu_session.sh: done at $(date -u +%FT%TZ); $(wc -l < "$OUT/summary.tsv") step(s) in $OUT/summary.tsv"
