"""Models: the toy attention layer (arXiv 2505.17863 Eq. 2) and the Transformer (Table 1; blog "Sparse attention 6 –
In-context associative recall").

Tasks are faked with SimpleNamespace objects carrying the attributes of the Task protocol (tasks/base.py).
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from sparse_tui.models import build_model
from sparse_tui.models.toy import ToyAttention
from sparse_tui.models.transformer import Transformer
from sparse_tui.presets.schema import RunConfig, TransformerModel
from sparse_tui.tasks.base import Batch

CPU = torch.device("cpu")


def token_task(vocab=7, seq_len=6, out_dim=7):
    return SimpleNamespace(kind="recall", classification=True, seq_len=seq_len, vocab_size=vocab, in_dim=None,
                           out_dim=out_dim, device=CPU)


def vector_task(d=4, seq_len=6, indicator=False):
    return SimpleNamespace(kind="linreg", classification=False, seq_len=seq_len, vocab_size=None,
                           in_dim=d + int(indicator), out_dim=d, device=CPU, w_star=torch.randn(d, d))


def transformer(seq_len, out_dim, vocab_size=None, in_dim=None, generator=None, **model):
    """A Transformer built as ``build_model`` builds it: from its config (``TransformerModel``) and a task's sizes."""
    task = SimpleNamespace(seq_len=seq_len, out_dim=out_dim, vocab_size=vocab_size, in_dim=in_dim)
    return Transformer(TransformerModel(**model), task, generator=generator)


def tiny(input="embedding", pos_enc="learned", mlp=True, layernorm=True, residual=True, causal=True, **kw):
    args = dict(seq_len=6, out_dim=5, input=input, vocab_size=7, in_dim=3, n_layers=2, n_heads=2, d_model=8,
                d_qk=3, mlp=mlp, mlp_factor=2, layernorm=layernorm, residual=residual, pos_enc=pos_enc,
                causal=causal, init_std=0.3)
    args.update(kw)
    return transformer(**args)


def tiny_input(input, n=3, seq_len=6, generator=None):
    if input == "embedding":
        return torch.randint(0, 7, (n, seq_len), generator=generator)
    return torch.randn(n, seq_len, 3, generator=generator)


def stacked_one(model, kernel, x):
    """``model`` trained as every run is (models/stack.py: a stack of one) on ``kernel``: the stack and its output
    on ``x``."""
    from sparse_tui.models.stack import build_stack

    stack = build_stack([model], kernel, classification=False)
    return stack, stack(x.unsqueeze(0))[0]


def n_params(model):
    return sum(p.numel() for p in model.parameters())


COMBOS = list(itertools.product(["sinusoidal", "learned", "none"], ["embedding", "linear"], [False, True],
                                [False, True], [False, True]))
COMBO_IDS = [f"{p}-{i}-mlp{int(m)}-ln{int(ln)}-res{int(r)}" for p, i, m, ln, r in COMBOS]


# ----------------------------------------------------------------------------------------------------------------
# Toy model (Eq. 2)
# ----------------------------------------------------------------------------------------------------------------


def test_toy_zero_init_is_uniform_attention_and_zero_output():
    model = ToyAttention(seq_len=8, in_dim=5, out_dim=4, init="zero")
    x = torch.randn(3, 8, 5)
    y, attn = model(x)
    assert y.shape == (3, 4) and torch.equal(y, torch.zeros(3, 4))
    assert len(attn) == 1 and attn[0].shape == (3, 1, 1, 8)
    assert torch.equal(attn[0], torch.full((3, 1, 1, 8), 1 / 8))


def test_toy_output_equals_hand_computation():
    torch.manual_seed(0)
    model = ToyAttention(seq_len=5, in_dim=4, out_dim=3, init="normal", init_scale=0.7)
    x = torch.randn(6, 5, 4)
    y, attn = model(x)
    a, W = model.a.detach(), model.W.detach()
    alpha = torch.exp(a) / torch.exp(a).sum()
    want = torch.stack([W @ sum(alpha[t] * x[n, t] for t in range(5)) for n in range(6)])
    torch.testing.assert_close(y.detach(), want)
    torch.testing.assert_close(attn[0][2, 0, 0], alpha)


