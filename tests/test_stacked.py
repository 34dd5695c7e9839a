"""A run trained inside a stack (loop.train_stack) gives the curve it gives alone (trainer.train_run), for every
optimiser and the per-model hyperparameters a stack may mix; the store records of stacked / process / sequential
schedules agree; the runner's trial-step fallbacks (runner.train_claimed)."""

from __future__ import annotations

import math

import pytest
import torch

from sparse_tui.executors import LocalExecutor
from sparse_tui.presets.schema import RunConfig
from sparse_tui.training import grouping as st
from sparse_tui.training.loop import train_stack
from sparse_tui.training.trainer import RunLogger, train_run

RECALL = {
    "task": {"kind": "recall", "n_tokens": 8, "n_pairs": 3},
    "model": {"kind": "transformer", "n_layers": 2, "n_heads": 1, "d_model": 16},
    "train": {"lr": 1e-2, "batch_size": 16, "steps": 30, "device": "cpu"},
    "eval": {"every": 10, "test_size": 32, "snapshot_every": 10},
    "plateau": {"metric": "test/acc", "mode": "above", "value": 0.3},
}


def cfg(base: dict, **dotted) -> RunConfig:
    import copy

    raw = copy.deepcopy(base)
    for key, v in dotted.items():
        node = raw
        *path, last = key.split("__")
        for p in path:
            node = node.setdefault(p, {})
        node[last] = v
    return RunConfig.model_validate(raw)


class Recorder:
    def __init__(self):
        self.metrics: dict[int, dict] = {}
        self.attn: dict[int, dict] = {}
        self.logger = RunLogger(on_eval=lambda s, v: self.metrics.__setitem__(s, dict(v)))
        self.logger.attention = lambda s, maps, meta: self.attn.__setitem__(s, (maps, meta))


def run_alone(cfgs):
    out = []
    for c in cfgs:
        r = Recorder()
        res = train_run(c, logger=r.logger)
        out.append((r, res))
    return out


def run_stacked(cfgs, **kw):
    recs = [Recorder() for _ in cfgs]
    res = train_stack(cfgs, loggers=[r.logger for r in recs], **kw)
    return list(zip(recs, res))


def assert_same(alone, stacked, rtol=2e-4, atol=2e-5):
    for (ra, a), (rs, s) in zip(alone, stacked):
        assert s.status == a.status and s.step == a.step and s.reason == a.reason
        assert s.plateau_step == a.plateau_step
        assert sorted(rs.metrics) == sorted(ra.metrics)
        for step, vals in ra.metrics.items():
            got = rs.metrics[step]
            assert sorted(got) == sorted(vals), step
            for k, v in vals.items():
                if math.isfinite(v):
                    assert got[k] == pytest.approx(v, rel=rtol, abs=atol), (step, k)
        assert sorted(rs.attn) == sorted(ra.attn)
        for step, (maps, meta) in ra.attn.items():
            assert rs.attn[step][1] == meta
            for name, m in maps.items():
                torch.testing.assert_close(torch.as_tensor(rs.attn[step][0][name]), torch.as_tensor(m), rtol=1e-3,
                                           atol=1e-4)
        assert s.summary["final"].keys() == a.summary["final"].keys()
        assert s.summary["n_params"] == a.summary["n_params"]


def test_stacked_recall_matches_alone_with_mixed_hyperparameters():
    cfgs = [
        cfg(RECALL, seed=0),
        cfg(RECALL, seed=1, train__lr=3e-3, train__grad_clip=0.05),  # clip is per model, and binds here
        cfg(RECALL, seed=2, task__train_size=64, task__B=1.5, task__p=0.3, model__init_std=0.05),
        cfg(RECALL, seed=3, train__warmup_steps=10, train__schedule="cosine"),
    ]
    assert st.stackable(cfgs)
    assert_same(run_alone(cfgs), run_stacked(cfgs))


@pytest.mark.parametrize("opt", ["adamw", "sgd"])
def test_stacked_optimisers_with_weight_decay_match_alone(opt):
    extra = {"train__momentum": 0.9} if opt == "sgd" else {}
    cfgs = [
        cfg(RECALL, seed=0, train__optimizer=opt, train__weight_decay=0.1, **extra),
        cfg(RECALL, seed=1, train__optimizer=opt, train__lr=2e-2, train__grad_clip=0.5, **extra),
    ]
    assert_same(run_alone(cfgs), run_stacked(cfgs))


