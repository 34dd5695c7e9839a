"""The stack's trial (training/loop.py ``trial_step``) runs the real step (sampling, forward, backward, clipping,
the optimiser's first update and its state) and an evaluation of every member, then puts everything back: a run
trained after its trial is bit-identical to one trained without it. A failure in any of these, injected here into a
stack of more than two runs, halves the stack instead of failing it (issue: "never lose a sweep to an
optimisation"), and every run then trains to the numbers it gets alone."""

from __future__ import annotations

import copy

import pytest
import torch

from sparse_tui.executors import LocalExecutor
from sparse_tui.presets.loading import RunSpec
from sparse_tui.presets.schema import RunConfig
from sparse_tui.training import loop, tracker
from sparse_tui.training.optim import StackOptimizer

BASE = {
    "task": {"kind": "recall", "n_tokens": 8, "n_pairs": 3, "train_size": 64},
    "model": {"kind": "transformer", "n_layers": 2, "n_heads": 1, "d_model": 16},
    "train": {"lr": 1e-2, "batch_size": 16, "steps": 12, "device": "cpu", "grad_clip": 1.0},
    "eval": {"every": 6, "test_size": 32},
}


def cfg(seed: int, **train) -> RunConfig:
    raw = copy.deepcopy(BASE)
    raw["seed"] = seed
    raw["train"].update(train)
    return RunConfig.model_validate(raw)


@pytest.mark.parametrize("train", [{"optimizer": "adam"}, {"optimizer": "sgd", "momentum": 0.9},
                                   {"optimizer": "adamw", "weight_decay": 0.1}])
@pytest.mark.parametrize("mixed_lr", [False, True])
def test_the_trial_leaves_no_trace(train, mixed_lr):
    cfgs = [cfg(s, **train, **({"lr": 1e-2 * (s + 1)} if mixed_lr else {})) for s in range(2)]
    a, b = loop.Prepared(cfgs, torch.device("cpu")), loop.Prepared(cfgs, torch.device("cpu"))
    assert a.opt.fused != mixed_lr  # both optimiser paths are covered
    loop.trial_step(a, warmup=3)
    for step in range(1, 6):
        for p in (a, b):
            p.opt.set_lr(step, p.lr_dev)
            p.step_fn()
    for pa, pb in zip(a.stack.parameters(), b.stack.parameters()):
        assert torch.equal(pa, pb)
    assert torch.equal(a.loss_sum, b.loss_sum)
    for ma, mb in zip(a.members, b.members):
        assert torch.equal(ma.task._train_gen.get_state(), mb.task._train_gen.get_state())


def _batch(store, cfgs):
    specs = [RunSpec("trial", "trial.toml", c, {"seed": c.seed}) for c in cfgs]
    return store.create_runs(specs)


class _Sizes:
    """The size of the stack being built or trained now (what the injected failures look at)."""

    M = 0


def _track(monkeypatch):
    real = loop.Prepared.__init__

    def init(self, cfgs, *a, **kw):
        _Sizes.M = len(cfgs)
        real(self, cfgs, *a, **kw)

    monkeypatch.setattr(loop.Prepared, "__init__", init)


def _boom(what):
    def fail(*a, **kw):
        if _Sizes.M > 2:
            raise RuntimeError(f"CUDA out of memory in {what} (injected)")
        return fail.real(*a, **kw)

    return fail


def _inject_sampling(monkeypatch):
    fail = _boom("sampling")
    fail.real = loop.Batcher.train
    monkeypatch.setattr(loop.Batcher, "train", lambda self, bs: fail(self, bs))


def _inject_optimiser(monkeypatch):
    fail = _boom("the optimiser's first step")
    fail.real = StackOptimizer.step
    monkeypatch.setattr(StackOptimizer, "step", lambda self: fail(self))


def _inject_evaluation(monkeypatch):
    fail = _boom("evaluation")
    fail.real = tracker.evaluate
    monkeypatch.setattr(tracker, "evaluate", fail)


@pytest.mark.parametrize("inject", [_inject_sampling, _inject_optimiser, _inject_evaluation])
def test_a_failure_the_old_trial_could_not_see_halves_the_stack(tmp_path, monkeypatch, inject):
    from sparse_tui.lifecycle import runner
    from sparse_tui.store import RunStore
    from sparse_tui.training.trainer import train_run

    cfgs = [cfg(s) for s in range(4)]
    alone = [train_run(c).summary["final"]["test/loss"] for c in cfgs]
    _track(monkeypatch)
    inject(monkeypatch)
    store = RunStore(tmp_path / "runs")
    batch, ids = _batch(store, cfgs)
    runner.run_batch(store, batch, LocalExecutor(), workers=1, group=8)
    for i, want in zip(ids, alone):
        rec = store.get(i)
        assert rec.status == "finished", rec.reason
        assert any("a stack of 4 runs failed its trial step" in n and "(injected)" in n for n in rec.summary["notes"])
        assert rec.summary["stacked_with"] == 2
        assert rec.summary["final"]["test/loss"] == pytest.approx(want, rel=1e-5)
    store.close()
