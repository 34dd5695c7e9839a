"""A stack whose members end early (plateau.stop_after, divergence, cancel) is rebuilt from the live ones once
they are half of it or fewer (training/loop.py ``Prepared.restack``): the ended runs stop costing work, the padded
shape shrinks to the live runs' largest, and the live runs go on exactly (parameters, optimiser state, loss sums,
random streams moved over): their numbers are those they get alone, and a checkpoint written after the rebuild
resumes bit-identically."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from sparse_tui.presets.loading import RunSpec
from sparse_tui.presets.schema import RunConfig
from sparse_tui.training.loop import train_stack
from sparse_tui.training.runlog import RunLogger

BASE = {
    "task": {"kind": "recall", "n_tokens": 8, "n_pairs": 3},
    "model": {"kind": "transformer", "n_layers": 2, "n_heads": 2, "d_model": 16, "mlp": True, "layernorm": True},
    "train": {"lr": 1e-3, "batch_size": 16, "steps": 150, "device": "cpu"},
    "eval": {"every": 10, "test_size": 32},
}
LIVE = {"metric": "test/loss", "mode": "below", "value": 0.0, "stop_after": -1}  # never reaches its plateau
ENDS = {"metric": "test/loss", "mode": "below", "value": 1e9, "stop_after": 0}  # plateau at 0, ends at step 10


def cfg(seed: int, d: int, plateau: dict, **train) -> RunConfig:
    raw = copy.deepcopy(BASE)
    raw.update(seed=seed, plateau=plateau)
    raw["model"]["d_model"] = d
    raw["train"].update(train)
    return RunConfig.model_validate(raw)


def sweep(**train) -> list[RunConfig]:
    # the widest run ends early: the rebuilt stack pads to 16, not 24
    return [cfg(0, 16, LIVE, **train), cfg(1, 24, ENDS, **train), cfg(2, 12, LIVE, **train),
            cfg(3, 8, ENDS, **train)]


def _record():
    rows: dict[int, dict] = {}
    return rows, RunLogger(on_eval=lambda s, v: rows.__setitem__(s, dict(v)))


@pytest.mark.parametrize("train", [{}, {"optimizer": "sgd", "momentum": 0.9, "lr": 0.01}, {"grad_clip": 0.5}],
                         ids=["adam", "sgd-momentum", "clip"])
@pytest.mark.parametrize("mixed_lr", [False, True], ids=["fused", "per-model"])
def test_the_live_runs_of_a_rebuilt_stack_go_on_as_alone(train, mixed_lr, capsys):
    """In float64 (a small learning rate keeps the training non-chaotic, so rounding differences between
    arithmetic orders stay at rounding level): the same curves as each live run trained alone, to 1e-9."""
    cfgs = sweep(**train)
    if mixed_lr:
        cfgs = [c.model_copy(update={"train": c.train.model_copy(update={"lr": c.train.lr * (1 + 0.5 * i)})})
                for i, c in enumerate(cfgs)]
    recs = [_record() for _ in cfgs]
    res = train_stack(cfgs, loggers=[r[1] for r in recs], dtype=torch.float64)
    assert [r.status for r in res] == ["finished"] * 4 and [r.step for r in res] == [150, 10, 150, 10]
    assert "stack of 4 runs rebuilt as 2 at step 10 (the others ended)" in res[0].summary["notes"]
    assert "rebuilt as 2" in capsys.readouterr().err
    for i in (0, 2):
        rows, logger = _record()
        (alone,) = train_stack([cfgs[i]], loggers=[logger], dtype=torch.float64)
        assert sorted(rows) == sorted(recs[i][0]) and res[i].plateau_step == alone.plateau_step
        for step, vals in rows.items():
            for k, v in vals.items():
                if math.isfinite(v):
                    assert recs[i][0][step][k] == pytest.approx(v, rel=1e-9, abs=1e-12), (i, step, k)


def test_runs_left_with_one_learning_rate_go_on_in_the_fused_optimiser(monkeypatch):
    """The runs with other learning rates end early, so the rebuilt stack's runs share one schedule and it runs
    torch's fused optimiser, which takes over the per-model update's state (both keep it under torch.optim's
    names: training/optim.py): each live run's curve is its own alone (float64, to 1e-9)."""
    from sparse_tui.training.loop import Prepared

    cfgs = [c.model_copy(update={"train": c.train.model_copy(update={"lr": 2e-3})}) if i % 2 else c
            for i, c in enumerate(sweep())]  # runs 1 and 3 (they end at step 10) at another learning rate
    fused = []
    real = Prepared.restack.__func__
    monkeypatch.setattr(Prepared, "restack", classmethod(lambda cls, old, keep: fused.append(
        (old.opt.fused, real(cls, old, keep))) or fused[-1][1]))
    recs = [_record() for _ in cfgs]
    res = train_stack(cfgs, loggers=[r[1] for r in recs], dtype=torch.float64)
    assert [r.status for r in res] == ["finished"] * 4 and [r.step for r in res] == [150, 10, 150, 10]
    assert [(was, new.opt.fused) for was, new in fused] == [(False, True)]
    for i in (0, 2):
        rows, logger = _record()
        train_stack([cfgs[i]], loggers=[logger], dtype=torch.float64)
        assert sorted(rows) == sorted(recs[i][0])
        for step, vals in rows.items():
            for k, v in vals.items():
                if math.isfinite(v):
                    assert recs[i][0][step][k] == pytest.approx(v, rel=1e-9, abs=1e-12), (i, step, k)


