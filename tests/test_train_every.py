"""``eval.train_every``: train/loss is logged every N steps between evaluations (the mean since the last point), so
curves show the training loss finer than the evaluations (issue 12; was: only at evaluations, every 100 steps)."""

from __future__ import annotations

import math

from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.store import RunStore
from sparse_tui.training.trainer import RunLogger, train_run


def test_train_loss_every_n_steps(tiny_preset, runs_dir):
    over = ["train.steps=60", "eval.every=50", "eval.train_every=10"]
    specs = expand(load_preset(tiny_preset, over))
    store = RunStore(runs_dir)
    batch, (rid,) = store.create_runs(specs)
    store.claim_runs([rid], device="cpu", versions={})
    res = train_run(specs[0].config, logger=RunLogger(store, rid))
    assert res.status == "finished"
    m = store.metrics(rid)
    steps, vals = m["train/loss"]
    assert list(steps) == [10, 20, 30, 40, 50, 60]  # every 10 steps; 50 and 60 are evaluations
    assert all(math.isfinite(v) and v > 0 for v in vals)
    assert list(m["test/loss"][0]) == [0, 50, 60]  # evaluations unchanged


def test_default_is_ten(tiny_preset):
    assert expand(load_preset(tiny_preset))[0].config.eval.train_every == 10
