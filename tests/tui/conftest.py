"""Fixtures of the console tests: a tiny preset on CPU, a tmp run store, and a deterministic synthetic store."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import time
from pathlib import Path

import numpy as np
import pytest

from sparse_tui.presets.loading import validate_preset_data
from sparse_tui.store import RunStore

TINY = """\
# tiny.toml: a two-second associative-recall run for the console tests.
# Keep this comment: the form must preserve it on save.
name = "tiny"
description = "Tiny recall for tests"
seeds = [0]

[task]
kind = "recall"
n_tokens = 8      # vocabulary
n_pairs = 2       # pairs
train_size = 0

[model]
kind = "transformer"
n_layers = 2
d_model = 16

[train]
lr = 1e-2         # learning rate
batch_size = 32
steps = {steps}
device = "cpu"

[eval]
every = 20
test_size = 64
snapshot_every = 100

[plateau]
metric = "test/acc"
mode = "above"
value = 0.5
"""

BASE_TIME = 1_700_000_000.0  # fixed times: snapshots never show wall-clock ages


def pin_times(con, rid: str, start: float, took: float) -> None:
    """Fix a test run's device and times (created and started at ``start``, ended and last heard ``took`` s later),
    so that the ages and durations the console shows do not depend on when the test ran."""
    con.execute("UPDATE runs SET device='cpu', created_at=?, started_at=?, ended_at=?, heartbeat_at=? WHERE run_id=?",
                (start, start, start + took, start + took, rid))
NOW = BASE_TIME + 7200.0


def tiny_text(steps: int = 300) -> str:
    return TINY.replace("{steps}", str(steps))


class Seen:
    """A ``run_test(message_hook=...)``: the messages of the store poller and the workers that the app handled
    (``count(RunsUpdated)``: how many run tables it drew). Other messages (keys, focus ...) are not kept."""

    def __init__(self) -> None:
        from sparse_tui.tui import messages as m

        self.kinds = (m.RunsUpdated, m.CurvesData, m.AttentionData, m.FitDone, m.Problem, m.Done)
        self.messages: list = []

    def __call__(self, message) -> None:
        if isinstance(message, self.kinds):
            self.messages.append(message)

    def count(self, kind) -> int:
        return sum(isinstance(m, kind) for m in self.messages)

    @property
    def tables(self) -> int:
        """RunsUpdated messages handled (the run table was drawn from the store that many times)."""
        from sparse_tui.tui.messages import RunsUpdated

        return self.count(RunsUpdated)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(record.getMessage())


@pytest.fixture
def console_errors():
    """Every problem the console reported (errors and warnings, as shown), from its ``sparse_tui.tui`` logger."""
    handler = _Collect()
    log = logging.getLogger("sparse_tui.tui")
    log.addHandler(handler)
    yield handler.texts
    log.removeHandler(handler)


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    """Detached training processes inherit this: tiny models train faster with one torch thread."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MKL_NUM_THREADS", "1")


@pytest.fixture
def presets_dir(tmp_path: Path) -> Path:
    d = tmp_path / "presets"
    d.mkdir()
    (d / "tiny.toml").write_text(tiny_text(), encoding="utf-8")
    return d


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"


def run_async(fn):
    """Run an async test body with asyncio.run (no pytest-asyncio needed)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        return asyncio.run(fn(*a, **kw))

    return wrapper


async def wait_for(pilot, cond, timeout: float = 60.0, step: float = 0.1) -> None:
    """Poll ``cond()`` while the app runs (training happens in other processes)."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {cond}")
        await pilot.pause(step)


def _specs(raw: dict, src: str = "synthetic.toml"):
    from sparse_tui.presets.loading import expand

    return expand(validate_preset_data(raw, src, path=Path(src)))


