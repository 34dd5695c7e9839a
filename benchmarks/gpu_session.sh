#!/usr/bin/env bash
# benchmarks/gpu_session.sh OUT [--device cuda|cpu] [--budget SECONDS] [--steps LIST] [--work DIR] [--wheels DIR]
#                                [--dry-run]
#
# One prepared GPU session (issues 35, 44), fit for the machine we are lent: an H200 whose python3 3.12 has torch,
# numpy, scipy, psutil, pytest(-xdist), nvidia-ml-py, matplotlib, rich and typer and no package registry; at most 8
# files come back from OUT and the reply shows the last 12,000 characters of output. Before the call, here:
#   benchmarks/gpu_wheels.sh        (the wheels it lacks into .whl/; carry ".whl")
# then on the device:  bash benchmarks/gpu_session.sh "$OUT"
#
# Steps, in order of value (each under `timeout -s TERM` at its cap or at what is left of the budget, default 540 s;
# skipped when under 20 s are left):
#   wheels    install --wheels (default .whl/) into WORK/site and import sparse_tui, torch, textual, pydantic, tomlkit
#             and plotext: ALWAYS first, whatever --steps says (a second call on a fresh machine works on its own);
#             if it fails the script stops at once with one line (exit 3)
#   blog      the whole command `sparse-tui run presets/blog_nembd.toml --headless --device cuda --verbose`, fp32,
#             timed from outside (WORK/blog.json)
#   tf32      the same with train.precision = "tf32" (WORK/tf32.json)
#   doctor    sparse-tui doctor --device cuda
#   tests     the CUDA tests, pytest -n 8
#   bench     benchmarks/sweep_bench.py --device cuda --suites blog --plain-steps 300 (WORK/bench.json as it goes)
#   evalbench benchmarks/eval_bench.py --device cuda (WORK/eval_bench.json as it goes)
#   paper     the first minutes of Fig. 4 right's GPU preset (presets/paper_fig4_recall_small.toml), stopped at its
#             cap, against its projection (benchmarks/projection_check.py: WORK/paper.json)
#   atlas     the GPU-sized atlas entries (reproduce KEY --size gpu --json), cheapest first by the projection, with
#             what is left of the budget (WORK/atlas_KEY.json)
#
# Everything is written in WORK (default ${TMPDIR:-/tmp}/gpu_session.PID, never inside OUT). After every step WORK is
# packed into OUT as at most 3 files: session.tgz (WORK without checkpoints), summary.tsv (one line per step: name,
# exit code, seconds, cap) and last.log (the last step's whole log), so a step killed at the call's limit leaves the
# earlier ones. Each step prints 5 lines: its name and result, the last 3 lines of its log, and the archive's size.
# A relative OUT is taken from where the script is called, and must lie outside the checkout.
#
# --device cpu: the same steps at CPU sizes (a 2-run blog sweep of 10 steps, one tiny bench suite, one eval case, a
# paper preset stopped at 8 s; the atlas step only writes its plan): what tests/test_gpu_session.py runs.
# --dry-run: list the steps, their caps and the atlas entries' projections; run nothing.
set -u
usage() { echo "usage: benchmarks/gpu_session.sh OUT [--device cuda|cpu] [--budget SECONDS] [--steps LIST] [--work DIR] [--wheels DIR] [--dry-run]" >&2; exit 2; }
here=$PWD
OUT=""; BUDGET=540; STEPS=""; DRY=0; DEVICE=cuda; WORK=""; WHEELS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) [ $# -ge 2 ] || usage; BUDGET=$2; shift 2
              [[ "$BUDGET" =~ ^[0-9]+$ ]] && [ "$BUDGET" -gt 0 ] || { echo "gpu_session.sh: --budget: a whole number of seconds > 0, got '$BUDGET'" >&2; exit 2; } ;;
    --steps) [ $# -ge 2 ] || usage; STEPS=$2; shift 2 ;;
    --device) [ $# -ge 2 ] || usage; DEVICE=$2; shift 2
              [[ "$DEVICE" == cpu || "$DEVICE" == cuda || "$DEVICE" == cuda:[0-9]* ]] || { echo "gpu_session.sh: --device: cpu or cuda, got '$DEVICE'" >&2; exit 2; } ;;
    --work) [ $# -ge 2 ] || usage; WORK=$2; shift 2 ;;
    --wheels) [ $# -ge 2 ] || usage; WHEELS=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) sed -n 2,37p "$0"; exit 0 ;;
    -*) echo "gpu_session.sh: unknown option '$1'" >&2; exit 2 ;;
    *) [ -z "$OUT" ] || usage; OUT=$1; shift ;;
  esac