def test_no_rebuild_near_the_end_or_while_most_runs_live():
    cfgs = sweep(steps=60)  # the two runs end at step 10 with 50 steps left: not worth a rebuild
    res = train_stack(cfgs)
    assert not any("rebuilt" in n for r in res for n in r.summary.get("notes", []))
    three = [cfg(0, 16, LIVE), cfg(1, 16, LIVE), cfg(2, 16, ENDS)]  # 2 of 3 live: more than half
    res = train_stack(three)
    assert not any("rebuilt" in n for r in res for n in r.summary.get("notes", []))


def test_a_checkpoint_written_after_the_rebuild_resumes_bit_identically(tmp_path):
    from sparse_tui.lifecycle import runner
    from sparse_tui.store import RunStore

    cfgs = [c.model_copy(update={"train": c.train.model_copy(update={"checkpoint_every": 40})}) for c in sweep()]
    specs = [RunSpec("restack", "restack.toml", c, {"seed": c.seed}) for c in cfgs]

    ref = RunStore(tmp_path / "ref")
    rb, ref_ids = ref.create_runs(specs)
    runner.work(ref, rb, group=8)

    class StopAt:  # one call per claim, then one per step
        calls = 0

        def __call__(self):
            StopAt.calls += 1
            return "interrupted" if StopAt.calls > 1 + 93 else None

    store = RunStore(tmp_path / "cut")
    batch, ids = store.create_runs(specs)
    runner.work(store, batch, group=8, should_stop=StopAt())
    assert [store.get(i).status for i in ids] == ["interrupted", "finished", "interrupted", "finished"]
    assert 80 < store.get(ids[0]).step < 100  # after the rebuild (step 10) and its checkpoint at 80
    assert runner.requeue_for_resume(store, batch, [ids[0], ids[2]]) == [ids[0], ids[2]]
    runner.work(store, batch, group=8)
    for i, r in zip(ids, ref_ids):
        got, want = store.get(i), ref.get(r)
        assert got.status == want.status == "finished" and got.step == want.step
        assert store.metrics(i) == ref.metrics(r)  # bit-identical series


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_rebuilt_stack_is_captured_anew_on_cuda():
    """On CUDA the step of the rebuilt stack is captured again (its tensors are new): the live runs stay graphed and
    train as they do alone (float32, to rounding)."""
    cfgs = [c.model_copy(update={"train": c.train.model_copy(update={"device": "cuda"})}) for c in sweep()]
    recs = [_record() for _ in cfgs]
    res = train_stack(cfgs, device="cuda", loggers=[r[1] for r in recs])
    assert [r.status for r in res] == ["finished"] * 4
    assert res[0].summary["cuda_graph"] is True and "rebuilt as 2" in " ".join(res[0].summary["notes"])
    rows, logger = _record()
    train_stack([cfgs[0]], device="cuda", loggers=[logger])
    assert recs[0][0][150]["test/loss"] == pytest.approx(rows[150]["test/loss"], rel=1e-4)
