"""The native stack of models (models/stack.py) and the one training loop (training/loop.py), in float64 on CPU:
a model inside a stack gives exactly what it gives alone (outputs, gradients, optimiser steps, whole curves),
whatever shapes share its stack (padding is exact), and whatever runs share it (own data and random streams)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from sparse_tui.models import build_model
from sparse_tui.models.stack import StackedTransformer, build_stack, stacked_loss
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.presets.schema import RunConfig
from sparse_tui.tasks import make_task
from sparse_tui.training.loop import train_stack
from sparse_tui.training.runlog import RunLogger

F64 = torch.float64


def cfg(base: dict, **dotted) -> RunConfig:
    raw = copy.deepcopy(base)
    for key, v in dotted.items():
        node = raw
        *path, last = key.split("__")
        for p in path:
            node = node.setdefault(p, {})
        node[last] = v
    return RunConfig.model_validate(raw)


def blog_nembd_cfgs(**over) -> list[RunConfig]:
    """Every width of presets/blog_nembd.toml (8 .. 80), small batches and test sets."""
    from pathlib import Path

    preset = Path(__file__).resolve().parent.parent / "presets" / "blog_nembd.toml"
    sets = ["seeds=[0]", "train.batch_size=4", "eval.test_size=8", "train.device=\"cpu\""]
    sets += [f"{k}={v}" for k, v in over.items()]
    return [s.config for s in expand(load_preset(preset, sets))]


def modules_and_batches(cfgs, B=4):
    mods, xs, ys = [], [], []
    for c in cfgs:
        task = make_task(c, "cpu")
        mods.append(build_model(c, task).to(F64))
        b = task.train_batch(B)
        xs.append(b.x.to(F64) if b.x.is_floating_point() else b.x)
        ys.append(b.y.to(F64) if b.y.is_floating_point() else b.y)
    return mods, xs, ys, task.classification


def stack_inputs(stack, xs, ys, classification):
    from sparse_tui.tasks.base import Batch
    from sparse_tui.training.loop import Batcher

    members = [type("M", (), {"task": type("T", (), {"classification": classification})()})() for _ in xs]
    batcher = Batcher(stack, members, F64)
    return batcher.assemble([Batch(x, y, torch.zeros(1)) for x, y in zip(xs, ys)])


def loss_fn(out, y, classification):
    """A model's loss alone: cross-entropy, or 0.5 ||y - y*||^2 averaged over the batch (paper App. A.2)."""
    return F.cross_entropy(out, y) if classification else 0.5 * ((out - y) ** 2).sum(-1).mean()


def check_model_equivalence(cfgs, kernel="core"):
    mods, xs, ys, classification = modules_and_batches(cfgs)
    stack = build_stack(mods, kernel, classification)
    x, y = stack_inputs(stack, xs, ys, classification)
    out = stack(x)
    losses = stacked_loss(out, y, classification)
    losses.sum().backward()
    stack.mask_grads()
    for i, m in enumerate(mods):
        o, _ = m(xs[i])
        n_out = o.shape[-1]
        torch.testing.assert_close(out[i, :, :n_out], o, rtol=1e-12, atol=1e-12)
        lo = loss_fn(o, ys[i], classification)
        torch.testing.assert_close(losses[i], lo, rtol=1e-12, atol=1e-12)
        lo.backward()
        for name, p in m.named_parameters():
            if not p.requires_grad:  # a fixed parameter (the frozen previous-token head): a buffer of the stack
                assert p.grad is None and stack.params[name].grad is None and name in stack.fixed, name
                continue
            g = stack.params[name].grad[i]
            torch.testing.assert_close(g[stack._places[name][i]], p.grad, rtol=1e-10, atol=1e-12, msg=name)
            padded = torch.ones_like(g, dtype=torch.bool)
            padded[stack._places[name][i]] = False
            assert not g[padded].any(), f"{name}: padding got a gradient"
    return stack


def test_every_blog_nembd_width_in_one_stack_equals_each_model_alone():
    cfgs = blog_nembd_cfgs()
    assert sorted({c.model.d_model for c in cfgs}) == [8, 16, 24, 32, 40, 48, 60, 80]
    stack = check_model_equivalence(cfgs)
    assert stack.M == 8 and stack.D == 80 and stack.padded