def test_toy_attention_is_an_expanded_view():
    model = ToyAttention(seq_len=5, in_dim=4, out_dim=4, init="normal", init_scale=1.0)
    _, attn = model(torch.randn(10, 5, 4))
    assert attn[0].shape == (10, 1, 1, 5) and attn[0].stride(0) == 0
    assert attn[0].untyped_storage().nbytes() == 5 * attn[0].element_size()  # one row of T floats, not N


def test_toy_shapes_with_indicator_feature_and_gradients():
    task = vector_task(d=4, seq_len=9, indicator=True)
    cfg = RunConfig.model_validate({"task": {"kind": "linreg", "d": 4, "T": 9, "indicator": True},
                                    "model": {"kind": "toy", "init": "normal", "init_scale": 0.5}})
    model = build_model(cfg, task)
    assert isinstance(model, ToyAttention)
    assert model.a.shape == (9,) and model.W.shape == (4, 5)
    y, attn = model(torch.randn(2, 9, 5))
    assert y.shape == (2, 4) and attn[0].shape == (2, 1, 1, 9)
    y.pow(2).sum().backward()
    assert model.a.grad.abs().sum() > 0 and model.W.grad.abs().sum() > 0


def test_toy_zero_init_loss_is_one_half_and_W_moves_first():
    """At a = 0, W = 0 the regression loss is 0.5 ||y*||^2 and only W has a gradient (App. A.3)."""
    d, T = 6, 10
    model = ToyAttention(seq_len=T, in_dim=d, out_dim=d)
    x = torch.randn(64, T, d)
    y_star = x[:, -1] @ torch.randn(d, d).T
    y, _ = model(x)
    loss = 0.5 * ((y - y_star) ** 2).sum(-1).mean()
    loss.backward()
    torch.testing.assert_close(loss, 0.5 * (y_star**2).sum(-1).mean())
    assert model.W.grad.abs().sum() > 0 and torch.equal(model.a.grad, torch.zeros(T))


