"""A stack's evaluation in one batched pass (loop.Prepared.measure / snapshots: one forward of the whole stack per
chunk of test sequences) gives every member's metrics and attention snapshots as evaluating its own module does
(Tracker.measure, training/snapshots.py), for every task kind of the registry and the toy model, with mixed shapes
and with ended members riding along in the stack."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from sparse_tui.presets.schema import RunConfig
from sparse_tui.presets.tasks import TASKS
from sparse_tui.training import metrics
from sparse_tui.training.loop import Prepared, evaluate_due
from sparse_tui.training.snapshots import attention_snapshot

TR = {"kind": "transformer", "n_layers": 2, "n_heads": 2, "d_model": 16}
TRAIN = {"lr": 3e-2, "batch_size": 8, "steps": 40, "device": "cpu"}
EVAL = {"every": 10, "test_size": 24, "snapshot_examples": 3}

# Per kind: member configs mixing the shapes a stack pads (width, sequence length, vocabulary / vector size).
CASES = {
    "linreg": [({"kind": "linreg", "d": 4, "T": 8}, {}), ({"kind": "linreg", "d": 6, "T": 12}, {"d_model": 8}),
               ({"kind": "linreg", "d": 4, "T": 10}, {})],
    "recall": [({"kind": "recall", "n_tokens": 8, "n_pairs": 3}, {}),
               ({"kind": "recall", "n_tokens": 10, "n_pairs": 5}, {"d_model": 8}),
               ({"kind": "recall", "n_tokens": 8, "n_pairs": 4}, {})],
    "nearest": [({"kind": "nearest", "vocab": 12, "context": 4}, {}),
                ({"kind": "nearest", "vocab": 16, "context": 6}, {"d_model": 8}),
                ({"kind": "nearest", "vocab": 12, "context": 5}, {})],
    "toy": [({"kind": "linreg", "d": 6, "T": 10}, {"kind": "toy", "init": "normal", "init_scale": 0.3})] * 3,
}


def configs(case: str) -> list[RunConfig]:
    out = []
    for seed, (task, model) in enumerate(CASES[case]):
        m = model if model.get("kind") == "toy" else {**TR, **model}
        out.append(RunConfig.model_validate({"seed": seed, "task": copy.deepcopy(task), "model": m,
                                             "train": dict(TRAIN), "eval": dict(EVAL)}))
    return out


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])  # the GPU session runs this file on CUDA


def trained(case: str, device: str = "cpu") -> Prepared:
    torch.manual_seed(0)
    cfgs = [c.model_copy(update={"train": c.train.model_copy(update={"device": device})}) for c in configs(case)]
    prep = Prepared(cfgs, torch.device(device))
    prep.batched_eval = True  # the GPU's path, also on this CPU (where the loop evaluates members one at a time)
    for step in range(1, 16):  # away from the initialisation, where attention is near uniform
        prep.opt.set_lr(step, prep.lr_dev)
        prep.step_fn()
    return prep


def test_batched_on_gpus_only():
    assert Prepared(configs("recall")[:1], torch.device("cpu")).batched_eval is False


def test_every_task_kind_is_covered():
    assert set(TASKS) <= set(CASES) - {"toy"}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_batched_pass_equals_each_member_alone(case, device, monkeypatch):
    prep = trained(case, device)
    if case != "toy":
        assert prep.stack.padded  # mixed shapes share the stack
    # chunks of 5 test sequences for the stack (24 = 5 + 5 + 5 + 5 + 4), whole test sets for a lone model
    monkeypatch.setattr(metrics, "_ATTN_BUDGET", 5 * metrics._attn_elements(prep.stack, prep.test_inputs().shape[2]))
    due = [prep.members[0], prep.members[2]]  # member 1 "ended": it rides along in the forward, unevaluated
    got = prep.measure(due)
    assert sorted(got) == [0, 2]
    monkeypatch.setattr(metrics, "_ATTN_BUDGET", 10**9)
    for mb in due:
        want = mb.measure()
        assert sorted(got[mb.slot]) == sorted(want)
        probes = [k for k in want if k.startswith("attn/")]
        assert probes and "test/loss" in want
        for k, v in want.items():
            assert math.isfinite(v)
            assert got[mb.slot][k] == pytest.approx(v, rel=1e-4, abs=1e-5), k
    snaps = prep.snapshots(due)
    for mb in due:
        maps, meta = attention_snapshot(mb.module, mb.test, mb.cfg.eval.snapshot_examples)
        assert snaps[mb.slot][1] == meta
        assert sorted(snaps[mb.slot][0]) == sorted(maps)
        for name, m in maps.items():
            torch.testing.assert_close(torch.as_tensor(snaps[mb.slot][0][name]), torch.as_tensor(m), rtol=1e-4,
                                       atol=1e-5)


@pytest.mark.parametrize("batched", [True, False])
def test_one_evaluation_is_one_store_transaction(tmp_path, batched):
    """Every due member's metrics, train/loss points and snapshot go to the store in one transaction per
    evaluation (before: one per member and record), batched (GPUs) or not (CPUs)."""
    from sparse_tui.presets.loading import RunSpec
    from sparse_tui.store import RunStore
    from sparse_tui.training.runlog import RunLogger

    store = RunStore(tmp_path)
    cfgs = configs("recall")
    _, ids = store.create_runs([RunSpec("t", "t.toml", c) for c in cfgs])
    prep = Prepared(cfgs, torch.device("cpu"), [RunLogger(store, i) for i in ids])
    prep.batched_eval = batched
    begins = []
    store.con.set_trace_callback(lambda sql: begins.append(sql) if sql.startswith("BEGIN") else None)
    evaluate_due(prep, prep.members, 0)  # step 0: metrics and a snapshot for each of 3 members
    store.con.set_trace_callback(None)
    assert begins == ["BEGIN IMMEDIATE"]
    for i in ids:
        assert store.metrics(i)["test/loss"][0] == [0]
        assert store.attention_steps(i) == [0]