@pytest.mark.parametrize("kernel", ["core", "sdpa", "math"])
def test_mixed_lengths_vocabularies_heads_and_layernorm_are_exact(kernel):
    base = {
        "task": {"kind": "recall", "n_tokens": 10, "n_pairs": 3},
        "model": {"kind": "transformer", "n_layers": 2, "n_heads": 2, "d_model": 8, "mlp": True,
                  "layernorm": True, "pos_enc": "learned", "init": "torch"},
        "train": {"device": "cpu"},
    }
    cfgs = [cfg(base, seed=0), cfg(base, seed=1, model__d_model=12, model__d_qk=3, task__n_pairs=5),
            cfg(base, seed=2, model__d_model=16, task__n_tokens=14, model__mlp_factor=2),
            cfg(base, seed=3, task__n_pairs=1, model__d_qk=6)]
    stack = check_model_equivalence(cfgs, kernel)
    assert stack.mixed_len and stack.mixed_width and stack.logit_bias is not None


@pytest.mark.parametrize("kernel", ["core", "sdpa", "math"])
def test_euclidean_attention_stacks_exactly(kernel):
    """Distance attention (model.attention = "euclidean") in a stack of mixed widths, q/k sizes and lengths: each
    model's outputs and gradients alone (the extra key term ||k||^2 is per model and blind to zero padding)."""
    base = {"task": {"kind": "recall", "n_tokens": 10, "n_pairs": 3},
            "model": {"kind": "transformer", "n_layers": 2, "n_heads": 2, "d_model": 8, "attention": "euclidean",
                      "init": "torch"}, "train": {"device": "cpu"}}
    stack = check_model_equivalence([cfg(base, seed=0), cfg(base, seed=1, model__d_model=12, model__d_qk=3,
                                                            task__n_pairs=5), cfg(base, seed=2, model__d_qk=6)],
                                    kernel)
    assert stack.cfg.attention == "euclidean" and stack.mixed_width and stack.mixed_len
    dot = cfg(base, seed=3, model__attention="dot")
    from sparse_tui.training.grouping import group_key

    assert group_key(dot) != group_key(cfg(base, seed=0))  # dot and distance attention never share a stack


def test_a_stack_of_lengths_alone_masks_no_gradient():
    """Only sequence lengths differ (Fig. 4's n_pairs sweep): exact without a single gradient mask (the step's
    mask multiplies cost a kernel per parameter); a width that differs brings the masks of its parameters only."""
    base = {"task": {"kind": "recall", "n_tokens": 10, "n_pairs": 3},
            "model": {"kind": "transformer", "n_layers": 2, "n_heads": 2, "d_model": 8, "mlp": True,
                      "layernorm": True, "pos_enc": "learned", "init": "torch"}, "train": {"device": "cpu"}}
    stack = check_model_equivalence([cfg(base, seed=0), cfg(base, seed=1, task__n_pairs=5),
                                     cfg(base, seed=2, task__n_pairs=1)])
    assert stack.mixed_len and stack.padded and stack.grad_masks == {}
    stack = check_model_equivalence([cfg(base, seed=0), cfg(base, seed=1, task__n_tokens=14)])
    assert sorted(stack.grad_masks) == ["embed.weight", "unembed.bias", "unembed.weight"]  # vocabulary only


def test_sinusoidal_tied_and_vector_inputs_are_exact():
    base = {"task": {"kind": "recall", "n_tokens": 12, "n_pairs": 3},
            "model": {"kind": "transformer", "n_layers": 2, "d_model": 8, "pos_enc": "sinusoidal",
                      "tie_embeddings": True}, "train": {"device": "cpu"}}
    check_model_equivalence([cfg(base, seed=0), cfg(base, seed=1, model__d_model=16, task__n_pairs=4)])
    lin = {"task": {"kind": "linreg", "d": 4, "T": 6}, "model": {"kind": "transformer", "n_layers": 1, "d_model": 8},
           "train": {"device": "cpu"}}
    check_model_equivalence([cfg(lin, seed=0), cfg(lin, seed=1, task__d=6, task__T=9, model__d_model=12)])
    # model.bias = false (no Linear biases) with learned positions drawn at pos_init_std, MLP and two heads
    bare = {"task": {"kind": "recall", "n_tokens": 12, "n_pairs": 3},
            "model": {"kind": "transformer", "n_layers": 2, "n_heads": 2, "d_model": 8, "bias": False, "mlp": True,
                      "pos_init_std": 0.1}, "train": {"device": "cpu"}}
    check_model_equivalence([cfg(bare, seed=0), cfg(bare, seed=1, model__d_model=12, task__n_pairs=4)])
    lin_bare = cfg(lin, seed=2, model__bias=False)
    check_model_equivalence([lin_bare, cfg(lin, seed=3, model__bias=False, task__d=6, model__d_model=12)])


