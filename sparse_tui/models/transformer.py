"""A small decoder-style Transformer read out at the last position.

It covers the Transformers of the paper (arXiv 2505.17863 §2.4, §3, App. D.3 Table 1: 2 or 4 layers, 4 heads,
d_model 256, d_qk 64, MLP factor 4, sinusoidal positions, skip connections; LayerNorm on for recall, §3.2) and the
2-layer attention-only model of the blog "Sparse attention 6 – In-context associative recall" (mlp off, layernorm
off, residual on, one head, learned positions).

    h_0 = embed(x) + pos                       embedding table (token ids) or linear map (vectors)
    h_l = h_{l-1} + Attn(LN(h_{l-1}))          LN optional (pre-LN), skip optional
    h_l = h_l + MLP(LN(h_l))                   optional, GELU, hidden mlp_factor * d_model
    out = unembed(LN(h_L[:, -1]))              only the last position is read out

Attention is written out by hand (q k^T / sqrt(d_qk), mask, softmax, @ v) so that every layer's probabilities come
out of the forward pass itself. Training goes through the native stack (models/stack.py, a single run as a stack
of one), which computes the same attention with faster kernels (``pick_kernel``): ``F.scaled_dot_product_attention``
(fused kernels: CUDA, and long sequences on CPUs) or ``_AttentionCore`` (short sequences: one batched matmul with an
additive mask, a softmax, a hand-written backward). Both are exact: the same function, different rounding.

Exact saving (``readout_only = True``, the default): only the last position is read out, so the last layer
computes only that query (and its MLP / LayerNorm on that position); keys and values still cover every position.
Its attention tensor is then ``[N, H, 1, L]`` (docs/ARCHITECTURE.md allows Lq = 1 in the last layer). The output
is the same as the full computation.

Strictly causal readout (``readout_self_key = False``; default True): in the last layer the read-out query (the last
position) does not attend to its own position, only to the earlier ones (to every other one if not causal); every
other query row keeps its mask. The blog "Sparse attention 3 – inefficiency of extracting similar content" asks for
the context token closest to the current one, which a 1-D distance kernel cannot single out while the current token
is one of its own keys (it is always the closest); docs/REPRODUCTION.md, "Blog 3's proposal".

Initialisation: every Linear / Embedding weight and the learned positions ~ N(0, init_std^2), every bias 0,
LayerNorm gain 1 and bias 0 (``init='normal'``); or PyTorch's module defaults (``'torch'``), optionally with the
attention as ``nn.MultiheadAttention`` initialises it (``'torch_mha'``). ``embed_scale`` multiplies the input
embedding before the positions are added. ``pos_init_std`` overrides the learned positions' standard deviation (the
blog "Sparse
attention 6 – In-context associative recall" needs 0.1 where ``init='torch'`` gives 1). With ``bias = True`` every
Linear layer carries a bias except the key projection: a key bias adds the same q.b_k to every score of a query's
row, which the softmax ignores, so it would never receive a gradient. ``bias = False`` removes them all (q, v, o,
the MLP, a linear input map and the readout); LayerNorm keeps its own.

Frozen previous-token head (``prev_token_head = "frozen"``, one head, two layers or more, skip connections): the
first layer's attention is hand-built (``Transformer._freeze_prev_token_head``): a fixed pattern, each position on
the one before it, and a fixed value/output map, so that of the induction head's two sparse patterns (arXiv
2505.17863 §3.1) only the selection is left to learn (§3.2's second hypothesis; docs/REPRODUCTION.md).

The forward pass is a plain function of the parameters and the input: no state, no in-place updates, and control
flow only on the static configuration, so it works under ``torch.func.functional_call`` and ``torch.func.vmap``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

if TYPE_CHECKING:
    from sparse_tui.presets.schema import TransformerModel


def sinusoidal_positions(length: int, d_model: int) -> Tensor:
    """Fixed positional encoding of Vaswani et al. (2017): PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)[:, : d_model // 2]
    return pe


def prev_token_mask(length: int) -> Tensor:
    """bool [length, length]: query t may attend to key t - 1 only, query 0 to itself (the frozen previous-token
    head's pattern, ``model.prev_token_head = "frozen"``)."""
    q = torch.arange(length)[:, None]
    k = torch.arange(length)[None, :]
    return (k == q - 1) | ((q == 0) & (k == 0))


# Longest sequence for which the CPU training forward uses ``_AttentionCore`` rather than
# ``scaled_dot_product_attention``. Measured on a 2-core Xeon, one thread, forward + backward, causal
# (docs/PERFORMANCE.md):
# at L = 65 the core takes 0.73x (d = 16) / 0.76x (d = 64) of SDPA's time, at L = 129 about the same or 0.7x, at
# L = 257 and beyond the fused kernel wins (it never materialises the L x L scores).
CORE_MAX_LEN = 160
# On CUDA the core also beats SDPA's kernels (float32: the memory-efficient one; flash needs 16-bit inputs) up to the
# longest sequence measured there: 65 positions. H100, torch 2.11, whole graphed training steps (2026-11-26): the
# 24-run blog stack 6.07 ms with the core against 8.21 ms with SDPA (tf32: 3.88 against 6.22), the Fig. 4 stacks
# 13.02 against 13.42 ms. Longer sequences keep SDPA on CUDA (not measured).
CORE_MAX_LEN_CUDA = 65


def pick_kernel(kernel: str, device: torch.device, L: int) -> str:
    """The attention kernel of a training forward: ``kernel``, or for ``"auto"`` the one picked for ``L`` positions
    on ``device``: ``"core"`` up to ``CORE_MAX_LEN`` (CPU) / ``CORE_MAX_LEN_CUDA`` (CUDA), else ``"sdpa"``."""
    if kernel != "auto":
        return kernel
    return "core" if L <= (CORE_MAX_LEN if device.type == "cpu" else CORE_MAX_LEN_CUDA) else "sdpa"


class _AttentionCore(torch.autograd.Function):
    """softmax(q k^T + bias) v for [B, Lq, d] inputs (q already scaled by 1/sqrt(d_qk)), with a hand-written backward.

    Exactly the attention of the hand-written path (§2.4), computed with the fewest passes over memory that plain
    torch ops allow on a CPU: one ``baddbmm`` (the mask is an additive 0 / -inf bias), a softmax, one
    ``bmm``; the backward is four ``bmm`` and one softmax backward, with no copies or scalings of the L x L tensors.
    For short sequences it beats the CPU flash kernel, which works in blocks meant for long ones. ``forward`` also
    returns the probabilities (not differentiable) so that ``setup_context`` can keep them for the backward.
    """

    # the module also works under torch.func.vmap (the native stack, models/stack.py, needs no vmap)
    generate_vmap_rule = True

    @staticmethod
    def forward(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None) -> tuple[Tensor, Tensor]:
        s = torch.baddbmm(bias, q, k.transpose(1, 2)) if bias is not None else torch.bmm(q, k.transpose(1, 2))
        p = s.softmax(dim=-1)
        return torch.bmm(p, v), p

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        q, k, v, _ = inputs
        p = output[1]
        ctx.mark_non_differentiable(p)
        ctx.save_for_backward(q, k, v, p)

    @staticmethod
    def backward(ctx, dy: Tensor, _dp: Tensor):
        q, k, v, p = ctx.saved_tensors
        dy = dy.contiguous()
        # Under CUDA's bf16 autocast the softmax ran in float32 (autocast's float32 list) and the matmuls in
        # bfloat16: p is float32 while dy, q, k, v are bfloat16. Each product then runs in the matmuls' type and
        # the softmax backward in p's, every gradient in its input's type; in one type (fp32, tf32, the CPU's
        # bf16 autocast) every ``.to`` below is a no-op.
        pm = p.to(dy.dtype)
        dv = torch.bmm(pm.transpose(1, 2), dy)
        dp = torch.bmm(dy, v.to(dy.dtype).transpose(1, 2))
        ds = torch.ops.aten._softmax_backward_data(dp.to(p.dtype), p, -1, p.dtype).to(dy.dtype)
        dq = torch.bmm(ds, k.to(dy.dtype))
        dk = torch.bmm(ds.transpose(1, 2), q.to(dy.dtype))
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None


def attention_core(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None) -> Tensor:
    """``_AttentionCore``: softmax(q k^T + bias) v for [B, Lq, d] inputs, q pre-scaled."""
    return _AttentionCore.apply(q, k, v, bias)[0]


def euclidean_qk(q: Tensor, k: Tensor, q_scale: float | Tensor = 1.0) -> tuple[Tensor, Tensor]:
    """Queries and keys with one more dimension, such that ``q' . k' = 2 q . k - q_scale ||k||^2``: with ``q``
    already multiplied by ``q_scale`` (1/sqrt(d_qk)), every attention kernel then computes the scores
    ``-q_scale ||q/q_scale - k||^2`` up to ``q_scale ||q/q_scale||^2``, the same for every key of a query row, which
    the softmax ignores. ``model.attention = "euclidean"``: the distance attention proposed in the blog "Sparse
    attention 3 - inefficiency of extracting similar content" (a token finds its nearest neighbour by distance,
    where a dot product favours long keys). ``q_scale``: a float, or a tensor broadcasting over q's leading
    dimensions (per-model scales in a stack). Zero-padded dimensions change neither term."""
    col = torch.ones_like(q[..., :1]) * (-q_scale)
    return torch.cat([2 * q, col], -1), torch.cat([k, (k * k).sum(-1, keepdim=True)], -1)


class Attention(nn.Module):
    """Multi-head attention. Queries and keys have d_qk dimensions per head, values d_model / n_heads. Scores are
    q.k / sqrt(d_qk) (``euclidean=False``) or -||q - k||^2 / sqrt(d_qk) (``euclidean_qk``)."""

    def __init__(self, d_model: int, n_heads: int, d_qk: int, bias: bool = True, euclidean: bool = False):
        super().__init__()
        self.euclidean = euclidean
        self.n_heads, self.d_qk, self.d_v = n_heads, d_qk, d_model // n_heads
        self.q = nn.Linear(d_model, n_heads * d_qk, bias=bias)
        self.k = nn.Linear(d_model, n_heads * d_qk, bias=False)  # a key bias only shifts each score row: no effect
        self.v = nn.Linear(d_model, d_model, bias=bias)
        self.o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, xq: Tensor, xkv: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
        """xq [N, Lq, D] (the inputs at the last Lq positions), xkv [N, L, D], mask bool [Lq, L] (True = may attend;
        None = attend everywhere). Returns the output [N, Lq, D] and the probabilities [N, H, Lq, L]."""
        H = self.n_heads
        q = self.q(xq).unflatten(-1, (H, self.d_qk)).transpose(-3, -2)  # [N, H, Lq, d_qk]
        k = self.k(xkv).unflatten(-1, (H, self.d_qk)).transpose(-3, -2)  # [N, H, L, d_qk]
        v = self.v(xkv).unflatten(-1, (H, self.d_v)).transpose(-3, -2)  # [N, H, L, d_v]
        if self.euclidean:  # unscaled queries here: the scale multiplies the whole score below
            q, k = euclidean_qk(q, k)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.d_qk))  # [N, H, Lq, L]
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        attn = scores.softmax(dim=-1)
        y = (attn @ v).transpose(-3, -2).flatten(-2)  # [N, Lq, D]
        return self.o(y), attn


