"""The simplified attention layer of the paper (002_cc8574166552f4e6.txt, §2.1, Eq. 2):

    y = W  sum_t softmax(a)_t x_t

Attention does not look at the tokens: ``a`` ([T]) is one learned score per position, so ``softmax(a)`` is the
same attention row for every sequence. ``W`` ([out_dim, in_dim]) is the output map. With the linreg indicator
feature (App. B.1) ``in_dim = d + 1`` and ``out_dim = d``; the model cannot make use of that feature (App. B.3).

Initialisation (``model.init``, checked by the schema): 'zero' puts a = 0 (uniform attention 1/T, Asm. 2) and
W = 0 (Asm. 4), the setting of the theory and of the reduced dynamics (Eqs. 3-4); 'normal' draws both from
N(0, init_scale^2) (the relaxed setting of App. A.3.4 draws W from N(0, 1/d)).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class ToyAttention(nn.Module):
    """Eq. 2. ``forward(x [N, T, in_dim]) -> (y [N, out_dim], [attn [N, 1, 1, T]])``.

    The attention tensor is ``softmax(a)`` expanded to the one-layer, one-head, one-query contract of
    docs/ARCHITECTURE.md (a view, no copy).
    """

    def __init__(
        self,
        seq_len: int,
        in_dim: int,
        out_dim: int,
        init: str = "zero",
        init_scale: float = 0.0,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        self.a = nn.Parameter(torch.zeros(seq_len))  # attention scores, one per position
        self.W = nn.Parameter(torch.zeros(out_dim, in_dim))  # output weights
        if init == "normal":
            nn.init.normal_(self.a, 0.0, init_scale, generator=generator)
            nn.init.normal_(self.W, 0.0, init_scale, generator=generator)

    def forward(self, x: Tensor) -> tuple[Tensor, list[Tensor]]:
        alpha = self.a.softmax(-1)  # [T]
        pooled = torch.einsum("t,ntd->nd", alpha, x)  # sum_t alpha_t x_t
        y = pooled @ self.W.T  # [N, out_dim]
        attn = alpha.expand(x.shape[0], 1, 1, alpha.shape[-1])  # [N, 1, 1, T], a view
        return y, [attn]