def test_the_stack_is_an_nn_module_with_state_dict_and_to():
    """Registered parameters: ``state_dict()`` has the stacked models' own parameter names (each entry [M, ...],
    model i's real entries its own values), ``load_state_dict`` makes another stack of the same shapes compute
    exactly the same, and ``.to()`` converts the parameters and every per-model constant (buffers: the masks of
    mixed widths, lengths and vocabularies, per-model query scales, sinusoidal positions)."""
    base = {"task": {"kind": "recall", "n_tokens": 10, "n_pairs": 3},
            "model": {"kind": "transformer", "n_layers": 2, "n_heads": 2, "d_model": 8, "mlp": True,
                      "layernorm": True, "pos_enc": "sinusoidal", "init": "torch"}, "train": {"device": "cpu"}}
    cfgs = [cfg(base, seed=0), cfg(base, seed=1, model__d_model=12, model__d_qk=3, task__n_pairs=5,
                                   task__n_tokens=14)]
    mods, xs, ys, classification = modules_and_batches(cfgs)
    stack = build_stack(mods, "core", classification)
    sd = stack.state_dict()
    assert list(sd) == [n for n, _ in mods[0].named_parameters()]
    for i, m in enumerate(mods):
        for name, p in m.named_parameters():
            assert sd[name].shape[0] == 2 and torch.equal(sd[name][i][stack._places[name][i]], p.detach())
    x, _ = stack_inputs(stack, xs, ys, classification)
    want = stack(x)
    other = build_stack(modules_and_batches([c.model_copy(update={"seed": c.seed + 7}) for c in cfgs])[0], "core",
                        classification)
    assert not torch.equal(other(x), want)
    other.load_state_dict(sd)
    assert torch.equal(other(x), want)
    low = build_stack([copy.deepcopy(m).float() for m in mods], "core", classification)
    assert isinstance(low.q_scale, torch.Tensor) and low.width_mask is not None and low.logit_bias is not None
    low = low.to(F64)
    floats = list(low.parameters()) + [b for b in low.buffers() if b.is_floating_point()]
    assert len(floats) > len(sd) and all(t.dtype == F64 for t in floats)
    low.load_state_dict(sd)  # the same float64 parameters; the constants were made in float32
    torch.testing.assert_close(low(x), want, rtol=1e-6, atol=1e-6)


def test_stack_rejects_models_of_different_structure():
    base = {"task": {"kind": "recall", "n_tokens": 8, "n_pairs": 2}, "model": {"kind": "transformer"},
            "train": {"device": "cpu"}}
    # sinusoidal against no positions: the same parameters, another structure (the stack reads it from the config)
    for other in ({"model__n_layers": 3}, {"model__pos_enc": "none"}):
        mods, *_ = modules_and_batches([cfg(base, model__pos_enc="sinusoidal"), cfg(base, **other)])
        with pytest.raises(ValueError, match="one structure"):
            StackedTransformer(mods)


# -- the loop: whole runs in float64 ---------------------------------------------------------------------------


def curves(cfgs, **kw):
    logs = [[] for _ in cfgs]
    loggers = [RunLogger(on_eval=lambda s, v, log=log: log.append((s, dict(v)))) for log in logs]
    res = train_stack(cfgs, loggers=loggers, dtype=F64, **kw)
    return logs, res


def assert_curves_equal(a, b, rel=1e-9):
    (la, ra), (lb, rb) = a, b
    assert [r.status for r in ra] == [r.status for r in rb]
    assert [r.plateau_step for r in ra] == [r.plateau_step for r in rb]
    for x, y in zip(la, lb):
        assert [s for s, _ in x] == [s for s, _ in y]
        for (_, u), (_, v) in zip(x, y):
            assert u.keys() == v.keys()
            for k in u:
                assert v[k] == pytest.approx(u[k], rel=rel, abs=1e-12), k


def test_whole_runs_of_every_blog_width_in_one_stack_equal_each_run_alone():
    """Several optimiser steps (Adam, the preset's lr 1e-2) with evaluations: stack of 8 widths vs 8 lone runs."""
    cfgs = blog_nembd_cfgs(**{"train.steps": 4, "eval.every": 2})
    stacked = curves(cfgs)
    alone = [curves([c]) for c in cfgs]
    assert_curves_equal((sum((a[0] for a in alone), []), sum((a[1] for a in alone), [])), stacked)
    assert stacked[1][0].summary["stacked_with"] == 8 and "stacked_with" not in alone[0][1][0].summary