class MLP(nn.Module):
    def __init__(self, d_model: int, hidden: int, bias: bool = True):
        super().__init__()
        self.fc = nn.Linear(d_model, hidden, bias=bias)
        self.proj = nn.Linear(hidden, d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    """Pre-LN block: attention then (optionally) an MLP, each with an optional skip connection (``cfg``: the
    Transformer's config, ``d_qk`` its query/key width per head)."""

    def __init__(self, cfg: TransformerModel, d_qk: int):
        super().__init__()
        self.residual, D = cfg.residual, cfg.d_model
        self.ln1 = nn.LayerNorm(D) if cfg.layernorm else nn.Identity()
        self.attn = Attention(D, cfg.n_heads, d_qk, cfg.bias, cfg.attention == "euclidean")
        self.ln2 = nn.LayerNorm(D) if (cfg.layernorm and cfg.mlp) else nn.Identity()
        self.mlp = MLP(D, cfg.mlp_factor * D, cfg.bias) if cfg.mlp else None

    def forward(self, h: Tensor, n_q: int, mask: Tensor | None) -> tuple[Tensor, Tensor]:
        """h [N, L, D] -> the new stream at the last n_q positions [N, n_q, D], and the attention."""
        x = self.ln1(h)
        if n_q == h.shape[1]:
            hq, xq = h, x
        else:
            # One slice of the stream feeds both the queries and the skip connection (LayerNorm acts per position,
            # so ln1(h[:, -n_q:]) = ln1(h)[:, -n_q:]): autograd then scatters one gradient back, not two.
            hq = h[:, -n_q:]
            xq = self.ln1(hq)
        a, attn = self.attn(xq, x, mask)
        h = hq + a if self.residual else a
        if self.mlp is not None:
            m = self.mlp(self.ln2(h))
            h = h + m if self.residual else m
        return h, attn


class Transformer(nn.Module):
    """``forward(x) -> (out [N, out_dim], attn: list of [N, H, Lq, L], one per layer)``.

    Built from its config, as nanoGPT's ``GPT(config)``: ``cfg`` is a ``presets.TransformerModel`` (its fields are
    the options described above), ``task`` anything with the sizes of the Task protocol (tasks/base.py):
    ``seq_len``, ``out_dim``, and ``vocab_size`` or ``in_dim``. x is long [N, L] token ids (``input='embedding'``,
    needs vocab_size) or float [N, L, in_dim] vectors (``input='linear'``, needs in_dim), with L <= seq_len;
    ``input='auto'`` picks an embedding when the task has a vocabulary, else a linear map. ``readout_only`` (True)
    may be changed after construction.
    """

    def __init__(self, cfg: TransformerModel, task, generator: torch.Generator | None = None):
        """The values of ``cfg``'s fields are the schema's to check (presets/schema.py); only how they fit
        ``task`` is checked here (a config built in code may skip the preset's own checks)."""
        super().__init__()
        d_model, n_heads = cfg.d_model, cfg.n_heads
        seq_len, out_dim = task.seq_len, task.out_dim
        vocab_size, in_dim = getattr(task, "vocab_size", None), getattr(task, "in_dim", None)
        input = cfg.input if cfg.input != "auto" else ("embedding" if vocab_size else "linear")
        self.readout_only = True
        self.cfg = cfg

        if input == "embedding":
            if not vocab_size:
                raise ValueError("input='embedding' needs a token task (task.vocab_size)")
            self.embed = nn.Embedding(vocab_size, d_model)
        else:
            if not in_dim:
                raise ValueError("input='linear' needs a vector task (task.in_dim)")
            self.embed = nn.Linear(in_dim, d_model, bias=cfg.bias)

        if cfg.pos_enc == "learned":
            self.pos = nn.Parameter(torch.empty(seq_len, d_model))
        elif cfg.pos_enc == "sinusoidal":
            self.register_buffer("pos", sinusoidal_positions(seq_len, d_model), persistent=False)
        else:
            self.pos = None
        # the causal mask and the frozen previous-token head's fixed pattern (``prev_token_head = "frozen"``)
        self.register_buffer("mask", torch.ones(seq_len, seq_len, dtype=torch.bool).tril(), persistent=False)
        self.register_buffer("prev_mask", prev_token_mask(seq_len), persistent=False)

        d_qk = cfg.d_qk or d_model // n_heads
        self.blocks = nn.ModuleList(Block(cfg, d_qk) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(d_model) if cfg.layernorm else nn.Identity()
        if cfg.tie_embeddings:
            # nanoGPT-style weight tying: logits = h . E^T, so reading a copied token embedding is immediate.
            if input != "embedding" or vocab_size != out_dim:
                raise ValueError("tie_embeddings needs a token task whose outputs are its tokens")
            self.unembed = None
        else:
            self.unembed = nn.Linear(d_model, out_dim, bias=cfg.bias)
        if cfg.init == "normal":
            self._init(cfg.init_std, generator)
        else:  # "torch", "torch_mha"
            self._init_torch_defaults(generator)
            if cfg.init == "torch_mha":
                self._init_attention_mha(generator)
        if cfg.pos_init_std is not None and isinstance(self.pos, nn.Parameter):
            # Redrawn after the rest (not instead of it), so that every other parameter keeps the values it has
            # without the override: the same seed then differs only in the positions.
            nn.init.normal_(self.pos, 0.0, cfg.pos_init_std, generator=generator)
        self.frozen_embedding = cfg.embedding == "ordered"
        if self.frozen_embedding:
            # The blog "Sparse attention 3 – inefficiency of extracting similar content" ("Questions / Ideas"): with
            # distance attention "a 1D embedding would already be sufficient". Token v sits at v on the first axis
            # (the others 0), set after the draws above so the other parameters keep their seeded values; it never
            # learns (requires_grad False here; models/stack.py masks its gradient to 0 in a stack).
            if not isinstance(self.embed, nn.Embedding):
                raise ValueError("embedding='ordered' needs a token task (input='embedding')")
            with torch.no_grad():
                self.embed.weight.zero_()
                self.embed.weight[:, 0] = torch.arange(vocab_size, dtype=self.embed.weight.dtype)
            self.embed.weight.requires_grad_(False)
        self.fixed: frozenset[str] = frozenset()
        if cfg.prev_token_head == "frozen":
            self._freeze_prev_token_head()

    def _freeze_prev_token_head(self) -> None:
        """The first layer's (one-head) attention as a hand-built previous-token head that never learns: query and
        key weights 0, so every score is 0 and the fixed mask ``prev_mask`` alone sets the pattern (exactly one-hot
        on t - 1); value weight the identity, output weight ``J`` (each pair of stream dimensions turned by 90
        degrees: (a, b) -> (-b, a)), biases 0. The stream at t then carries ``J h(t - 1)`` beside its own
        ``h(t)``; J is skew (x . J x = 0 for every x), so the copy of a token never matches the token itself under
        the identity, the ambiguity a plain copy (J = I) would leave the selection layer (a key's own position and
        the position after it would carry the same sum). Set after the seeded draws, so every other parameter has
        the value it has in the learned model of the same seed. ``requires_grad`` False, and ``fixed`` names them:
        models/stack.py keeps them as buffers, outside the optimiser."""
        a = self.blocks[0].attn
        D = a.v.weight.shape[0]
        J = torch.zeros(D, D)
        idx = torch.arange(0, D - 1, 2)
        J[idx, idx + 1] = -1.0
        J[idx + 1, idx] = 1.0
        with torch.no_grad():
            for lin in (a.q, a.k, a.v, a.o):
                lin.weight.zero_()
                if lin.bias is not None:
                    lin.bias.zero_()
            a.v.weight.copy_(torch.eye(D))
            a.o.weight.copy_(J)
        for p in a.parameters():
            p.requires_grad_(False)
        self.fixed = frozenset(f"blocks.0.attn.{n}" for n, _ in a.named_parameters())

    def _init_torch_defaults(self, generator: torch.Generator | None) -> None:
        """PyTorch's default module initialisation, as a from-scratch PyTorch script gets it: Linear weights and biases
        U(-1/sqrt(fan_in), 1/sqrt(fan_in)), Embedding rows and learned positions N(0, 1). Drawn from ``generator``."""
        for mod in self.modules():
            if isinstance(mod, nn.Linear):
                bound = 1.0 / math.sqrt(mod.in_features)
                nn.init.uniform_(mod.weight, -bound, bound, generator=generator)
                if mod.bias is not None:
                    nn.init.uniform_(mod.bias, -bound, bound, generator=generator)
            elif isinstance(mod, nn.Embedding):
                nn.init.normal_(mod.weight, 0.0, 1.0, generator=generator)
        if isinstance(self.pos, nn.Parameter):
            nn.init.normal_(self.pos, 0.0, 1.0, generator=generator)

    def _init_attention_mha(self, generator: torch.Generator | None) -> None:
        """``nn.MultiheadAttention``'s own initialisation, drawn after the torch defaults (so every other parameter
        keeps its seeded value): the query, key and value weights xavier-uniform as one packed [q; k; v] matrix
        (fan_in d_model, fan_out its rows: 3 d_model at Table 1's sizes), the attention's biases 0 (the output
        projection's weight keeps the Linear default, as it does there)."""
        for block in self.blocks:
            a = block.attn
            rows = a.q.out_features + a.k.out_features + a.v.out_features
            bound = math.sqrt(6.0 / (a.q.in_features + rows))
            for lin in (a.q, a.k, a.v):
                nn.init.uniform_(lin.weight, -bound, bound, generator=generator)
            for lin in (a.q, a.v, a.o):
                if lin.bias is not None:
                    nn.init.zeros_(lin.bias)

    def _init(self, std: float, generator: torch.Generator | None) -> None:
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.normal_(mod.weight, 0.0, std, generator=generator)
            if isinstance(mod, nn.Linear) and mod.bias is not None:
                nn.init.zeros_(mod.bias)
        if isinstance(self.pos, nn.Parameter):
            nn.init.normal_(self.pos, 0.0, std, generator=generator)

    def forward(self, x: Tensor) -> tuple[Tensor, list[Tensor]]:
        h = self.embed(x)  # [N, L, D]
        if self.cfg.embed_scale != 1.0:
            h = h * self.cfg.embed_scale
        L = h.shape[-2]
        if self.pos is not None:
            h = h + self.pos[:L]
        attns = []
        for i, block in enumerate(self.blocks):
            last = i == len(self.blocks) - 1
            n_q = 1 if (last and self.readout_only) else L  # queries at the last n_q positions
            # The last query position sees every position: no mask needed when only it is computed.
            mask = self.mask[L - n_q : L, :L] if self.cfg.causal and n_q > 1 else None
            if i == 0 and self.fixed:  # the frozen previous-token head: its fixed pattern is the whole mask
                mask = self.prev_mask[L - n_q : L, :L]
            if last and not self.cfg.readout_self_key:  # the readout query does not see its own position
                own = torch.zeros(n_q, L, dtype=torch.bool, device=h.device)
                own[-1, -1] = True
                mask = ~own if mask is None else mask & ~own
            h, attn = block(h, n_q, mask)
            attns.append(attn)
        z = self.ln_f(h[:, -1])
        out = self.unembed(z) if self.unembed is not None else z @ self.embed.weight.T  # [N, out_dim]
        return out, attns
