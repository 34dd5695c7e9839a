"""A native stack of M models: parameters ``[M, ...]`` used through batched matmuls, one forward for all M.

Every run of a sweep is trained through this module, a single run as a stack of one (training/loop.py). A stack is
built from the runs' own modules (``models.build_model``: the Transformer of models/transformer.py or the toy
model of Eq. 2, paper arXiv 2505.17863 §2.1), so each member starts from exactly the initialisation it gets alone;
its slice is copied back into its module for evaluation, so metrics come from the same code whatever the stack.

No ``torch.func.vmap`` and no ``functional_call``: the forward is written out on the stacked tensors.

* Linear layers: ``baddbmm(b, x [M, N, in], W [M, out, in]^T)``; weights keep ``nn.Linear``'s ``[out, in]`` layout.
* Embeddings: one lookup into the ``[M * V, D]`` table with offset token ids ``x + m V``, so the backward is one
  dense gradient (no per-model scatter, no sparse tensors).
* Attention: one fused call over all models, batch and heads: ``_AttentionCore`` (CPU, short sequences) on
  ``[M * B * H, L, d]``, or ``F.scaled_dot_product_attention`` (CUDA, long sequences) on ``[M, B * H, L, d]``.

Mixed shapes (``padded``): runs that differ in width (``d_model``, ``d_qk``, MLP width), sequence length (recall's
``n_pairs``), vocabulary or vector dimension share one stack, padded to the largest of each. Padding is exact:

* widths: a model's real entries sit in the leading slots of each dimension (per head for q/k/v/o), every padded
  entry is 0 at the start and its gradient is multiplied by a 0/1 mask (``grad_masks``, only for parameters with a
  padded width), so it stays exactly 0 and
  the padded stream dimensions carry zeros through every layer; LayerNorm takes mean and variance over a model's
  real dimensions only (its padded gain and bias are 0, so padded outputs stay 0); 1/sqrt(d_qk) is per model;
* sequence length: sequences are padded on the left (the readout position is the last one for every model); a
  real query never attends to a padding key (additive -inf bias), and learned / sinusoidal positions are placed so
  that position 0 of each model is its first real token; a padding query attends only to itself (finite, unused);
* vocabulary / outputs: padded logits are -inf (classification) or 0 against a 0 target (regression), so the loss
  and its gradient are those of the model alone.

Fixed parameters (``Transformer.fixed``: the frozen previous-token head of ``model.prev_token_head = "frozen"``) are
stacked as buffers, not parameters: no gradient, outside the optimiser (no weight decay moves them), and its layer's
mask is the fixed pattern, per model under left padding (a model's first real position keeps its own key).

tests/test_stack.py proves all of it in float64: every width of presets/blog_nembd.toml in one stack against each
model alone (outputs, gradients, optimiser steps).
"""

from __future__ import annotations

import math
import re

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sparse_tui.models.toy import ToyAttention
from sparse_tui.models.transformer import Transformer, attention_core, euclidean_qk, pick_kernel, sinusoidal_positions

# Per-dimension layout of each Transformer parameter (matched on the parameter name's tail): D the stream width,
# Q the query/key width (H heads x d_qk), V the value width (H heads x d_model / H), F the MLP hidden width, L the
# positions (left-padded), vocab the token ids, out the outputs, in the vector inputs.
_LAYOUT = [
    (r"^embed\.weight$", {"embedding": ("vocab", "D"), "linear": ("D", "in")}),
    (r"^embed\.bias$", ("D",)),
    (r"^pos$", ("L", "D")),
    (r"\.ln\d\.(weight|bias)$|^ln_f\.(weight|bias)$", ("D",)),
    (r"\.attn\.[qk]\.weight$", ("Q", "D")),
    (r"\.attn\.[qk]\.bias$", ("Q",)),
    (r"\.attn\.v\.weight$", ("V", "D")),
    (r"\.attn\.v\.bias$", ("V",)),
    (r"\.attn\.o\.weight$", ("D", "V")),
    (r"\.attn\.o\.bias$", ("D",)),
    (r"\.mlp\.fc\.weight$", ("F", "D")),
    (r"\.mlp\.fc\.bias$", ("F",)),
    (r"\.mlp\.proj\.weight$", ("D", "F")),
    (r"\.mlp\.proj\.bias$", ("D",)),
    (r"^unembed\.weight$", ("out", "D")),
    (r"^unembed\.bias$", ("out",)),
]


