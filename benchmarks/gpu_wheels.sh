#!/usr/bin/env bash
# benchmarks/gpu_wheels.sh [DIR]: download the wheels the GPU machine lacks into DIR (default .whl/ at the project
# root, git-ignored), for its python3 3.12 on x86-64 Linux, from any environment with pip and a package index.
#
# The GPU machine (docs/PERFORMANCE.md, "A GPU session") has torch, numpy, scipy, psutil, pytest, pytest-xdist,
# nvidia-ml-py, matplotlib, rich and typer, and no package registry. What the project needs beyond them travels as
# wheels: pydantic (with pydantic-core, annotated-types, typing-inspection, typing-extensions), tomlkit, textual,
# textual-plotext and plotext, with whatever they need, resolved by pip for Python 3.12 / manylinux x86-64.
# Versions: those installed in .venv (the ones the suite passes with) when it exists, else the pyproject ranges.
# benchmarks/gpu_session.sh installs DIR into a folder of its own there and stops at once if that or the imports fail.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/.whl}
case "$dest" in /*) ;; *) dest=$PWD/$dest ;; esac
if [ "$dest" = "$root/.whl" ]; then  # never committed: ignored in this checkout's git
  ex=$(git -C "$root" rev-parse --git-path info/exclude 2>/dev/null || true)
  if [ -n "$ex" ]; then
    case "$ex" in /*) ;; *) ex=$root/$ex ;; esac
    mkdir -p "$(dirname "$ex")"; grep -qx '/.whl/' "$ex" 2>/dev/null || echo '/.whl/' >> "$ex"
  fi
fi
PY=${PYTHON:-python3}
[ -x "$root/.venv/bin/python" ] && [ -z "${PYTHON:-}" ] && PY=$root/.venv/bin/python
# name and the pyproject range (the one place it is written is pyproject.toml; these follow it)
want="pydantic>=2.5,<3 tomlkit>=0.12 textual>=0.80 textual-plotext>=0.2 plotext>=5.3,<6"
pins=$("$PY" -m pip freeze 2>/dev/null | tr 'A-Z_' 'a-z-' || true)
reqs=()
for w in $want; do
  n=${w%%[<>=]*}
  v=$(printf '%s\n' "$pins" | grep -m1 "^$n==" || true)
  reqs+=("${v:-$w}")
done
rm -rf "$dest"; mkdir -p "$dest"
"$PY" -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$dest" "${reqs[@]}" 2> >(grep -v "^WARNING: Location" >&2)
# the check the GPU machine cannot make: the set installs for Python 3.12 from DIR alone (no index)
names=$(for r in "${reqs[@]}"; do echo "${r%%[<>=]*}"; done)
"$PY" -m pip install -q --disable-pip-version-check --dry-run --no-index --find-links "$dest" --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 --target "$dest/.check" $names \
  2> >(grep -v "^WARNING: Location" >&2) || { echo "gpu_wheels.sh: the wheels in $dest do not install offline for Python 3.12" >&2; exit 1; }
rm -rf "$dest/.check"
n=$(ls "$dest"/*.whl | wc -l)
echo "gpu_wheels.sh: $n wheels for Python 3.12 x86-64 in $dest ($(du -sh "$dest" | cut -f1)): ${reqs[*]}"