# ----------------------------------------------------------------------------------------------------------------
# Transformer: shapes, attention rows, masks, exact readout saving, sdpa path
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pos_enc,input,mlp,layernorm,residual", COMBOS, ids=COMBO_IDS)
def test_transformer_shapes_rows_and_paths(pos_enc, input, mlp, layernorm, residual):
    torch.manual_seed(1)
    model = tiny(input, pos_enc, mlp, layernorm, residual)
    x = tiny_input(input)
    out, attn = model(x)
    assert out.shape == (3, 5) and len(attn) == 2
    assert attn[0].shape == (3, 2, 6, 6) and attn[1].shape == (3, 2, 1, 6)  # last layer: readout query only
    for a in attn:
        torch.testing.assert_close(a.sum(-1), torch.ones(a.shape[:-1]))
        assert (a >= 0).all()
    # causal: query i (absolute position) puts exactly zero mass on keys j > i
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    assert torch.equal(attn[0][..., future], torch.zeros_like(attn[0][..., future]))
    assert (attn[0][..., ~future] > 0).all()

    # the full computation (every query in the last layer) gives the same output and the same last row
    model.readout_only = False
    out_full, attn_full = model(x)
    assert attn_full[1].shape == (3, 2, 6, 6)
    torch.testing.assert_close(out, out_full, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(attn[1], attn_full[1][:, :, -1:], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(attn[0], attn_full[0])

    # the training kernels of its stack of one (fused scaled_dot_product_attention, _AttentionCore): same output
    model.readout_only = True
    for kernel in ("sdpa", "core", "auto"):
        torch.testing.assert_close(stacked_one(model, kernel, x)[1], out, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("n_heads,d_qk", [(1, 8), (2, 3)])
def test_training_kernels_give_the_same_gradients(causal, n_heads, d_qk):
    """Every attention kernel (of the stack of one that trains the model) computes the same function: the same loss
    and the same gradient for every parameter as the hand-written probabilities path (float64, so that only the
    order of operations differs)."""
    torch.manual_seed(3)
    model = tiny(causal=causal, n_heads=n_heads, d_qk=d_qk).double()
    assert_kernels_agree(model, tiny_input("embedding", n=4))


def assert_kernels_agree(model, x, kernels=("sdpa", "core")):
    """The loss out.pow(2).sum() and every parameter's gradient: the model's own (explicit) path against each
    kernel of its stack of one (float64)."""
    model.zero_grad()
    ref_loss = model(x)[0].pow(2).sum()
    ref_loss.backward()
    for kernel in kernels:
        stack, out = stacked_one(model, kernel, x)
        loss = out.pow(2).sum()
        loss.backward()
        torch.testing.assert_close(loss, ref_loss, rtol=1e-12, atol=1e-12)
        for n, p in model.named_parameters():
            torch.testing.assert_close(stack.params[n].grad[0], p.grad, rtol=1e-10, atol=1e-12, msg=f"{kernel}: {n}")


def test_attention_core_gradcheck_and_kernel_choice():
    """_AttentionCore's hand-written backward against finite differences (with and without the causal bias), and
    the automatic choice: the core for short sequences (CPU: up to 160 positions; CUDA: up to 65, as far as it was
    measured faster there), scaled_dot_product_attention otherwise."""
    from sparse_tui.models.transformer import CORE_MAX_LEN, CORE_MAX_LEN_CUDA, attention_core, pick_kernel

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 5, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    bias = torch.zeros(5, 5, dtype=torch.float64).masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(),
                                                              float("-inf"))
    assert torch.autograd.gradcheck(lambda a, b, c: attention_core(a, b, c, bias), (q, k, v))
    assert torch.autograd.gradcheck(lambda a, b, c: attention_core(a, b, c, None), (q, k, v))
    y = attention_core(q, k, v, bias)
    assert torch.allclose(y[:, 0], v[:, 0])  # the first query sees only the first key

    stack, _ = stacked_one(tiny(), "auto", tiny_input("embedding"))
    assert stack.kernel == "auto"
    assert pick_kernel(stack.kernel, torch.device("cpu"), 65) == "core"
    assert pick_kernel(stack.kernel, torch.device("cpu"), CORE_MAX_LEN + 1) == "sdpa"
    assert pick_kernel(stack.kernel, torch.device("cuda"), CORE_MAX_LEN_CUDA) == "core"
    assert pick_kernel(stack.kernel, torch.device("cuda"), CORE_MAX_LEN_CUDA + 1) == "sdpa"
    assert pick_kernel("sdpa", torch.device("cpu"), 65) == "sdpa"


@pytest.mark.parametrize("kernel", [None, "sdpa", "core"])
def test_non_causal_attends_everywhere_and_paths_agree(kernel):
    torch.manual_seed(2)
    model = tiny(causal=False)
    x = tiny_input("embedding")
    out, attn = model(x)
    assert (attn[0] > 0).all() and (attn[1] > 0).all()
    if kernel is None:
        model.readout_only = False
        out2, _ = model(x)
    else:
        out2 = stacked_one(model, kernel, x)[1]
    torch.testing.assert_close(out, out2, rtol=1e-5, atol=1e-5)


def test_causal_mask_hides_the_future():
    """Changing the last token leaves every earlier position's first-layer attention row unchanged."""
    torch.manual_seed(3)
    model = tiny(causal=True)
    x = tiny_input("embedding")
    x2 = x.clone()
    x2[:, -1] = (x[:, -1] + 1) % 7
    (_, a), (_, b) = model(x), model(x2)
    torch.testing.assert_close(a[0][:, :, :-1], b[0][:, :, :-1])
    assert not torch.allclose(a[0][:, :, -1], b[0][:, :, -1])


def test_shorter_inputs_than_seq_len():
    model = tiny()
    out, attn = model(tiny_input("embedding", seq_len=4))
    assert out.shape == (3, 5) and attn[0].shape == (3, 2, 4, 4) and attn[1].shape == (3, 2, 1, 4)


def test_sinusoidal_positions_are_vaswani():
    model = tiny(pos_enc="sinusoidal", d_model=6, n_heads=2)
    pe = model.pos
    p, i = 4, 1
    torch.testing.assert_close(pe[p, 2 * i], torch.sin(torch.tensor(p / 10000 ** (2 * i / 6))))
    torch.testing.assert_close(pe[p, 2 * i + 1], torch.cos(torch.tensor(p / 10000 ** (2 * i / 6))))
    assert "pos" not in dict(model.named_parameters())


@pytest.mark.parametrize("pos_enc,input,mlp,layernorm,residual", COMBOS, ids=COMBO_IDS)
def test_gradients_reach_every_parameter(pos_enc, input, mlp, layernorm, residual):
    torch.manual_seed(4)
    model = tiny(input, pos_enc, mlp, layernorm, residual, vocab_size=4)
    x = torch.arange(24).reshape(4, 6) % 4 if input == "embedding" else tiny_input(input, n=4)
    out, _ = model(x)
    F.cross_entropy(out, torch.tensor([0, 1, 2, 3])).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


# ----------------------------------------------------------------------------------------------------------------
# Init, determinism, parameter counts
# ----------------------------------------------------------------------------------------------------------------


def test_init_is_normal_weights_zero_biases():
    torch.manual_seed(5)
    model = tiny(d_model=64, n_heads=4, d_qk=16, init_std=0.05, seq_len=32, vocab_size=50)
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            assert torch.equal(p, torch.zeros_like(p)), name
        elif ".ln" in name or name.startswith("ln_f"):
            assert torch.equal(p, torch.ones_like(p)), name
        else:
            assert abs(p.std().item() - 0.05) < 0.012, name
    assert model.blocks[0].attn.k.bias is None


def test_determinism_with_manual_seed():
    x = tiny_input("embedding", generator=torch.Generator().manual_seed(0))
    torch.manual_seed(7)
    a = tiny()
    torch.manual_seed(7)
    b = tiny()
    torch.manual_seed(8)
    c = tiny()
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p, q), n
    assert torch.equal(a(x)[0], b(x)[0])
    assert not torch.equal(a(x)[0], c(x)[0])


def test_build_model_is_seeded_by_the_run_seed_not_the_global_rng():
    task = token_task()
    cfg = RunConfig.model_validate({"seed": 3, "model": {"kind": "transformer", "d_model": 8}})
    torch.manual_seed(0)
    a = build_model(cfg, task)
    torch.manual_seed(99)
    b = build_model(cfg, task)
    c = build_model(cfg.model_copy(update={"seed": 4}), task)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.embed.weight, c.embed.weight)
    # the init stream is salted: it differs from a plain generator seeded with the run seed (the task's seed)
    plain = torch.randn(7, 8, generator=torch.Generator().manual_seed(3)) * 0.02
    assert not torch.allclose(a.embed.weight, plain)