def fill_store(runs_dir: Path) -> RunStore:
    """A deterministic store: a 3x3 linreg toy sweep (d x T, plateau ~ 1.5 sqrt(d) T) plus one recall run with
    attention snapshots, one running run and one failed run. Fixed ids and times."""
    import sparse_tui.store.claims as store_mod

    counter = itertools.count(1)
    orig = store_mod.new_id
    store_mod.new_id = lambda nbytes=4: f"{next(counter):0{2 * nbytes}x}"
    try:
        store = RunStore(runs_dir)
        lin = {
            "name": "toy-sweep",
            "task": {"kind": "linreg", "d": 8, "T": 16},
            "model": {"kind": "toy"},
            "train": {"optimizer": "sgd", "lr": 0.1, "steps": 4000, "device": "cpu"},
            "eval": {"every": 100},
            "sweep": {"task.d": [4, 16, 64], "task.T": [8, 16, 32]},
        }
        rec = {
            "name": "recall-lr",
            "task": {"kind": "recall", "n_tokens": 8, "n_pairs": 2},
            "model": {"kind": "transformer", "n_layers": 2, "d_model": 16},
            "train": {"lr": 0.01, "steps": 300, "device": "cpu"},
            "sweep": {"train.lr": [0.01, 0.001]},
            "seeds": [0],
        }
        _, lin_ids = store.create_runs(_specs(lin))
        _, rec_ids = store.create_runs(_specs(rec))
        rng = np.random.default_rng(0)
        con = store.con
        for i, rid in enumerate(lin_ids):
            r = store.get(rid)
            d, T = r.params["task.d"], r.params["task.T"]
            plateau = 1.5 * math.sqrt(d) * T * float(np.exp(rng.normal(0, 0.03)))
            steps = list(range(0, 4001, 100))
            loss = [0.5 / (1 + math.exp(min(50.0, (s - plateau) / (0.15 * plateau)))) + 1e-3 for s in steps]
            store.log_metrics_many(rid, steps, {"train/loss": loss, "test/loss": loss,
                                                 "toy/w": [1 - x for x in loss]},
                                   [BASE_TIME + i + 60 * s / 4000 for s in steps])  # (its fixed times, below)
            status = "finished"
            ps = plateau if plateau < 4000 else None
            store.finish(rid, status, plateau_step=ps, step=4000,
                         summary={"final": {"test/loss": loss[-1], "train/loss": loss[-1]}})
            pin_times(con, rid, BASE_TIME + i, 60)
        # recall run 1: finished with attention snapshots (copy + selection pattern at the end)
        rid = rec_ids[0]
        steps = list(range(0, 301, 20))
        loss = [2.08 * math.exp(-s / 120) + 0.05 for s in steps]
        acc = [min(1.0, 0.125 + s / 300) for s in steps]
        store.log_metrics_many(rid, steps, {"train/loss": loss, "test/loss": loss, "test/acc": acc,
                                             "attn/L1/copy": [s / 300 for s in steps],
                                             "attn/L2/select": [s / 350 for s in steps]},
                               [BASE_TIME + 100 + 60 * s / 300 for s in steps])
        L = 5  # k v k v q
        for s in (0, 100, 200, 300):
            frac = s / 300
            maps = {}
            for layer in ("L1", "L2"):
                a = np.full((1, 2, L, L), 0.0, dtype=np.float32)
                for q in range(L):
                    a[0, :, q, : q + 1] = 1.0 / (q + 1)
                if layer == "L1":  # copy: value position 3 -> its key 2
                    a[0, :, 3, :] = (1 - frac) * a[0, :, 3, :]
                    a[0, :, 3, 2] += frac
                else:  # selection: query (4) -> relevant value (3)
                    a[0, :, 4, :] = (1 - frac) * a[0, :, 4, :]
                    a[0, :, 4, 3] += frac
                maps[layer] = a
            meta = {"seq_len": L, "relevant": [[0, 0, 0, 1, 0]] * 2, "tokens": [[1, 5, 2, 6, 2], [3, 7, 4, 0, 4]],
                    "copy_q": [3, 3], "copy_k": [2, 2]}
            store.log_attention(rid, s, maps, meta)
        store.finish(rid, "finished", plateau_step=140.0, step=300,
                     summary={"final": {"test/loss": loss[-1], "test/acc": acc[-1]}})
        # recall run 2: failed half-way (its process died)
        rid2 = rec_ids[1]
        store.log_metrics_many(rid2, steps[:8], {"train/loss": loss[:8], "test/loss": loss[:8], "test/acc": acc[:8]},
                               [BASE_TIME + 101 + 60 * s / 140 for s in steps[:8]])
        store.finish(rid2, "failed", reason="process died at step 140", step=140)
        for j, r in enumerate(rec_ids):
            pin_times(con, r, BASE_TIME + 100 + j, 60)
        con.commit()
        return store
    finally:
        store_mod.new_id = orig


def fill_sweep(runs_dir: Path) -> RunStore:
    """A deterministic 20-run sweep in the shape of paper_fig1c_theory (d = 16 ... 256 x T = 64 ... 4096, seed 0, ode
    model): names ``paper_fig1c_theory d=128 T=64 seed=0``, plateau ~ 1.5 sqrt(d) T. Fixed ids and times."""
    import sparse_tui.store.claims as store_mod

    counter = itertools.count(1)
    orig = store_mod.new_id
    store_mod.new_id = lambda nbytes=4: f"{next(counter):0{2 * nbytes}x}"
    try:
        store = RunStore(runs_dir)
        raw = {"name": "paper_fig1c_theory", "task": {"kind": "linreg", "d": 64, "T": 512, "B": 1},
               "model": {"kind": "ode"}, "train": {"optimizer": "sgd", "lr": 1.0, "steps": 100000, "device": "cpu"},
               "eval": {"every": 100}, "seeds": [0],
               "sweep": {"task.d": [16, 32, 64, 128, 256], "task.T": [64, 256, 1024, 4096]}}
        _, ids = store.create_runs(_specs(raw))
        for i, rid in enumerate(ids):
            r = store.get(rid)
            plateau = 1.5 * math.sqrt(r.params["task.d"]) * r.params["task.T"]
            steps = list(range(0, 100001, 5000))
            loss = [0.5 / (1 + math.exp(min(50.0, (s - plateau) / (0.15 * plateau)))) + 1e-3 for s in steps]
            store.log_metrics_many(rid, steps, {"test/loss": loss}, [BASE_TIME + i + 9 * s / 100000 for s in steps])
            store.finish(rid, "finished", plateau_step=plateau, step=100000, summary={"final": {"test/loss": loss[-1]}})
            pin_times(store.con, rid, BASE_TIME + i, 9)
        store.con.commit()
        return store
    finally:
        store_mod.new_id = orig