# The config fields a stack's members must share (models/transformer.py builds the structure from them).
_STRUCTURE = ("n_layers", "n_heads", "mlp", "layernorm", "residual", "causal", "readout_self_key", "attention",
              "tie_embeddings", "pos_enc", "embed_scale", "prev_token_head")


def _layout(name: str, input_kind: str) -> tuple[str, ...]:
    for pat, lay in _LAYOUT:
        if re.search(pat, name):
            return lay[input_kind] if isinstance(lay, dict) else lay
    raise KeyError(f"no stacking layout for parameter {name!r}")


def _index(kind: str, n: int, N: int, H: int) -> Tensor:
    """Where a model's ``n`` real entries of a dimension of ``kind`` sit among the stack's ``N`` (``H`` heads)."""
    if kind in ("Q", "V"):  # per head: head h's real slots are h * (N / H) + [0, n / H)
        per, Per = n // H, N // H
        return (torch.arange(H)[:, None] * Per + torch.arange(per)[None, :]).reshape(-1)
    if kind == "L":  # left padding: the last n positions are real
        return torch.arange(N - n, N)
    return torch.arange(n)


def _ix(idx: list[Tensor]) -> tuple[Tensor, ...]:
    """Open-mesh index tuple (numpy's ix_) for advanced indexing of a block."""
    nd = len(idx)
    return tuple(t.view(*([1] * d), -1, *([1] * (nd - d - 1))) for d, t in enumerate(idx))


def _register(root: nn.Module, name: str, param: Tensor, mask: Tensor | None) -> None:
    """``param`` (and its gradient mask, a buffer ``<name>_mask``) at the dotted ``name`` under ``root``, in
    plain container modules: ``root.state_dict()`` then has the keys of the model it stacks. A plain tensor (not
    an ``nn.Parameter``: a fixed parameter) is a non-persistent buffer, rebuilt with the models."""
    *path, leaf = name.split(".")
    for part in path:
        if part not in root._modules:
            root.add_module(part, nn.Module())
        root = root._modules[part]
    if isinstance(param, nn.Parameter):
        root.register_parameter(leaf, param)
    else:
        root.register_buffer(leaf, param, persistent=False)
    root.register_buffer(leaf + "_mask", mask, persistent=False)


def _linear(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    """x [M, N, in] @ w [M, out, in]^T (+ b [M, out]) -> [M, N, out]."""
    if b is None:
        return torch.bmm(x, w.transpose(1, 2))
    return torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))


