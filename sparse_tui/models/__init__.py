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

    The Transformer is built from ``cfg.model`` itself (models/transformer.py, ``Transformer(cfg, task)``).
    """
    from sparse_tui.models.toy import ToyAttention
    from sparse_tui.models.transformer import Transformer

    m = cfg.model
    g = init_generator(cfg.seed)
    if m.kind == "toy":
        if not getattr(task, "in_dim", None):
            raise ValueError("model.kind 'toy' needs a vector task (linreg) with in_dim")
        model = ToyAttention(task.seq_len, task.in_dim, task.out_dim, m.init, m.init_scale, generator=g)
    elif m.kind == "transformer":
        model = Transformer(m, task, generator=g)
    else:  # the model kinds are the schema's: "ode" is the last
        raise ValueError("model.kind 'ode' is integrated (models/ode.py), not built as an nn.Module")
    device = getattr(task, "device", None)
    return model.to(device) if device is not None else model