@pytest.fixture
def synthetic(tmp_path: Path) -> Path:
    d = tmp_path / "synth"
    fill_store(d).close()
    return d


def make(runs_dir, presets_dir, *, create_store: bool = True, **kw):
    """The console on ``runs_dir``; its run store created first (the console asks before it creates one:
    ``create_store=False`` tests that)."""
    from sparse_tui.tui.app import SparseTuiApp

    if create_store:
        RunStore(runs_dir).close()
    kw.setdefault("gpu", False)
    kw.setdefault("clock", lambda: NOW)
    kw.setdefault("poll_interval", 0.1)
    return SparseTuiApp(runs_dir, presets_dir, **kw)


@contextlib.asynccontextmanager
async def opened(runs_dir, presets_dir, size=(120, 40), **kw):
    """The console on a store, started (its first run table drawn, every panel mounted): yields (app, pilot,
    seen)."""
    app = make(runs_dir, presets_dir, **kw)
    seen = Seen()
    async with app.run_test(size=size, message_hook=seen) as pilot:
        await wait_for(pilot, lambda: seen.tables >= 1 and app.main.panels_mounted())
        yield app, pilot, seen


async def launch(pilot) -> None:
    """ctrl+l in the preset form, then y in the launch question (a launch asks first)."""
    await pilot.press("ctrl+l")
    await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == "ConfirmScreen", 20)
    assert "Launch " in pilot.app.screen.question
    await pilot.press("y")


async def palette(pilot, title: str) -> None:
    """Run the palette command whose title starts with ``title``, as a user: ctrl+p, type, enter."""
    from textual.command import CommandList

    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: bool(pilot.app.screen.query(CommandList)), 10)
    await pilot.press(*title)
    commands = pilot.app.screen.query_one(CommandList)
    await wait_for(pilot, lambda: commands.option_count > 0 and
                   str(commands.get_option_at_index(0).prompt).startswith(title), 10)
    await pilot.press("enter")
    await pilot.pause(0.2)


async def to_run(pilot, preset: str, status: str | None = None):
    """Runs panel, cursor on the first run of ``preset``."""
    app = pilot.app
    await pilot.press("2")
    await pilot.pause(0.2)
    panel = app.query_one("RunsPanel")
    panel.table.move_cursor(row=0)
    await pilot.pause(0.1)
    for _ in range(len(panel.shown)):
        rec = next(r for r in app.main.records if r.run_id == panel.current_run())
        if rec.preset == preset and status in (None, rec.status):
            return rec
        await pilot.press("down")
    raise AssertionError(f"no run of {preset}")


def fill_linreg_sweep(runs_dir: Path, key: str = "task.T", values=tuple(range(8, 168, 8)), seeds=(0,)) -> RunStore:
    """A deterministic linreg toy sweep over ``key`` (default: 20 values of T, one seed: the overlay of issue 34)
    and ``seeds``, with plateau ~ 1.5 sqrt(d) T and a seed-dependent jitter. Fixed ids and times."""
    import sparse_tui.store.claims as store_mod

    counter = itertools.count(1)
    orig = store_mod.new_id
    store_mod.new_id = lambda nbytes=4: f"{next(counter):0{2 * nbytes}x}"
    try:
        store = RunStore(runs_dir)
        raw = {"name": "sweep", "seeds": list(seeds), "task": {"kind": "linreg", "d": 8, "T": 16},
               "model": {"kind": "toy"}, "train": {"optimizer": "sgd", "lr": 0.1, "steps": 6000, "device": "cpu"},
               "eval": {"every": 100}, "sweep": {key: list(values)}}
        _, ids = store.create_runs(_specs(raw))
        rng = np.random.default_rng(1)
        for i, rid in enumerate(ids):
            r = store.get(rid)
            d, T = r.params["task.d"], r.params["task.T"]
            plateau = 1.5 * math.sqrt(d) * T * float(np.exp(rng.normal(0, 0.15)))
            steps = list(range(0, 6001, 100))
            loss = [0.5 / (1 + math.exp(min(50.0, (s - plateau) / (0.15 * plateau)))) + 1e-3 for s in steps]
            store.log_metrics_many(rid, steps, {"train/loss": loss, "test/loss": loss},
                                   [BASE_TIME + i + 60 * s / 6000 for s in steps])  # (its fixed times, below)
            store.finish(rid, "finished", plateau_step=plateau if plateau < 6000 else None, step=6000,
                         summary={"final": {"test/loss": loss[-1], "train/loss": loss[-1]}})
            pin_times(store.con, rid, BASE_TIME + i, 60)
        store.con.commit()
        return store
    finally:
        store_mod.new_id = orig