def test_tiny_param_count_by_hand():
    model = transformer(seq_len=3, out_dim=5, input="embedding", vocab_size=5, n_layers=1, n_heads=2, d_model=4,
                        d_qk=3, mlp=True, mlp_factor=2, layernorm=True, pos_enc="learned")
    attn = (4 * 6 + 6) + 4 * 6 + (16 + 4) + (16 + 4)  # q (bias), k (no bias), v, o
    mlp = (4 * 8 + 8) + (8 * 4 + 4)
    block = attn + mlp + 2 * (2 * 4)  # + ln1, ln2
    total = block + 5 * 4 + 3 * 4 + 2 * 4 + (4 * 5 + 5)  # + embedding, positions, ln_f, unembed
    assert total == 251 and n_params(model) == total


# Hand counts: recall D=256, 4 heads of d_qk 64 (H*d_qk = 256), MLP 4x, LN; per layer
#   attn 65792 + 65536 + 65792 + 65792 = 262912, mlp 262144 + 1024 + 262144 + 256 = 525568, 2 LN 1024
#   -> 789504; x4 + embedding 256*256 + ln_f 512 + unembed 65792 = 3289856.
# linreg d=32 with indicator (in_dim 33), 2 layers, no LN: 2 * (262912 + 525568) + (33*256 + 256) + (256*32 + 32).
# blog: 2 layers, 1 head, D=32, attention only: 2 * (1056 + 1024 + 1056 + 1056) + 64*32 + 65*32 + (32*64 + 64).
REFERENCE_MODELS = {
    "paper-table1-recall": (dict(task={"kind": "recall", "n_tokens": 256, "n_pairs": 32},
                                 model=dict(n_layers=4, n_heads=4, d_model=256, d_qk=64, mlp=True, layernorm=True,
                                            pos_enc="sinusoidal")), token_task(256, 65, 256), 3289856),
    "paper-table1-linreg": (dict(task={"kind": "linreg", "d": 32, "T": 64, "indicator": True},
                                 model=dict(n_layers=2, n_heads=4, d_model=256, d_qk=64, mlp=True, layernorm=False,
                                            pos_enc="sinusoidal")), vector_task(32, 64, indicator=True), 1593888),
    "blog-2layer-attn-only": (dict(task={"kind": "recall", "n_tokens": 64, "n_pairs": 32},
                                   model=dict(n_layers=2, n_heads=1, d_model=32, mlp=False, layernorm=False,
                                              residual=True, pos_enc="learned")), token_task(64, 65, 64), 14624),
}


