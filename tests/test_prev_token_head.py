"""``model.prev_token_head = "frozen"`` (models/transformer.py): the first layer is a hand-built previous-token head
that never learns (arXiv 2505.17863 §3.2's second hypothesis, docs/REPRODUCTION.md). Its attention is exactly the
previous position, its parameters stay as built through real training steps while the rest learns, and a stack
computes exactly what each model computes alone."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError
from test_stack import F64, cfg, check_model_equivalence

from sparse_tui.models import build_model
from sparse_tui.models.stack import build_stack
from sparse_tui.presets.schema import RunConfig
from sparse_tui.tasks import make_task
from sparse_tui.training.grouping import group_key
from sparse_tui.training.loop import Prepared

BASE = {"task": {"kind": "recall", "n_tokens": 10, "n_pairs": 3},
        "model": {"kind": "transformer", "n_layers": 2, "n_heads": 1, "d_model": 8, "pos_enc": "sinusoidal",
                  "init": "torch", "prev_token_head": "frozen"},
        "train": {"device": "cpu", "lr": 1e-2, "batch_size": 8, "steps": 5}, "eval": {"every": 5, "test_size": 8}}


def shift(L: int) -> torch.Tensor:
    """The previous-token pattern: row t is one-hot on t - 1, row 0 on 0."""
    want = torch.zeros(L, L)
    want[0, 0] = 1.0
    want[torch.arange(1, L), torch.arange(L - 1)] = 1.0
    return want


def test_the_frozen_head_attends_exactly_to_the_previous_position():
    c = cfg(BASE, seed=0)
    task = make_task(c, "cpu")
    m = build_model(c, task)
    x = task.train_batch(4).x
    out, attn = m(x)
    L = x.shape[1]
    assert L == 7
    assert torch.equal(attn[0], shift(L).expand(4, 1, L, L))  # exactly one-hot, in every sequence
    # the second (selection) layer is a learned one: its readout row is spread, not a fixed pattern
    assert attn[1].shape == (4, 1, 1, L) and attn[1].max() < 1.0
    # the copy it writes: J h(t - 1), J the 90-degree turn of each pair of dimensions (skew: x . J x = 0)
    a = m.blocks[0].attn
    J = a.o.weight
    assert torch.equal(a.v.weight, torch.eye(8)) and torch.equal(J, -J.T) and torch.equal(J @ J, -torch.eye(8))
    assert not a.q.weight.any() and not a.k.weight.any() and not a.q.bias.any()
    h0 = m.embed(x) + m.pos[:L]
    h1, _ = m.blocks[0](h0, L, m.prev_mask[:L, :L])
    torch.testing.assert_close(h1[:, 1:] - h0[:, 1:], h0[:, :-1] @ J.T)
    # the learned model of the same seed: every parameter outside the head drawn the same
    learned = build_model(cfg(BASE, seed=0, model__prev_token_head="learned"), task)
    lp = dict(learned.named_parameters())
    for name, p in m.named_parameters():
        assert p.requires_grad == (name not in m.fixed)
        if name not in m.fixed:
            assert torch.equal(p, lp[name]), name
    assert m.fixed == {f"blocks.0.attn.{n}" for n in ("q.weight", "q.bias", "k.weight", "v.weight", "v.bias",
                                                       "o.weight", "o.bias")}
    assert not learned.fixed


@pytest.mark.parametrize("optimizer,wd", [("adam", 0.0), ("adamw", 0.1), ("sgd", 0.1)])
def test_training_steps_leave_the_head_as_built_and_train_the_rest(optimizer, wd):
    """Real training steps (the loop's ``Prepared.step_fn``: batch, forward, backward, clipping, optimiser), weight
    decay included: the head's parameters are not the optimiser's, so they stay bit for bit; every other changes."""
    cfgs = [cfg(BASE, seed=s, train__optimizer=optimizer, train__weight_decay=wd, train__grad_clip=1.0,
                task__n_pairs=n) for s, n in ((0, 3), (1, 5))]
    prep = Prepared(cfgs, torch.device("cpu"), dtype=F64)
    before = [{n: p.detach().clone() for n, p in mb.module.named_parameters()} for mb in prep.members]
    opt_params = {id(p) for p in prep.opt.params}
    assert all(id(prep.stack.params[n]) not in opt_params for n in prep.stack.fixed)
    assert len(prep.opt.params) == len(prep.stack.names) - 7
    for _ in range(5):
        prep.step_fn()
    for i, mb in enumerate(prep.members):
        prep.stack.load_into(mb.slot, mb.module)
        for name, p in mb.module.named_parameters():
            if name in mb.module.fixed:
                assert torch.equal(p, before[i][name]), name
            else:
                assert not torch.equal(p, before[i][name]), name
        _, attn = mb.module(mb.task.train_batch(2).x)
        assert torch.equal(attn[0], shift(attn[0].shape[-1]).expand_as(attn[0]))


@pytest.mark.parametrize("kernel", ["core", "sdpa", "math"])
def test_a_stack_of_frozen_heads_equals_each_model_alone(kernel):
    """Mixed lengths (left padding: a model's first real position keeps its own key), widths and LayerNorm / MLP:
    outputs and gradients of each model alone, the head's parameters outside the gradient; the stack's
    probabilities of layer 1 are each model's fixed pattern."""
    big = {**BASE, "model": {**BASE["model"], "mlp": True, "layernorm": True}}
    for base in (BASE, big):
        stack = check_model_equivalence([cfg(base, seed=0), cfg(base, seed=1, task__n_pairs=5, model__d_model=12),
                                         cfg(base, seed=2, task__n_tokens=14)], kernel)
        assert stack.mixed_len and stack.mixed_width and sorted(stack.fixed) == stack.fixed
        assert not set(stack.fixed) & {n for n, _ in stack.named_parameters()}
        stack = check_model_equivalence([cfg(base, seed=s) for s in (0, 1)], kernel)
        assert not stack.mixed_len
    mods = [build_model(c, make_task(c, "cpu")) for c in (cfg(BASE, seed=0), cfg(BASE, seed=1, task__n_pairs=5))]
    stack = build_stack(mods)
    x = torch.zeros(2, 3, stack.L, dtype=torch.long)
    _, probs = stack(x, need_attn=True)
    assert torch.equal(probs[0][1, :, 0], shift(11).expand(3, 11, 11))
    assert torch.equal(probs[0][0, :, 0, 4:, 4:], shift(7).expand(3, 7, 7))  # model 0: 4 padding positions


def test_learned_and_frozen_never_share_a_stack():
    learned = cfg(BASE, seed=0, model__prev_token_head="learned")
    assert group_key(learned) != group_key(cfg(BASE, seed=0))
    mods = [build_model(c, make_task(c, "cpu")) for c in (learned, cfg(BASE, seed=0))]
    with pytest.raises(ValueError, match="one structure .*previous-token head"):
        build_stack(mods)


@pytest.mark.parametrize("field,value", [("n_heads", 2), ("n_layers", 1), ("residual", False), ("d_model", 9)])
def test_the_frozen_head_needs_the_structure_it_is_built_for(field, value):
    raw = {**BASE, "model": {**BASE["model"], field: value}}
    if field == "d_model":
        raw["model"]["n_heads"] = 1
    with pytest.raises(ValidationError, match=f"{field}: prev_token_head = 'frozen' needs"):
        RunConfig.model_validate(raw)
    RunConfig.model_validate({**raw, "model": {**raw["model"], "prev_token_head": "learned"}})


def test_a_preset_asking_the_head_of_a_structure_it_does_not_fit_is_one_line_per_point_exit_2(tmp_path):
    from pathlib import Path

    from typer.testing import CliRunner

    from sparse_tui.cli import app

    preset = Path(__file__).resolve().parent.parent / "presets" / "hyp_prevtoken_cpu.toml"
    runs = tmp_path / "runs"
    r = CliRunner().invoke(app, ["run", str(preset), "--dry-run", "--runs-dir", str(runs), "--set", "model.n_heads=2"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    lines = r.output.strip().splitlines()
    want = ("hyp_prevtoken_cpu.toml: model.n_heads: prev_token_head = 'frozen' needs n_heads 1, n_layers 2 or more, "
            "residual true and an even d_model (sweep point task.n_tokens=")
    assert len(lines) == 9 and all(ln.startswith(want) and ln.endswith("model.prev_token_head=frozen)") for ln in lines)
    assert not runs.exists()  # the learned points are valid, but nothing is written