def test_stacked_toy_linreg_and_fused_attention():
    toy = {
        "task": {"kind": "linreg", "d": 8, "T": 16},
        "model": {"kind": "toy", "init": "normal", "init_scale": 0.1},
        "train": {"optimizer": "sgd", "lr": 0.5, "batch_size": 32, "steps": 20, "device": "cpu"},
        "eval": {"every": 5, "test_size": 64},
    }
    cfgs = [cfg(toy, seed=s, train__lr=lr) for s, lr in ((0, 0.5), (1, 1.0))]
    assert_same(run_alone(cfgs), run_stacked(cfgs))
    # the fused-attention training path (the GPU default) gives the same curves too
    near = {
        "task": {"kind": "nearest", "vocab": 12, "context": 4},
        "model": {"kind": "transformer", "n_layers": 1, "d_model": 16, "pos_enc": "none"},
        "train": {"batch_size": 16, "steps": 10, "lr": 1e-2, "device": "cpu"},
        "eval": {"every": 5, "test_size": 32},
    }
    cfgs = [cfg(near, seed=s) for s in (0, 1)]
    assert_same(run_alone(cfgs), run_stacked(cfgs, kernel="sdpa"))
    assert_same(run_alone(cfgs), run_stacked(cfgs, kernel="math"))


def test_diverging_member_ends_alone_and_others_carry_on():
    cfgs = [cfg(RECALL, seed=0), cfg(RECALL, seed=1, train__lr=1e6, train__optimizer="sgd")]
    cfgs[0] = cfg(RECALL, seed=0, train__optimizer="sgd", train__lr=0.5)
    done = []
    stacked = run_stacked(cfgs, on_done=lambda i, r: done.append((i, r.status)))
    alone = run_alone(cfgs)
    assert alone[1][1].status == "diverged"
    assert done[0] == (1, "diverged")  # recorded as soon as it diverged, before the other run ended
    assert_same(alone, stacked)


def test_stop_request_ends_every_member():
    cfgs = [cfg(RECALL, seed=s) for s in (0, 1)]
    res = train_stack(cfgs, should_stop=lambda: "interrupted")
    assert [r.status for r in res] == ["interrupted", "interrupted"]
    assert all(r.step == 1 for r in res)


def test_group_key_separates_shapes_and_allows_per_model_fields():
    a = cfg(RECALL, seed=0)
    assert st.group_key(a) == st.group_key(cfg(RECALL, seed=5, train__lr=1e-3, task__p=0.5, task__train_size=10))
    # widths, sequence lengths and vocabularies are padded exactly inside one stack (tests/test_stack.py)
    assert st.group_key(a) == st.group_key(cfg(RECALL, model__d_model=32, task__n_pairs=2, task__n_tokens=12))
    assert st.group_key(a) != st.group_key(cfg(RECALL, train__batch_size=8))
    assert st.group_key(a) != st.group_key(cfg(RECALL, model__n_layers=3))
    assert st.group_key(a) != st.group_key(cfg(RECALL, train__optimizer="sgd"))


def test_runs_that_cannot_share_a_stack_are_recorded_failed_not_trained(tmp_path):
    """The runner trains what it was handed as one stack only when the runs share a group key; otherwise (a bug of
    the caller) each run is recorded failed with the reason, nothing trained."""
    from sparse_tui.lifecycle import runner
    from sparse_tui.store import RunStore

    store = RunStore(tmp_path / "runs")
    cfgs = [cfg(RECALL, seed=0), cfg(RECALL, seed=1, model__n_layers=1)]
    batch, ids = _batch(store, cfgs)
    recs = store.claim_runs(ids, device="cpu", versions={})
    runner.train_claimed(store, recs, cfgs, torch.device("cpu"), None)
    for i in ids:
        rec = store.get(i)
        assert rec.status == "failed" and "do not share one stack" in rec.reason, rec.reason
        assert store.metrics(i) == {}


# -- through the store: stacked, processes and sequential schedules record the same runs --------------------------


def _batch(store, cfgs):
    from sparse_tui.presets.loading import RunSpec

    specs = [RunSpec("eq", "eq.toml", c, {"seed": c.seed}) for c in cfgs]
    return store.create_runs(specs)


def _records(store, ids):
    return {store.get(i).seed: (store.get(i), store.metrics(i)) for i in ids}