@pytest.mark.parametrize("name", list(REFERENCE_MODELS), ids=[f"{k}-{v[2]}params" for k, v in REFERENCE_MODELS.items()])
def test_reference_models_are_expressible(name):
    cfg_data, task, want = REFERENCE_MODELS[name]
    cfg_data["model"]["kind"] = "transformer"
    model = build_model(RunConfig.model_validate(cfg_data), task)
    assert n_params(model) == want
    x = torch.randint(0, task.vocab_size, (2, task.seq_len)) if task.vocab_size else torch.randn(2, task.seq_len,
                                                                                                 task.in_dim)
    out, attn = model(x)
    n_layers, n_heads = cfg_data["model"]["n_layers"], cfg_data["model"]["n_heads"]
    assert out.shape == (2, task.out_dim) and len(attn) == n_layers
    assert attn[-1].shape == (2, n_heads, 1, task.seq_len) and attn[0].shape == (2, n_heads, task.seq_len,
                                                                                 task.seq_len)


# ----------------------------------------------------------------------------------------------------------------
# build_model dispatch
# ----------------------------------------------------------------------------------------------------------------


def test_build_model_input_auto_picks_by_task():
    cfg = RunConfig.model_validate({"model": {"kind": "transformer", "d_model": 8}})
    assert isinstance(build_model(cfg, token_task()).embed, torch.nn.Embedding)
    lin_cfg = RunConfig.model_validate({"task": {"kind": "linreg", "d": 4, "T": 6},
                                        "model": {"kind": "transformer", "d_model": 8}})
    model = build_model(lin_cfg, vector_task())
    assert isinstance(model.embed, torch.nn.Linear) and model.embed.in_features == 4
    assert model(torch.randn(2, 6, 4))[0].shape == (2, 4)


def test_build_model_rejects_ode_and_mismatched_inputs():
    ode = RunConfig.model_validate({"task": {"kind": "linreg"}, "model": {"kind": "ode"}})
    with pytest.raises(ValueError, match="integrated"):
        build_model(ode, vector_task())
    # presets refuse a mismatched input (a usage error); build_model still guards configs built in code
    with pytest.raises(ValueError, match="model.input: 'embedding' needs a token task"):
        RunConfig.model_validate({"task": {"kind": "linreg", "d": 4, "T": 6},
                                  "model": {"kind": "transformer", "input": "embedding"}})
    emb = RunConfig.model_validate({"task": {"kind": "linreg", "d": 4, "T": 6}, "model": {"kind": "transformer"}})
    emb.model.input = "embedding"
    with pytest.raises(ValueError, match="vocab_size"):
        build_model(emb, vector_task())
    lin = RunConfig.model_validate({"model": {"kind": "transformer"}})
    lin.model.input = "linear"
    with pytest.raises(ValueError, match="in_dim"):
        build_model(lin, token_task())


# ----------------------------------------------------------------------------------------------------------------
# Training behaviour and functional use
# ----------------------------------------------------------------------------------------------------------------


def _fit(model, x, loss_fn, steps=60, lr=1e-2):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = loss_fn(model(x)[0])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_tiny_transformer_overfits_a_token_batch():
    torch.manual_seed(10)
    model = transformer(seq_len=6, out_dim=7, input="embedding", vocab_size=7, n_layers=2, n_heads=2, d_model=16,
                        mlp=True, layernorm=True, init_std=0.1)
    x = torch.randint(0, 7, (16, 6))
    y = torch.randint(0, 7, (16,))
    losses = _fit(model, x, lambda out: F.cross_entropy(out, y))
    assert losses[-1] < losses[0] / 20, losses[::10]