class StackedTransformer(nn.Module):
    """M Transformers (models/transformer.py) as one: ``loss(x, y) -> [M]`` per-model losses.

    ``x``: long ``[M, B, L]`` (token ids, each model's own ids, left-padded) or float ``[M, B, L, in]``;
    ``y``: long ``[M, B]`` or float ``[M, B, out]``. Built by ``build_stack`` from the runs' modules.
    ``kernel``: ``"core"`` (``_AttentionCore``), ``"sdpa"``, ``"math"`` (explicit softmax, the fallback of last
    resort) or ``"auto"`` (``transformer.pick_kernel``: the core for short sequences, else SDPA).
    """

    def __init__(self, modules: list[Transformer], kernel: str = "auto", classification: bool = True):
        super().__init__()
        ref = modules[0]
        self.M = len(modules)
        self.kernel = kernel
        self.input_kind = "embedding" if isinstance(ref.embed, nn.Embedding) else "linear"
        # The structure every member shares (its widths, lengths and vocabularies may differ): read from the
        # first member's config (``Transformer(cfg, task)``), checked against every other's.
        self.cfg = ref.cfg
        self.H = ref.cfg.n_heads
        self.readout_only = ref.readout_only

        def structure(m: Transformer) -> tuple:
            return (isinstance(m.embed, nn.Embedding), m.readout_only, sorted(n for n, _ in m.named_parameters()),
                    *(getattr(m.cfg, k) for k in _STRUCTURE))

        if any(structure(m) != structure(ref) for m in modules[1:]):
            raise ValueError("a stack needs models of one structure (layers, heads, MLP, LayerNorm, input, "
                             "previous-token head)")

        sizes = [self._sizes(m) for m in modules]
        padded = {k: max(s[k] for s in sizes) for k in sizes[0]}
        self.D, self.L, self.C = padded["D"], padded["L"], padded["out"]
        self.V = padded.get("vocab", 0)
        self.dqk = padded["Q"] // self.H
        self.dv = padded["V"] // self.H
        self.padded = any(s != padded for s in sizes)
        self.seq_lens = [s["L"] for s in sizes]
        self.mixed_len = len(set(self.seq_lens)) > 1
        self.widths = [s["D"] for s in sizes]
        self.mixed_width = len(set(self.widths)) > 1
        self.outs = [s["out"] for s in sizes]
        p0 = next(ref.parameters())
        f = dict(dtype=p0.dtype, device=p0.device)
        self._stack_parameters(modules, sizes, padded, f)
        self._constants(sizes, f, classification)
        self._index()

    def _stack_parameters(self, modules: list[Transformer], sizes: list[dict], padded: dict, f: dict) -> None:
        """Stacked parameters, registered under the Transformer's own names (so ``state_dict()`` has its keys, each
        with a leading [M]), their per-model placement, and the 0/1 masks of the real entries (buffers). A
        parameter the models never train (``Transformer.fixed``: the frozen previous-token head) is a buffer
        instead, outside the optimiser."""
        self.names = [n for n, _ in modules[0].named_parameters()]
        self.fixed = sorted(modules[0].fixed)
        self._places: dict[str, list[tuple]] = {}
        for name in self.names:
            lay = _layout(name, self.input_kind)
            shape = [padded[k] for k in lay]
            stacked = torch.zeros(self.M, *shape, **f)
            # A 0/1 gradient mask only where a width is padded: padded positions ("L", left padding) get no
            # gradient at all (no real query attends to them), so a stack mixing only sequence lengths multiplies
            # nothing (tests/test_stack.py checks that every padded entry's gradient is exactly 0).
            widths = any(sz[k] != padded[k] for sz in sizes for k in lay if k != "L")
            mask = torch.zeros(self.M, *shape, **f) if widths and name not in modules[0].fixed else None
            places = []
            for i, m in enumerate(modules):
                ix = _ix([_index(k, sizes[i][k], padded[k], self.H).to(f["device"]) for k in lay])
                stacked[i][ix] = dict(m.named_parameters())[name].detach()
                if mask is not None:
                    mask[i][ix] = 1.0
                places.append(ix)
            _register(self, name, stacked if name in modules[0].fixed else nn.Parameter(stacked), mask)
            self._places[name] = places
        frozen = [i for i, m in enumerate(modules) if m.frozen_embedding]
        if frozen:  # a fixed embedding (model.embedding = "ordered"): its gradient is 0, so no optimiser moves it
            if self.embed.weight_mask is None:
                self.embed.weight_mask = torch.ones_like(self.embed.weight)
            self.embed.weight_mask[frozen] = 0.0

    def _constants(self, sizes: list[dict], f: dict, classification: bool) -> None:
        """Per-model constants (buffers: they follow ``.to()``): query scale 1/sqrt(d_qk), LayerNorm widths,
        sinusoidal positions, masks."""
        M = self.M
        scales = [1.0 / math.sqrt(s["Q"] // self.H) for s in sizes]
        if len(set(scales)) == 1:
            self.q_scale: float | Tensor = scales[0]
        else:
            self.register_buffer("q_scale", torch.tensor(scales, **f).view(M, 1, 1), persistent=False)
        wm = inv = pe = lb = None
        if self.mixed_width:
            wm = torch.zeros(M, 1, self.D, **f)
            for i, d in enumerate(self.widths):
                wm[i, :, :d] = 1.0
            inv = torch.tensor([1.0 / d for d in self.widths], **f).view(M, 1, 1)
        if self.cfg.pos_enc == "sinusoidal":
            pe = torch.zeros(M, self.L, self.D, **f)
            for i, (L_i, d) in enumerate(zip(self.seq_lens, self.widths)):
                pe[i, self.L - L_i :, :d] = sinusoidal_positions(L_i, d).to(**f)
        if len(set(self.outs)) > 1 and classification:  # regression: padded outputs are 0 against a 0 target
            lb = torch.zeros(M, 1, self.C, **f)
            for i, c in enumerate(self.outs):
                lb[i, :, c:] = float("-inf")
        offsets = (torch.arange(M, device=f["device"]) * self.V).view(M, 1, 1) if self.V and M > 1 else None
        for key, t in (("width_mask", wm), ("inv_width", inv), ("pos_table", pe), ("logit_bias", lb),
                       ("offsets", offsets)):
            self.register_buffer(key, t, persistent=False)

    def _index(self) -> None:
        """The lookups the forward uses (name -> parameter, name -> gradient mask), refreshed after ``.to()``."""
        self.params = dict(self.named_parameters())
        self.params.update((n, self.get_buffer(n)) for n in self.fixed)  # read as the trained ones are
        self.grad_masks = {n: self.get_buffer(n + "_mask") for n in self.names
                           if self.get_buffer(n + "_mask") is not None}
        self._bias_cache: dict[tuple, Tensor | None] = {}

    def _apply(self, fn, recurse=True):  # .to(), .cuda(), .double(), ...: the index tensors follow the device
        super()._apply(fn, recurse)
        dev = self.params[self.names[0]].device
        self._places = {n: [tuple(t.to(dev) for t in ix) for ix in places] for n, places in self._places.items()}
        self._index()
        return self

    def _sizes(self, m: Transformer) -> dict[str, int]:
        a = m.blocks[0].attn
        D = m.ln_f.normalized_shape[0] if isinstance(m.ln_f, nn.LayerNorm) else a.o.weight.shape[0]
        s = {"D": D, "Q": a.q.weight.shape[0], "V": a.v.weight.shape[0], "L": m.mask.shape[0]}
        s["F"] = m.blocks[0].mlp.fc.weight.shape[0] if m.blocks[0].mlp is not None else 0
        if isinstance(m.embed, nn.Embedding):
            s["vocab"] = m.embed.weight.shape[0]
        else:
            s["in"] = m.embed.weight.shape[1]
        s["out"] = m.unembed.weight.shape[0] if m.unembed is not None else m.embed.weight.shape[0]
        return s

    # -- moving parameters between the stack and the runs' own modules ------------------------------------------
    @torch.no_grad()
    def load_into(self, i: int, module: nn.Module) -> None:
        """Copy model i's real entries into its own module (for evaluation)."""
        for name, p in module.named_parameters():
            p.copy_(self.member_block(name, self.params[name], i))

    def member_block(self, name: str, t: Tensor, i: int) -> Tensor:
        """Model i's real entries of ``t``, a tensor laid out like parameter ``name`` (the parameter itself, or an
        optimiser state of it)."""
        return t[i][self._places[name][i]]

    @torch.no_grad()
    def stacked_like(self, name: str, blocks: list[Tensor]) -> Tensor:
        """A tensor laid out like parameter ``name`` holding ``blocks[i]`` as model i's real entries (0 elsewhere):
        moving a state from one stack to another (``loop.Prepared.restack``)."""
        out = torch.zeros_like(self.params[name])
        for i, b in enumerate(blocks):
            out[i][self._places[name][i]] = b
        return out

    @torch.no_grad()
    def mask_grads(self) -> None:
        """Zero the gradient of every padded entry (exact: padding stays 0 under any optimiser)."""
        for name, mask in self.grad_masks.items():
            g = self.params[name].grad
            if g is not None:
                g.mul_(mask)

    # -- forward ---------------------------------------------------------------------------------------------
    def _ln(self, h: Tensor, prefix: str) -> Tensor:
        """LayerNorm over each model's real dimensions (h [M, N, D]); its padded gain and bias are 0. Without
        LayerNorm (``model.layernorm`` off): h itself."""
        if not self.cfg.layernorm:
            return h
        w, b = self.params[prefix + ".weight"], self.params[prefix + ".bias"]
        if not self.mixed_width:
            return F.layer_norm(h, (self.D,), eps=1e-5) * w.unsqueeze(1) + b.unsqueeze(1)
        mean = h.sum(-1, keepdim=True) * self.inv_width
        c = (h - mean) * self.width_mask
        var = (c * c).sum(-1, keepdim=True) * self.inv_width
        return c * torch.rsqrt(var + 1e-5) * w.unsqueeze(1) + b.unsqueeze(1)

    def _attn_bias(self, n_q: int, kernel: str, device, dtype, strict: bool = False, prev: bool = False
                   ) -> Tensor | None:
        """Additive mask for the last n_q queries: [n_q, L] (one sequence length) or [M, 1, n_q, L] (mixed).
        ``strict``: the readout query (position L - 1) does not see its own key (``readout_self_key = False``).
        ``prev``: the frozen previous-token head's pattern (``transformer.prev_token_mask``): each query sees the
        key before it only, a model's first real position itself."""
        key = (n_q, kernel, strict, prev)
        if key in self._bias_cache:
            return self._bias_cache[key]
        L = self.L
        qpos = torch.arange(L - n_q, L, device=device)[:, None]
        kpos = torch.arange(L, device=device)[None, :]
        allowed = (kpos <= qpos) if self.cfg.causal else torch.ones(n_q, L, dtype=torch.bool, device=device)
        if prev:  # the first real position (0, or a model's left-padding offset below) keeps its own key
            allowed = (kpos == qpos - 1) | (kpos == qpos)
        if strict:  # left padding: position L - 1 is every model's readout
            allowed = allowed & ~((qpos == L - 1) & (kpos == L - 1))
        if not self.mixed_len:
            bias = None
            if prev:
                allowed = allowed & ~((kpos == qpos) & (qpos > 0))
            if (self.cfg.causal and n_q > 1) or strict or prev:
                bias = torch.zeros(n_q, L, dtype=dtype, device=device).masked_fill(~allowed, float("-inf"))
        else:
            off = torch.tensor([L - n for n in self.seq_lens], device=device).view(-1, 1, 1)
            ok = allowed & (kpos >= off)  # a real query never sees a padding key
            if prev:
                ok = ok & ~((kpos == qpos) & (qpos > off))
            ok = ok | ((qpos < off) & (kpos == qpos))  # a padding query sees itself only (finite, never used)
            # Rows padded to a multiple of 16 elements and viewed back to L: fused attention kernels on CUDA want
            # the mask's row stride aligned (the view changes no value).
            Lp = -(-L // 16) * 16
            full = torch.zeros(ok.shape[0], n_q, Lp, dtype=dtype, device=device)
            full[..., :L] = torch.zeros(ok.shape, dtype=dtype, device=device).masked_fill(~ok, float("-inf"))
            bias = full[..., :L].unsqueeze(1)
        self._bias_cache[key] = bias
        return bias

    def _attention(self, i: int, xq: Tensor, x: Tensor, B: int, n_q: int, kernel: str, strict: bool,
                   probs: list | None = None) -> Tensor:
        """Layer i's attention: xq [M, B*n_q, D] (queries), x [M, B*L, D] -> [M, B*n_q, D]. ``probs``: the
        explicit softmax is used and its probabilities [M, B, H, n_q, L] are appended (evaluations)."""
        M, H, L, dqk, dv = self.M, self.H, self.L, self.dqk, self.dv
        pre = f"blocks.{i}.attn."
        q = _linear(xq, self.params[pre + "q.weight"], self.params.get(pre + "q.bias")) * self.q_scale
        k = _linear(x, self.params[pre + "k.weight"], self.params.get(pre + "k.bias"))
        v = _linear(x, self.params[pre + "v.weight"], self.params.get(pre + "v.bias"))

        def heads(t: Tensor, n: int, d: int) -> Tensor:  # [M, B*n, H*d] -> [M, B*H, n, d]
            t = t.view(M, B, n, H, d)
            return (t.transpose(2, 3) if H > 1 else t).reshape(M, B * H, n, d)

        q, k, v = heads(q, n_q, dqk), heads(k, L, dqk), heads(v, L, dv)
        if self.cfg.attention == "euclidean":  # q scaled per model: [M, 1, 1] -> [M, 1, 1, 1] over [M, B*H, n, d]
            s = self.q_scale if not torch.is_tensor(self.q_scale) else self.q_scale.view(M, 1, 1, 1)
            q, k = euclidean_qk(q, k, s)
        prev = i == 0 and bool(self.fixed)  # the frozen previous-token head
        bias = self._attn_bias(n_q, kernel, x.device, x.dtype, strict, prev)
        if kernel == "core" and not self.mixed_len:
            y = attention_core(q.reshape(M * B * H, n_q, q.shape[-1]), k.reshape(M * B * H, L, k.shape[-1]),
                               v.reshape(M * B * H, L, dv), bias).view(M, B * H, n_q, dv)
        elif kernel == "sdpa":
            causal = not self.mixed_len and self.cfg.causal and n_q == L > 1 and not strict and not prev
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None if causal else bias, is_causal=causal,
                                               scale=1.0)
        else:  # "math" (evaluations: ``probs``), and the CPU core with mixed lengths: explicit scores + bias
            s = q @ k.transpose(-2, -1)
            p = (s if bias is None else s + bias).softmax(-1)
            if probs is not None:
                probs.append(p.view(M, B, H, n_q, L))
            y = p @ v
        y = y.view(M, B, H, n_q, dv)
        y = (y.transpose(2, 3) if H > 1 else y).reshape(M, B * n_q, H * dv)
        return _linear(y, self.params[pre + "o.weight"], self.params.get(pre + "o.bias"))

    def forward(self, x: Tensor, need_attn: bool = False, full: bool = False):
        """x [M, B, L] or [M, B, L, in] -> outputs [M, B, out] (padded outputs -inf / 0). ``need_attn``
        (evaluations): also the attention probabilities of every layer, [M, B, H, n_q, L] each (explicit softmax);
        ``full``: every query row of the last layer too (attention snapshots), not only the readout's."""
        M, B, L = x.shape[0], x.shape[1], x.shape[2]
        if L != self.L:
            raise ValueError(f"stacked input has {L} positions, the stack {self.L}")
        D = self.D
        emb = self.params["embed.weight"]
        if self.input_kind == "embedding":
            ids = x if self.offsets is None else x + self.offsets
            h = F.embedding(ids, emb.reshape(-1, D))  # [M, B, L, D]; one dense [M*V, D] gradient
        else:
            h = _linear(x.reshape(M, B * L, -1).to(emb.dtype), emb, self.params.get("embed.bias")).view(M, B, L, D)
        if self.cfg.embed_scale != 1.0:
            h = h * self.cfg.embed_scale
        if self.cfg.pos_enc == "learned":
            h = h + self.params["pos"].unsqueeze(1)
        elif self.cfg.pos_enc == "sinusoidal":
            h = h + self.pos_table.unsqueeze(1)
        kernel = "math" if need_attn else pick_kernel(self.kernel, h.device, self.L)
        probs: list | None = [] if need_attn else None
        n = L
        h = h.reshape(M, B * L, D)
        for i in range(self.cfg.n_layers):
            last = i == self.cfg.n_layers - 1
            n_q = 1 if (last and self.readout_only and not full) else L
            x_ln = self._ln(h, f"blocks.{i}.ln1")
            if n_q == n:
                hq, xq = h, x_ln
            else:
                hq = h.view(M, B, n, D)[:, :, -n_q:].reshape(M, B * n_q, D)
                xq = self._ln(hq, f"blocks.{i}.ln1")
            a = self._attention(i, xq, x_ln, B, n_q, kernel, last and not self.cfg.readout_self_key, probs)
            h = hq + a if self.cfg.residual else a
            if self.cfg.mlp:
                pre = f"blocks.{i}.mlp."
                z = self._ln(h, f"blocks.{i}.ln2")
                z = _linear(F.gelu(_linear(z, self.params[pre + "fc.weight"], self.params.get(pre + "fc.bias"))),
                            self.params[pre + "proj.weight"], self.params.get(pre + "proj.bias"))
                h = h + z if self.cfg.residual else z
            n = n_q
        z = self._ln(h.view(M, B, n, D)[:, :, -1], "ln_f")  # [M, B, D]
        if self.cfg.tie_embeddings:
            out = torch.bmm(z, emb.transpose(1, 2))
        else:
            out = _linear(z, self.params["unembed.weight"], self.params.get("unembed.bias"))
        if self.logit_bias is not None:
            out = out + self.logit_bias
        return (out, probs) if need_attn else out


class StackedToy(nn.Module):
    """M toy models (Eq. 2) of one shape: scores a [M, T], output maps W [M, out, in]."""

    def __init__(self, modules: list[ToyAttention]):
        super().__init__()
        if len({(m.a.shape, m.W.shape) for m in modules}) != 1:
            raise ValueError("a stack of toy models needs one shape (T, in_dim, out_dim)")
        self.M, self.padded = len(modules), False
        self.a, self.W = (nn.Parameter(torch.stack([getattr(m, n).detach() for m in modules])) for n in "aW")

    @torch.no_grad()
    def load_into(self, i: int, module: nn.Module) -> None:
        module.a.copy_(self.a[i])
        module.W.copy_(self.W[i])

    def member_block(self, name: str, t: Tensor, i: int) -> Tensor:
        return t[i]

    @torch.no_grad()
    def stacked_like(self, name: str, blocks: list[Tensor]) -> Tensor:
        return torch.stack(blocks)

    def mask_grads(self) -> None:
        pass

    def forward(self, x: Tensor, need_attn: bool = False, full: bool = False):
        W = self.W
        alpha = self.a.softmax(-1)  # [M, T]
        pooled = torch.einsum("mt,mntd->mnd", alpha, x.to(W.dtype))
        out = torch.bmm(pooled, W.transpose(1, 2))
        if not need_attn:
            return out
        return out, [alpha[:, None, None, None, :].expand(self.M, x.shape[1], 1, 1, alpha.shape[-1])]


def build_stack(modules: list[nn.Module], kernel: str = "auto", classification: bool = True
                ) -> StackedTransformer | StackedToy:
    """The stack of the runs' modules (all Transformers or all toy models); ``classification``: the task's loss
    is a cross-entropy (padded logits are then masked to -inf)."""
    if all(isinstance(m, Transformer) for m in modules):
        return StackedTransformer(modules, kernel, classification)
    if all(isinstance(m, ToyAttention) for m in modules):
        return StackedToy(modules)
    raise ValueError("a stack needs models of one kind")


def stacked_loss(out: Tensor, y: Tensor, classification: bool) -> Tensor:
    """Per-model losses [M] of outputs [M, B, C]: each model's loss alone (cross-entropy, or
    0.5 ||y - y*||^2 averaged over the batch, paper App. A.2)."""
    M, B = out.shape[0], out.shape[1]
    if classification:
        return F.cross_entropy(out.reshape(M * B, -1), y.reshape(M * B), reduction="none").view(M, B).mean(1)
    return 0.5 * ((out - y) ** 2).sum(-1).mean(-1)
