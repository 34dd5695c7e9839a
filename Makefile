# Two commands (see README):  make run   |   make test
# Both create ./.venv on first use. TORCH pins the PyTorch build pip installs first; on a machine whose pip
# index serves a CPU wheel (as here) this is a small CPU build. Override: make run TORCH="torch==2.13.0+cu126" or
# PIP_EXTRA_INDEX_URL=... for your site's wheels.
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PRESET ?= presets/blog_n80.toml

.PHONY: setup run test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install "$(TORCH)"
	$(BIN)/python -m pip install -e ".[train,dev,parquet]"
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/sparse-tui run $(PRESET) --headless

# ruff check first (pyproject's [tool.ruff.lint]). SPARSE_TUI_REQUIRE_RAY=1: the Ray tests fail (not skip) without
# the ray extra (in dev); --dist loadgroup keeps them in one xdist worker, so their local Ray cluster starts once.
test: $(STAMP)
	$(BIN)/ruff check
	OMP_NUM_THREADS=1 SPARSE_TUI_REQUIRE_RAY=1 RAY_USAGE_STATS_ENABLED=0 $(BIN)/python -m pytest -n 2 --dist loadgroup --durations=15 -q

bench: $(STAMP)
	$(BIN)/python benchmarks/sweep_bench.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