def test_tiny_transformer_overfits_a_vector_batch():
    torch.manual_seed(11)
    model = transformer(seq_len=6, out_dim=4, input="linear", in_dim=4, n_layers=2, n_heads=2, d_model=16,
                        mlp=True, layernorm=False, pos_enc="sinusoidal", init_std=0.1)
    x = torch.randn(16, 6, 4) / 2
    y = x[:, 2] @ torch.randn(4, 4).T  # single-location regression, relevant token at position 2
    losses = _fit(model, x, lambda out: 0.5 * ((out - y) ** 2).sum(-1).mean(), steps=80)
    assert losses[-1] < losses[0] / 20, losses[::10]


def test_stacked_models_under_vmap_match_each_model():
    """The forward is a function of (params, x): several models of a sweep can be stacked and vmapped."""
    models = []
    for seed in range(3):
        torch.manual_seed(seed)
        models.append(tiny(pos_enc="learned"))
    params, buffers = torch.func.stack_module_state(models)
    base = models[0]
    x = tiny_input("embedding")

    def run(p, b):
        return torch.func.functional_call(base, (p, b), (x,))

    outs, attns = torch.func.vmap(run)(params, buffers)
    assert outs.shape == (3, 3, 5) and attns[0].shape == (3, 3, 2, 6, 6) and attns[1].shape == (3, 3, 2, 1, 6)
    for i, m in enumerate(models):
        out, attn = m(x)
        torch.testing.assert_close(outs[i], out)
        torch.testing.assert_close(attns[1][i], attn[1])

    # per-model gradients work under vmap too
    grads = torch.func.vmap(torch.func.grad(lambda p, b: run(p, b)[0].pow(2).sum()))(params, buffers)
    models[2].zero_grad()
    models[2](x)[0].pow(2).sum().backward()
    torch.testing.assert_close(grads["blocks.0.attn.q.weight"][2], models[2].blocks[0].attn.q.weight.grad)

    toys = [ToyAttention(5, 3, 2, init="normal", init_scale=1.0) for _ in range(2)]
    tp, tb = torch.func.stack_module_state(toys)
    xt = torch.randn(4, 5, 3)
    ys, _ = torch.func.vmap(lambda p, b: torch.func.functional_call(toys[0], (p, b), (xt,)))(tp, tb)
    torch.testing.assert_close(ys[1], toys[1](xt)[0])


def test_tied_embeddings_read_out_with_the_embedding_table():
    """tie_embeddings: logits are the last hidden state dotted with every token embedding (nanoGPT-style)."""
    torch.manual_seed(0)
    m = transformer(seq_len=5, out_dim=11, input="embedding", vocab_size=11, d_model=8, tie_embeddings=True)
    assert m.unembed is None
    x = torch.randint(0, 11, (3, 5))
    out, _ = m(x)
    m.readout_only = False
    h = m.embed(x) + m.pos
    for block in m.blocks:
        h, _ = block(h, 5, m.mask)
    torch.testing.assert_close(out, h[:, -1] @ m.embed.weight.T)
    out.sum().backward()
    assert m.embed.weight.grad is not None
    with pytest.raises(ValueError):
        transformer(seq_len=5, out_dim=3, input="embedding", vocab_size=11, d_model=8, tie_embeddings=True)


def test_torch_default_init_scales():
    """init='torch': Linear U(+-1/sqrt(fan_in)) (std 1/sqrt(3 fan_in)), embeddings and learned positions N(0, 1)."""
    g = torch.Generator().manual_seed(0)
    m = transformer(seq_len=33, out_dim=64, input="embedding", vocab_size=64, d_model=96, init="torch", generator=g)
    assert m.embed.weight.std().item() == pytest.approx(1.0, rel=0.05)
    assert m.pos.std().item() == pytest.approx(1.0, rel=0.05)
    w = m.blocks[0].attn.q.weight
    assert w.abs().max().item() <= 1 / 96**0.5 and w.std().item() == pytest.approx((3 * 96) ** -0.5, rel=0.05)
    g2 = torch.Generator().manual_seed(0)
    m2 = transformer(seq_len=33, out_dim=64, input="embedding", vocab_size=64, d_model=96, init="torch", generator=g2)
    torch.testing.assert_close(m.embed.weight, m2.embed.weight)  # seeded by the generator, not the global RNG