def test_a_runs_numbers_do_not_depend_on_its_stack_mates():
    """Per-model lr, schedule, clipping, weight decay and betas, own data and random streams: run 0's curve is the
    same with any partners (per-model optimiser path, then the fused one)."""
    base = {"task": {"kind": "recall", "n_tokens": 8, "n_pairs": 3},
            "model": {"kind": "transformer", "n_layers": 2, "d_model": 16},
            "train": {"lr": 1e-2, "batch_size": 8, "steps": 6, "device": "cpu", "optimizer": "adamw"},
            "eval": {"every": 3, "test_size": 16}}
    me = cfg(base, seed=0, train__weight_decay=0.1, train__grad_clip=0.5)
    mates_a = [cfg(base, seed=5, train__lr=3e-2, train__beta2=0.9, task__p=0.5, task__train_size=32),
               cfg(base, seed=6, train__warmup_steps=3, train__schedule="cosine", model__d_model=24)]
    mates_b = [cfg(base, seed=7, train__grad_clip=1e-3, task__n_pairs=2, train__beta1=0.5)]
    alone = curves([me])
    for mates in (mates_a, mates_b):
        logs, res = curves([me] + mates)
        assert_curves_equal(alone, ([logs[0]], [res[0]]))
    # the fused optimiser (every run with the same schedule and weight decay) against the per-model one
    same = [cfg(base, seed=s) for s in (0, 1)]
    logs, res = curves(same)
    assert_curves_equal(curves([same[1]]), ([logs[1]], [res[1]]))


def test_toy_stack_equals_toy_alone():
    toy = {"task": {"kind": "linreg", "d": 6, "T": 8}, "model": {"kind": "toy", "init": "normal", "init_scale": 0.1},
           "train": {"optimizer": "sgd", "momentum": 0.9, "lr": 0.5, "batch_size": 16, "steps": 6, "device": "cpu"},
           "eval": {"every": 3, "test_size": 32}}
    cfgs = [cfg(toy, seed=0), cfg(toy, seed=1, train__lr=0.2, train__momentum=0.5)]
    stacked = curves(cfgs)
    alone = [curves([c]) for c in cfgs]
    # rel 1e-6: toy_metrics reads W in float32 (metrics.py), so float64 W that differ in the last bit may round apart
    assert_curves_equal((sum((a[0] for a in alone), []), sum((a[1] for a in alone), [])), stacked, rel=1e-6)


def test_precision_modes_on_cpu():
    """train.precision: tf32 changes nothing on a CPU (CUDA matmuls only); bf16 runs the forward under bfloat16
    autocast: the run trains and its curve stays near fp32's, but is not the same (what the docs promise)."""
    base = {"task": {"kind": "recall", "n_tokens": 8, "n_pairs": 3},
            "model": {"kind": "transformer", "n_layers": 2, "d_model": 16},
            "train": {"lr": 1e-2, "batch_size": 16, "steps": 6, "device": "cpu"},
            "eval": {"every": 3, "test_size": 32}}
    finals = {}
    for prec in ("fp32", "tf32", "bf16"):
        logs, res = [[]], None
        res = train_stack([cfg(base, train__precision=prec)],
                          loggers=[RunLogger(on_eval=lambda s, v: logs[0].append(v))])
        assert res[0].status == "finished"
        finals[prec] = logs[0][-1]["test/loss"]
    assert finals["tf32"] == finals["fp32"]
    assert finals["bf16"] != finals["fp32"] and abs(finals["bf16"] - finals["fp32"]) < 0.05 * finals["fp32"]


def test_cuda_graph_setting_is_inert_on_cpu_and_the_step_is_the_loops():
    """cuda_graph = 'on' has no effect on a CPU: the loop calls the same step function (loop.Prepared.step_fn)
    that a CUDA graph would capture, and gives the same numbers as 'off'."""
    from sparse_tui.training.loop import Prepared

    base = {"task": {"kind": "recall", "n_tokens": 8, "n_pairs": 3},
            "model": {"kind": "transformer", "n_layers": 1, "d_model": 8},
            "train": {"lr": 1e-2, "batch_size": 8, "steps": 4, "device": "cpu"}, "eval": {"every": 2, "test_size": 16}}
    on, off = curves([cfg(base, train__cuda_graph="on")]), curves([cfg(base, train__cuda_graph="off")])
    assert_curves_equal(off, on, rel=0)
    assert "cuda_graph" not in on[1][0].summary
    # driving step_fn by hand reproduces the loop's training loss
    prep = Prepared([cfg(base)], torch.device("cpu"), dtype=F64)
    for step in (1, 2):
        prep.opt.set_lr(step, prep.lr_dev)
        prep.step_fn()
    assert float(prep.loss_sum[0]) / 2 == pytest.approx(on[0][0][1][1]["train/loss"], rel=1e-9)


