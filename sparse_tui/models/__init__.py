"""Models: ``build_model(cfg, task) -> nn.Module`` whose ``forward(x)`` returns ``(out, attn)``
(docs/ARCHITECTURE.md, "Models").

* ``toy``: the simplified attention layer of the paper, Eq. 2 (``toy.ToyAttention``).
* ``transformer``: a small Transformer read out at the last position (``transformer.Transformer``).
* ``ode``: the reduced gradient-flow dynamics are integrated, not built as a module (see models/ode.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# torch is imported inside the functions, so that importing ``sparse_tui.models.ode`` (numpy / scipy only) does not
# load torch: ``sparse-tui theory`` and ``sparse-tui fit`` stay light.
if TYPE_CHECKING:
    import torch
    from torch import nn

# Salt mixed into the run seed for the model's initialisation, so that the init stream never coincides with the
# task's stream (a task seeded with the same integer would otherwise draw W* and the initial W identically).
_INIT_SALT = 0x5EED_0DE1


def init_generator(seed: int) -> torch.Generator:
    """The CPU generator that draws a run's initial parameters: seeded from the run seed, salted."""
    import torch

    return torch.Generator().manual_seed((seed * 1_000_003 + _INIT_SALT) % (2**63))


def build_model(cfg, task) -> nn.Module:
    """The model of ``cfg.model`` (a ``presets.RunConfig``) sized for ``task``, initialised from ``cfg.seed``
    (independently of torch's global RNG) and placed on ``task.device``.

    The Transformer input is an embedding table when ``model.input = 'embedding'``, a linear map for ``'linear'``,
    and for ``'auto'`` an embedding when the task has a vocabulary (``task.vocab_size``), else a linear map.
    """
    from .toy import ToyAttention
    from .transformer import Transformer

    m = cfg.model
    g = init_generator(cfg.seed)
    if m.kind == "toy":
        if not getattr(task, "in_dim", None):
            raise ValueError("model.kind 'toy' needs a vector task (linreg) with in_dim")
        model = ToyAttention(task.seq_len, task.in_dim, task.out_dim, m.init, m.init_scale, generator=g)
    elif m.kind == "transformer":
        kind = m.input
        if kind == "auto":
            kind = "embedding" if getattr(task, "vocab_size", None) else "linear"
        model = Transformer(
            seq_len=task.seq_len,
            out_dim=task.out_dim,
            input=kind,
            vocab_size=getattr(task, "vocab_size", None),
            in_dim=getattr(task, "in_dim", None),
            n_layers=m.n_layers,
            n_heads=m.n_heads,
            d_model=m.d_model,
            d_qk=m.d_qk,
            mlp=m.mlp,
            mlp_factor=m.mlp_factor,
            layernorm=m.layernorm,
            residual=m.residual,
            pos_enc=m.pos_enc,
            causal=m.causal,
            init_std=m.init_std,
            init=m.init,
            pos_init_std=m.pos_init_std,
            bias=m.bias,
            tie_embeddings=m.tie_embeddings,
            attention=m.attention,
            embedding=m.embedding,
            generator=g,
        )
    elif m.kind == "ode":
        raise ValueError("model.kind 'ode' is integrated (models/ode.py), not built as an nn.Module")
    else:
        raise ValueError(f"unknown model.kind {m.kind!r}")
    device = getattr(task, "device", None)
    return model.to(device) if device is not None else model