def _series_close(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        (sa, va), (sb, vb) = a[k], b[k]
        assert sa == sb
        for u, v in zip(va, vb):
            if math.isfinite(u):
                assert v == pytest.approx(u, rel=2e-4, abs=2e-5), k


@pytest.mark.parametrize("schedule", ["stacked", "processes"])
def test_store_records_match_sequential(tmp_path, schedule):
    from sparse_tui.lifecycle import runner
    from sparse_tui.store import RunStore

    cfgs = [cfg(RECALL, seed=s, train__steps=20) for s in (0, 1, 2)]
    store = RunStore(tmp_path / "runs")
    _, ids_seq = _batch(store, cfgs)
    runner.run_batch(store, store.get(ids_seq[0]).batch_id, LocalExecutor(), workers=1)
    batch, ids = _batch(store, cfgs)
    if schedule == "stacked":
        runner.run_batch(store, batch, LocalExecutor(), workers=1, group=8)
    else:
        runner.run_batch(store, batch, LocalExecutor(), workers=2)
    seq, got = _records(store, ids_seq), _records(store, ids)
    for seed in (0, 1, 2):
        (ra, ma), (rb, mb) = seq[seed], got[seed]
        assert rb.status == ra.status == "finished"
        assert rb.plateau_step == ra.plateau_step
        assert store.attention_steps(rb.run_id) == store.attention_steps(ra.run_id)
        _series_close(ma, mb)
        if schedule == "stacked":
            assert rb.summary["stacked_with"] == 3


def test_stack_whose_trial_step_fails_falls_back_and_says_why(tmp_path, monkeypatch, capsys):
    """A stack whose trial step fails (here: an injected kernel error for any stack of more than one run) is
    halved until it trains; a lone run that still fails is retried on the plain kernel. Every run finishes with the
    numbers it gets alone, and the batch log and each run's record say why."""
    from sparse_tui.lifecycle import runner
    from sparse_tui.models.stack import StackedTransformer
    from sparse_tui.store import RunStore
    from sparse_tui.training import loop

    sizes = []
    real_trial = loop.trial_step

    def flaky_trial(prep, *a, **kw):
        sizes.append((prep.M, prep.stack.kernel))
        if prep.M > 1 or prep.stack.kernel != "math":
            raise loop.StackFailed("RuntimeError: LSE is not correctly aligned (injected)")
        return real_trial(prep, *a, **kw)

    monkeypatch.setattr(loop, "trial_step", flaky_trial)
    assert StackedTransformer  # the stacks being tried
    store = RunStore(tmp_path / "runs")
    cfgs = [cfg(RECALL, seed=s, train__steps=5) for s in range(3)]
    batch, ids = _batch(store, cfgs)
    runner.run_batch(store, batch, LocalExecutor(), workers=1, group=8)
    # 3 -> 1 + 2 -> 1 + (1 + 1); each lone run: default kernel fails, the plain kernel trains
    assert [m for m, _ in sizes] == [3, 1, 1, 2, 1, 1, 1, 1]
    log = capsys.readouterr().err
    assert "a stack of 3 runs failed its trial step (RuntimeError: LSE is not correctly aligned (injected))" in log
    assert "trained on the plain attention kernel" in log
    monkeypatch.undo()
    alone = run_alone(cfgs)
    for i, (rec, (_, res)) in enumerate(zip([store.get(i) for i in ids], alone)):
        assert rec.status == "finished"
        notes = rec.summary["notes"]
        assert any("failed its trial step" in n for n in notes) and "plain attention kernel" in notes[-1]
        assert rec.summary["final"]["test/loss"] == pytest.approx(res.summary["final"]["test/loss"], rel=1e-4)


def test_a_run_whose_every_kernel_fails_is_recorded_failed(tmp_path, monkeypatch):
    from sparse_tui.lifecycle import runner
    from sparse_tui.store import RunStore
    from sparse_tui.training import loop

    def broken(*a, **kw):
        raise loop.StackFailed("RuntimeError: no kernel (injected)")

    monkeypatch.setattr(loop, "trial_step", broken)
    store = RunStore(tmp_path / "runs")
    batch, ids = _batch(store, [cfg(RECALL, seed=0, train__steps=5)])
    runner.run_batch(store, batch, LocalExecutor(), workers=1)
    rec = store.get(ids[0])
    assert rec.status == "failed" and "no kernel (injected)" in rec.reason
    # the stacked schedule: halves, then each run alone on every kernel, then recorded failed (no endless split)
    batch, ids = _batch(store, [cfg(RECALL, seed=s, train__steps=5) for s in (0, 1)])
    runner.run_batch(store, batch, LocalExecutor(), workers=1, group=8)
    for i in ids:
        rec = store.get(i)
        assert rec.status == "failed" and "no kernel (injected)" in rec.reason
        assert any("failed its trial step" in n for n in rec.summary["notes"])