done
[ -n "$OUT" ] || usage
ALL="blog tf32 doctor tests bench evalbench paper atlas"
STEPS=${STEPS:-${ALL// /,}}
for s in ${STEPS//,/ }; do
  [[ " wheels $ALL " == *" $s "* ]] || { echo "gpu_session.sh: --steps: unknown step '$s' (known: ${ALL// /, })" >&2; exit 2; }
done
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$here/$1" ;; esac; }
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
OUT=$(abspath "$OUT")
mkdir -p "$(dirname "$OUT")" 2>/dev/null
outdir=$(cd "$(dirname "$OUT")" 2>/dev/null && pwd -P)/$(basename "$OUT")
case "$outdir/" in "$ROOT"/*) echo "gpu_session.sh: OUT '$OUT' lies inside the checkout ($ROOT): give a folder outside it" >&2; exit 2 ;; esac
# the CPU mode installs wheels only when --wheels names them (.whl/ holds Python 3.12 wheels for the GPU machine)
[ -z "$WHEELS" ] && [ "$DEVICE" = cpu ] && WHEELS=/nonexistent
WHEELS=$(abspath "${WHEELS:-$ROOT/.whl}")
cd "$ROOT"
CPU=0; [ "$DEVICE" = cpu ] && CPU=1
PY=${PYTHON:-}
[ -n "$PY" ] || { [ -x .venv/bin/python ] && PY=$PWD/.venv/bin/python || PY=python3; }
export PYTHONUNBUFFERED=1

CUDA_TESTS="tests/test_tasks.py tests/test_training.py::test_same_code_on_cuda tests/test_cudagraph.py
  tests/test_loop_trial.py tests/test_no_host_sync.py tests/test_models.py tests/test_batched_eval.py
  tests/test_restack.py tests/test_cuda_faults.py tests/test_devices.py"
PAPER_PRESET=presets/paper_fig4_recall_small.toml
# caps: upper bounds from the H100 session of 2026-11-26 where a step was timed there (blog whole command 23.2 s
# fp32, 19.4 s tf32; doctor 12 s of schedules; the blog suite's scheduler 22 s + plain loops at 300 steps)
declare -A CAP=([wheels]=60 [blog]=90 [tf32]=90 [doctor]=60 [tests]=150 [bench]=180 [evalbench]=60 [paper]=150)
declare -A WHAT=([wheels]="install the carried wheels, import the project (stops the session if it fails)"
  [blog]="run presets/blog_nembd.toml --headless --verbose, fp32, whole command timed"
  [tf32]="the same with train.precision = \"tf32\"" [doctor]="sparse-tui doctor"
  [tests]="pytest -n 8 the CUDA tests" [bench]="sweep_bench.py --suites blog --plain-steps 300"
  [evalbench]="eval_bench.py (batched evaluation against one member at a time)"
  [paper]="the first minutes of $PAPER_PRESET against its projection")
if [ $CPU = 1 ]; then  # CPU sizes: the same code paths in seconds (tests/test_gpu_session.py)
  CAP=([wheels]=60 [blog]=60 [tf32]=60 [doctor]=60 [tests]=60 [bench]=90 [evalbench]=60 [paper]=8)
  BLOG_SET=(--set train.steps=10 --set eval.every=5 --set 'sweep={"model.d_model"=[16,24]}' --set 'seeds=[0]')
  TESTS=(-q -p no:cacheprovider tests/test_devices.py)
  BENCH=(--suites blog --quick --plain-steps 4 --no-single --matmul-n 256 --set 'sweep={"model.d_model"=[16]}'
         --set 'seeds=[0]' --set train.steps=4 --set eval.every=2)
  EVAL=(--rounds 1 --cases 2)
  PAPER_PRESET=presets/paper_fig4_recall_cpu.toml
else
  BLOG_SET=()
  TESTS=(-n 8 -q -x -p no:cacheprovider $CUDA_TESTS)
  BENCH=(--suites blog --plain-steps 300)
  EVAL=()
fi

atlas_plan() { "$PY" benchmarks/projection_check.py --atlas-plan; }  # KEY PRESET SECONDS, cheapest first

if [ $DRY = 1 ]; then
  echo "gpu_session.sh: dry run, device $DEVICE, budget $BUDGET s, output $OUT (nothing is run)"
  total=0
  for s in wheels $ALL; do
    [[ $s == wheels || ",$STEPS," == *",$s,"* ]] || continue
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
  echo "total: at most about $total s against a budget of $BUDGET s; atlas times are projections from the H100 of 2026-11-26 (sparse_tui/lifecycle/estimate.py), not measurements; what the budget does not reach is skipped, and a second call with --steps atlas continues on a machine that kept WORK"
  exit 0
fi

WORK=$(abspath "${WORK:-${TMPDIR:-/tmp}/gpu_session.$$}")
case "$WORK/" in "$outdir"/*) echo "gpu_session.sh: --work '$WORK' lies inside OUT: give a folder outside it" >&2; exit 2 ;; esac
mkdir -p "$OUT" "$WORK/logs" || exit 1
rm -f "$OUT/session.tgz" "$OUT/summary.tsv" "$OUT/last.log"
SUMMARY=$WORK/summary.tsv
{ echo "# gpu_session.sh $(date -u +%FT%TZ) device $DEVICE budget $BUDGET s python $PY"
  echo "# gpu $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
  printf "# step\trc\tseconds\tcap\n"; } > "$SUMMARY"

T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
pack() {  # WORK into OUT as session.tgz (no checkpoints), summary.tsv and last.log; each replaced whole
  local tmp="$WORK.tgz"
  tar czf "$tmp" --exclude=checkpoints --exclude=site -C "$WORK" . 2>/dev/null
  if [ "$(stat -c %s "$tmp")" -gt $((15 * 2**20)) ]; then  # 16 MiB come back at most: the run stores stay behind
    tar czf "$tmp" --exclude=checkpoints --exclude=site --exclude='runs*' -C "$WORK" . 2>/dev/null
    echo "# session.tgz over 15 MiB: packed without the run stores" >> "$SUMMARY"
  fi
  cp "$tmp" "$OUT/session.tgz.part" && mv -f "$OUT/session.tgz.part" "$OUT/session.tgz"; rm -f "$tmp"
  cp "$SUMMARY" "$OUT/summary.tsv"
  [ -n "${1:-}" ] && cp "$1" "$OUT/last.log"
}
n=0; RC=0
run_step() {  # name cap command...: the step under timeout, its log, its line in the summary, the packing, 5 lines
  local name=$1 cap=$2; shift 2
  n=$((n + 1)); local log; log=$(printf "%s/logs/%02d_%s.log" "$WORK" "$n" "$name")
  local t; t=$(left); [ "$cap" -lt "$t" ] && t=$cap
  if [ "$t" -lt 20 ] && [ $CPU = 0 ]; then
    printf "%s\tskipped\t0\t%s\n" "$name" "$cap" >> "$SUMMARY"; echo "skipped: budget spent ($(left) s left)" > "$log"
    pack "$log"
    printf "=== %s skipped (%s s of the budget left)\n\n\n\n---\n" "$name" "$(left)"; RC=124; return
  fi
  local s0; s0=$(date +%s.%N)
  timeout -s TERM -k 15 "$t" "$@" > "$log" 2>&1
  RC=$?
  local secs; secs=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$s0" "$(date +%s.%N)")
  printf "%s\t%s\t%s\t%s\n" "$name" "$RC" "$secs" "$cap" >> "$SUMMARY"
  pack "$log"
  echo "=== $name rc=$RC in $secs s (cap $t s)$([ $RC = 124 ] && echo ': stopped at its cap')"
  tail -n 3 "$log" | python3 -c "import sys  # 3 lines of 200 characters (not bytes: no broken UTF-8)
ls = [ln[:200] for ln in sys.stdin.buffer.read().decode('utf-8', 'replace').splitlines()[-3:]]
print('\n'.join('  ' + ln for ln in ls + [''] * (3 - len(ls))))"
  echo "--- packed: $(du -h "$OUT/session.tgz" | cut -f1) session.tgz, $(($(wc -l < "$SUMMARY") - 4)) step(s) in summary.tsv"
}
whole_command() {  # NAME DEVICE [--set ...]: the blog sweep's whole command, timed from outside, its JSON in WORK
  local name=$1; shift
  local s0; s0=$(date +%s.%N)
  SPARSE_TUI_RUNS="$WORK/runs_$name" "$PY" -m sparse_tui run presets/blog_nembd.toml --headless --device "$DEVICE" \
    --verbose "$@"
  local rc=$?
  python3 - "$WORK/$name.json" "$s0" "$(date +%s.%N)" "$rc" "$DEVICE" "$*" <<'PY'
import json, sys
path, s0, s1, rc, dev, sets = sys.argv[1:]
json.dump({"command": "sparse-tui run presets/blog_nembd.toml --headless --verbose --device " + dev + (" " + sets if sets else ""),
           "seconds": round(float(s1) - float(s0), 2), "rc": int(rc), "target_seconds": 15}, open(path, "w"), indent=1)
PY
  return $rc
}
export -f whole_command; export WORK PY DEVICE
stop() { echo "gpu_session.sh: STOP at $1: $(tail -n 1 "$2" | cut -c1-300) (the session needs it; $OUT/last.log has the log)"; exit 3; }

echo "gpu_session.sh: $(date -u +%FT%TZ), device $DEVICE, budget $BUDGET s, work $WORK, output $OUT"
# wheels and imports: always, and the session stops at once when they fail
if [ -d "$WHEELS" ] && ls "$WHEELS"/*.whl > /dev/null 2>&1; then
  run_step wheels "${CAP[wheels]}" "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$WORK/site" "$WHEELS"/*.whl
  [ $RC = 0 ] || stop wheels "$WORK/logs/01_wheels.log"
  export PYTHONPATH="$WORK/site:$ROOT"
elif [ $CPU = 0 ]; then
  echo "no wheels in $WHEELS (benchmarks/gpu_wheels.sh makes them; carry \".whl\"): trying this python's packages" >&2
  export PYTHONPATH="$ROOT"
else
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi
run_step imports 60 "$PY" -c "
import torch, pydantic, tomlkit, textual, plotext, sparse_tui.cli, sparse_tui.training.loop
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())
print('pydantic', pydantic.VERSION, 'textual', textual.__version__)
if '$DEVICE'.startswith('cuda') and not torch.cuda.is_available(): raise SystemExit('no CUDA device: torch.cuda.is_available() is False')
"
[ $RC = 0 ] || stop imports "$(printf '%s/logs/%02d_imports.log' "$WORK" $n)"

for s in $ALL; do
  [[ ",$STEPS," == *",$s,"* ]] || continue
  case $s in
    blog) run_step blog "${CAP[blog]}" bash -c 'whole_command "$@"' _ blog "${BLOG_SET[@]}" ;;
    tf32) run_step tf32 "${CAP[tf32]}" bash -c 'whole_command "$@"' _ tf32 "${BLOG_SET[@]}" \
            --set 'train.precision="tf32"' ;;
    doctor) run_step doctor "${CAP[doctor]}" "$PY" -m sparse_tui doctor --device "$DEVICE" ;;
    tests) run_step tests "${CAP[tests]}" "$PY" -m pytest "${TESTS[@]}" ;;
    bench) run_step bench "${CAP[bench]}" "$PY" benchmarks/sweep_bench.py --device "$DEVICE" "${BENCH[@]}" \
             --json "$WORK/bench.json" ;;
    evalbench) run_step evalbench "${CAP[evalbench]}" "$PY" benchmarks/eval_bench.py --device "$DEVICE" "${EVAL[@]}" \
                 --json "$WORK/eval_bench.json" ;;
    paper)
      t=$(left); [ "${CAP[paper]}" -lt "$t" ] && t=${CAP[paper]}
      run_step paper "$((t + 60))" bash -c "SPARSE_TUI_RUNS='$WORK/runs' timeout -s TERM -k 10 $t '$PY' -m sparse_tui \
        run '$PAPER_PRESET' --headless --device '$DEVICE'; '$PY' benchmarks/projection_check.py '$PAPER_PRESET' \
        --runs-dir '$WORK/runs' --card \"\$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)\" \
        --json '$WORK/paper.json'" ;;
    atlas)
      if [ $CPU = 1 ]; then
        run_step atlas 60 bash -c "'$PY' benchmarks/projection_check.py --atlas-plan > '$WORK/atlas_plan.txt' && echo 'cpu mode: the atlas plan only, nothing trained' && tail -n 2 '$WORK/atlas_plan.txt'"
      else
        while read -r key preset secs; do
          run_step "atlas_$key" "$(left)" bash -c "SPARSE_TUI_RUNS='$WORK/runs' '$PY' -m sparse_tui reproduce '$key' --size gpu --device '$DEVICE' --json > '$WORK/atlas_$key.json'"
        done <<< "$(atlas_plan)"
      fi ;;
  esac
done
echo "gpu_session.sh: done at $(date -u +%FT%TZ); $(($(wc -l < "$SUMMARY") - 4)) step(s) in $OUT/summary.tsv, WORK packed in $OUT/session.tgz"