# ----------------------------------------------------------------------------------------------------------------
# model.bias and model.pos_init_std (the open choices of the blog "Sparse attention 6 – In-context associative
# recall", docs/REPRODUCTION.md)
# ----------------------------------------------------------------------------------------------------------------


def test_bias_free_param_count_by_hand():
    """bias=False removes the q, v, o, MLP and readout biases (k never has one); LayerNorm keeps its bias."""
    model = transformer(seq_len=3, out_dim=5, input="embedding", vocab_size=5, n_layers=1, n_heads=2, d_model=4,
                        d_qk=3, mlp=True, mlp_factor=2, layernorm=True, pos_enc="learned", bias=False)
    attn = 4 * 6 + 4 * 6 + 16 + 16  # q, k, v, o weights only
    mlp = 4 * 8 + 8 * 4
    block = attn + mlp + 2 * (2 * 4)  # + ln1, ln2 (gain and bias)
    total = block + 5 * 4 + 3 * 4 + 2 * 4 + 4 * 5  # + embedding, positions, ln_f, unembed weight
    assert total == 220 and n_params(model) == total
    linear_biases = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and m.bias is not None]
    assert linear_biases == []
    # the blog's 2-layer attention-only model at N = 32: 14624 with biases (REFERENCE_MODELS) less 2 x (q, v, o) x 32
    # and the readout's 64
    cfg = RunConfig.model_validate({"task": {"kind": "recall", "n_tokens": 64, "n_pairs": 32},
                                    "model": {"kind": "transformer", "n_layers": 2, "d_model": 32, "bias": False}})
    assert n_params(build_model(cfg, token_task(64, 65, 64))) == 14624 - 2 * 3 * 32 - 64 == 14368
    # a linear input map loses its bias too
    lin = transformer(seq_len=6, out_dim=4, input="linear", in_dim=3, n_layers=1, d_model=8, bias=False)
    assert lin.embed.bias is None and lin.unembed.bias is None


@pytest.mark.parametrize("n_heads,d_qk", [(1, 8), (2, 3)])
def test_bias_free_model_kernels_agree(n_heads, d_qk):
    """Without biases every attention kernel still computes the same function (the core kernel folds 1/sqrt(d_qk)
    into the query projection, which has no bias to scale)."""
    torch.manual_seed(4)
    model = tiny(n_heads=n_heads, d_qk=d_qk, bias=False).double()
    x = tiny_input("embedding", n=4)
    ref = model(x)[0]
    for kernel in ("sdpa", "core"):
        torch.testing.assert_close(stacked_one(model, kernel, x)[1], ref, rtol=1e-12, atol=1e-12)


def test_pos_init_std_sets_the_learned_positions_only():
    from sparse_tui.models.transformer import sinusoidal_positions

    kw = dict(seq_len=65, out_dim=64, input="embedding", vocab_size=64, d_model=80, init="torch")
    base = transformer(**kw, generator=torch.Generator().manual_seed(1))
    small = transformer(**kw, pos_init_std=0.1, generator=torch.Generator().manual_seed(1))
    # 65 x 80 = 5200 draws: the sample std is within ~1% of the true one
    assert base.pos.std().item() == pytest.approx(1.0, rel=0.04)  # default: as the init gives (torch: N(0, 1))
    assert small.pos.std().item() == pytest.approx(0.1, rel=0.04)
    assert abs(small.pos.mean().item()) < 0.01
    for (n, p), q in zip(base.named_parameters(), small.parameters()):
        if n != "pos":
            assert torch.equal(p, q), n  # every other parameter is the same as without the override
    normal = transformer(**{**kw, "init": "normal"}, init_std=0.02, generator=torch.Generator().manual_seed(1))
    assert normal.pos.std().item() == pytest.approx(0.02, rel=0.04)  # default with init='normal': init_std
    # positions that are not learned ignore it
    sin = transformer(**{**kw, "pos_enc": "sinusoidal"}, pos_init_std=0.1)
    torch.testing.assert_close(sin.pos, sinusoidal_positions(65, 80))