@pytest.mark.parametrize("kernel", ["core", "sdpa", "math"])
@pytest.mark.parametrize("causal", [True, False])
def test_a_strictly_causal_readout_stacks_exactly(kernel, causal):
    """model.readout_self_key = false (the readout query does not see its own position) in a stack of mixed
    lengths and widths, dot and distance attention: each model's outputs and gradients alone; a stack of one
    length uses the [n_q, L] bias, mixed lengths the per-model one (left padding: the readout is the last
    position of every model)."""
    base = {"task": {"kind": "recall", "n_tokens": 10, "n_pairs": 3},
            "model": {"kind": "transformer", "n_layers": 2, "n_heads": 2, "d_model": 8, "mlp": True,
                      "layernorm": True, "causal": causal, "readout_self_key": False, "init": "torch"},
            "train": {"device": "cpu"}}
    for attention in ("dot", "euclidean"):
        stack = check_model_equivalence([cfg(base, seed=0, model__attention=attention),
                                         cfg(base, seed=1, model__d_model=12, model__attention=attention,
                                             task__n_pairs=5)], kernel)
        assert not stack.cfg.readout_self_key and stack.mixed_len
        stack = check_model_equivalence([cfg(base, seed=s, model__attention=attention) for s in (0, 1)], kernel)
        assert not stack.mixed_len
    with pytest.raises(ValueError, match="one structure"):
        build_stack([build_model(c, make_task(c, "cpu")) for c in (cfg(base, seed=0),
                                                                    cfg(base, seed=1, model__readout_self_key=True))])


@pytest.mark.parametrize("kernel", ["core", "sdpa"])
def test_embed_scale_and_mha_init_stack_exactly_and_scale_as_stated(kernel):
    """``model.embed_scale`` (the input embedding times a constant before the positions) and ``init = "torch_mha"``
    (nn.MultiheadAttention's xavier-uniform q/k/v over the packed matrix, attention biases 0): exact in a stack, and
    each does what its description says, and nothing else."""
    lin = {"task": {"kind": "linreg", "d": 4, "T": 6, "position": "random", "indicator": True},
           "model": {"kind": "transformer", "n_layers": 2, "n_heads": 2, "d_model": 8, "d_qk": 4, "mlp": True,
                     "pos_enc": "sinusoidal", "init": "torch_mha", "embed_scale": 4.0},
           "train": {"device": "cpu"}}
    check_model_equivalence([cfg(lin, seed=0), cfg(lin, seed=1, task__d=6, task__T=9, model__d_model=12,
                                                      model__init="torch")], kernel)
    from sparse_tui.training.grouping import group_key

    assert group_key(cfg(lin, seed=0)) != group_key(cfg(lin, seed=0, model__embed_scale=1.0))
    # torch_mha draws the torch defaults first, then redraws only the attention: every other parameter is equal
    c_t, c_m = cfg(lin, seed=0, model__init="torch"), cfg(lin, seed=0)
    m_t, m_m = (build_model(c, make_task(c, "cpu")) for c in (c_t, c_m))
    p_t, p_m = dict(m_t.named_parameters()), dict(m_m.named_parameters())
    bound = (6.0 / (8 + 4 + 4 + 8)) ** 0.5  # fan_in d_model 8, fan_out the packed rows (2 heads x 4) x 2 + 8
    for name, p in p_m.items():
        if ".attn." in name and name.endswith(".bias"):
            assert not p.any(), name
        elif ".attn." in name and name.split(".")[-2] in "qkv":
            assert p.abs().max() <= bound and p.abs().max() > 0.8 * bound, name
            assert not torch.equal(p, p_t[name]), name
        else:
            assert torch.equal(p, p_t[name]), name
    # the scale multiplies the embedding's output: a model whose embedding weights and bias are scaled by it
    # computes the same function
    c1 = cfg(lin, seed=0, model__embed_scale=1.0)
    m1 = build_model(c1, make_task(c1, "cpu"))
    with torch.no_grad():
        m1.embed.weight.mul_(4.0)
        m1.embed.bias.mul_(4.0)
    x = make_task(c_m, "cpu").train_batch(3).x
    torch.testing.assert_close(m1(x)[0], m_m(x)[0], rtol=1e-5, atol=1e-6)
