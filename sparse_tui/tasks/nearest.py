"""Similar-content extraction (blog 003_40b321c40389bd3f.txt, "Sparse attention 3 -- inefficiency of extracting
similar content").

Tokens have numerical meaning: token k is the number k, k = 0..V-1. A sequence is C distinct tokens drawn without
replacement from the vocabulary (vectorised: top-C of uniform noise per row, in random order). The target is the
token among the first C-1 that is numerically closest to the last token, e.g. [1][5][10][6] -> [5] (blog).
``relevant`` marks the position of the target token (exactly one, since tokens are distinct).

Decisions where the blog is silent:

* **Distinct tokens.** The blog does not say whether context tokens may repeat; we draw them without replacement,
  so the last token never appears earlier and the closest token is at distance >= 1.
* **Ties.** With distinct tokens a tie means two context tokens at the same distance, one below and one above the
  last token. ``tie_break = 'lower'`` takes the numerically smaller one; ``'earlier'`` takes the one at the earlier
  position.
* **Token ids start at 0** (the blog's examples start at 1; only distances matter).
* No repetition exists in this task: the test set is a fixed sample of the same distribution, drawn from its own
  seeded stream.
"""

from __future__ import annotations

import torch

from sparse_tui.presets.tasks import NearestTask as NearestConfig
from sparse_tui.tasks.base import Batch, Task


def nearest_index(x: torch.Tensor, tie_break: str = "lower") -> torch.Tensor:
    """Position (long [N]) of the token among ``x[:, :-1]`` numerically closest to the last token ``x[:, -1]``.

    Distinct tokens assumed; a tie (one token below, one above at the same distance) goes to the numerically lower
    token (``'lower'``) or to the earlier position (``'earlier'``).
    """
    C = x.shape[1]
    last = x[:, -1:]
    cand = x[:, :-1]
    dist = (cand - last).abs()
    if tie_break == "lower":
        score = 2 * dist + (cand > last).long()  # equal distance: the one below the last token wins
    elif tie_break == "earlier":
        score = dist * C + torch.arange(C - 1, device=x.device)  # equal distance: the earlier position wins
    else:
        raise ValueError(f"unknown tie_break {tie_break!r}")
    return score.argmin(dim=1)


class NearestToken(Task):
    """The similar-content extraction task on one device; see the module docstring."""

    def __init__(self, cfg: NearestConfig, seed: int, device: torch.device | str = "cpu"):
        super().__init__(cfg, seed, device)
        self.V = cfg.vocab
        self.C = cfg.context
        self.tie_break = cfg.tie_break

    def _sample(self, n: int, gen: torch.Generator, meta: bool = True) -> Batch:
        V, C, dev = self.V, self.C, self.device
        x = torch.rand(n, V, generator=gen, device=dev).topk(C, dim=1, sorted=True).indices  # [n, C] distinct
        idx = nearest_index(x, self.tie_break)
        y = x.gather(1, idx.unsqueeze(1)).squeeze(1)
        if not meta:
            return Batch(x=x, y=y, relevant=None)
        relevant = torch.zeros(n, C, dtype=torch.bool, device=dev)
        relevant.scatter_(1, idx.unsqueeze(1), True)
        return Batch(x=x, y=y, relevant=relevant)

    def train_batch(self, batch_size: int, meta: bool = True) -> Batch:
        """Fresh sequences from the training stream (``meta=False``: x and y only)."""
        return self._sample(int(batch_size), self._train_gen, meta)

    def test_sample(self, size: int, gen: torch.Generator) -> Batch:
        """The fixed test set's sequences (the training distribution: this task has no repetition)."""
        return self._sample(size, gen)