def test_build_model_passes_bias_and_pos_init_std():
    cfg = RunConfig.model_validate({"task": {"kind": "recall", "n_tokens": 64, "n_pairs": 32},
                                    "model": {"kind": "transformer", "d_model": 48, "init": "torch",
                                              "pos_init_std": 0.1, "bias": False}})
    model = build_model(cfg, token_task(64, 65, 64))
    assert model.blocks[0].attn.q.bias is None and model.unembed.bias is None
    assert model.pos.std().item() == pytest.approx(0.1, rel=0.05)
    default = build_model(RunConfig.model_validate({"model": {"kind": "transformer", "d_model": 48}}),
                          token_task(64, 65, 64))
    assert default.blocks[0].attn.q.bias is not None and default.unembed.bias is not None


def test_euclidean_attention_scores_are_minus_squared_distances_on_every_kernel():
    """model.attention = "euclidean" (blog "Sparse attention 3"): the attention probabilities are
    softmax(-||q - k||^2 / sqrt(d_qk)) over the allowed keys, and the core, SDPA and the explicit path agree."""
    from sparse_tui.models import build_model
    from sparse_tui.tasks import make_task

    cfg = RunConfig.model_validate({"task": {"kind": "recall", "n_tokens": 10, "n_pairs": 3},
                                    "model": {"kind": "transformer", "n_layers": 2, "n_heads": 2, "d_model": 8,
                                              "attention": "euclidean", "init": "torch"}})
    task = make_task(cfg, "cpu")
    model = build_model(cfg, task).double()
    x = task.test_batch(6).x
    out, attn = model(x)  # the explicit path (need_attn): probabilities for every layer
    a = model.blocks[0].attn
    h = model.embed(x) + model.pos
    q = a.q(h).unflatten(-1, (2, 4)).transpose(1, 2)
    k = a.k(h).unflatten(-1, (2, 4)).transpose(1, 2)
    d2 = ((q.unsqueeze(-2) - k.unsqueeze(-3)) ** 2).sum(-1)  # [N, H, L, L]
    want = (-d2 / 2.0).masked_fill(~model.mask, float("-inf")).softmax(-1)
    torch.testing.assert_close(attn[0], want, rtol=1e-10, atol=1e-12)
    for kernel in ("core", "sdpa"):
        torch.testing.assert_close(stacked_one(model, kernel, x)[1], out, rtol=1e-9, atol=1e-10)
    dot = build_model(cfg.model_copy(update={"model": cfg.model.model_copy(update={"attention": "dot"})}), task)
    assert not dot.blocks[0].attn.euclidean and not torch.allclose(dot.double()(x)[0], out)


def test_evaluation_chunks_count_every_layer_and_head_of_the_attention_maps(monkeypatch):
    """The evaluation's attention maps of all layers and heads fit its memory budget (the Transformer's sizes come
    from its config), and a chunked evaluation gives the metrics of an unchunked one."""
    from sparse_tui.training import metrics

    model = tiny().double()  # 2 layers of 2 heads
    toy = ToyAttention(6, 4, 4, "normal", 0.1)
    assert metrics.eval_chunk_size(model, 10**6, 64) == metrics._ATTN_BUDGET // (2 * 2 * 64 * 64)
    assert metrics.eval_chunk_size(toy, 10**6, 64) == metrics._ATTN_BUDGET // (64 * 64)
    task = token_task(vocab=7, seq_len=6, out_dim=5)
    batch = Batch(tiny_input("embedding", n=10), torch.randint(0, 5, (10,)), torch.rand(10, 6) < 0.3)
    whole = metrics.evaluate(model, batch, task.kind, True)
    monkeypatch.setattr(metrics, "_ATTN_BUDGET", 3 * 2 * 2 * 6 * 6)  # 3 sequences per chunk
    assert metrics.eval_chunk_size(model, 10, 6) == 3
    chunked = metrics.evaluate(model, batch, task.kind, True)  # probes are summed in float32
    assert chunked.keys() == whole.keys()
    assert all(chunked[k] == pytest.approx(whole[k], rel=1e-6, abs=1e-9) for k in whole)
