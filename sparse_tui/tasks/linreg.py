"""Single-location linear regression (paper 002_cc8574166552f4e6.txt: §2.1, App. A.2, App. B.1, App. D.1).

A sequence is T tokens x_1..x_T in R^d, each x_t ~ N(0, I/d) (std 1/sqrt(d) per coordinate, so E||x||^2 = 1).
One token is relevant; the target is y* = W* x_rel with W* in R^{d x d}, entries ~ N(0, 1/d), drawn once per run
(attribute ``w_star``). With the loss 0.5 ||y - y*||^2, a zero model scores 0.5 * E||W* x||^2 ~= 0.5 (App. A.2).

Repetition (§2.3):

* in-context repetition B: the relevant token is copied at B distinct positions (all B copies are the same
  vector; ``Batch.relevant`` marks all of them);
* cross-sample repetition p: with probability p per sequence the relevant token (all its B copies) is replaced by
  one fixed unit-norm token x~ (attribute ``x_tilde``) and the target becomes W* x~.

Where the relevant positions sit (``position``):

* ``'last'``: the last B positions T-B+1..T, as in the theory (App. A.2);
* ``'fixed'``: B distinct positions drawn once per run from the seed (the Fig. 14 ablation, App. B.3), among the
  first T - 1 positions: **never the last one**, where the Transformer reads out (models/transformer.py). There the
  skip connection hands the relevant token to the readout without any attention, so such a run has no sparse
  attention to learn (issue 18 measured a 60-step plateau where the Fig. 14 law says 107-159). App. B.1 makes the
  position random "to avoid skip connections playing a specific role"; App. B.1 says the fixed position is "randomly
  sampled at the beginning of training" and does not say whether the last one can be drawn: excluding it is ours;
* ``'random'``: B distinct positions resampled for every sequence (App. B.1), vectorised as the top-B of uniform
  noise per row.

``indicator`` appends one feature, 1 on relevant positions and 0 elsewhere (App. B.1), so ``in_dim = d + 1``;
``out_dim = d`` always.

Test set (App. D.1): never cross-sample repetition; in-context repetition B only when ``test_repetition`` is true,
otherwise exactly one relevant position.

Decisions where the sources are silent:

* **x~ = e_1** (``x_tilde = "e1"``, the default), the first canonical basis vector, exactly as the paper's App. A.2 /
  A.4 write it ("without loss of generality", footnote 3: a right multiplication of W by an orthogonal matrix). It
  is the same for every seed. It is WLOG for the toy model and gradient flow (both rotation equivariant, and W* is
  isotropic), but not for Adam, which is coordinate-wise: a Transformer trained with Adam sees x~ aligned with one
  input feature. ``x_tilde = "random"`` draws x~ uniformly on the unit sphere from its own stream keyed by
  (seed, d), so every other random number of the run is unchanged (docs/REPRODUCTION.md, Fig. 3 right, measures
  both).
* The B copies are all replaced by x~ (the whole "relevant token" is x~, as in App. A.2 where the last B tokens are
  always identical).
* Which position the B = 1 test set uses: ``'last'`` -> the last position T (y* = W* x_T, §2.1); ``'fixed'`` -> the
  first of the B fixed positions in drawing order (a uniformly random one of them); ``'random'`` -> one random
  position per sequence. ``positions`` (attribute) is ordered so that ``positions[0]`` is that position (for
  ``'last'`` it is T-1, T-2, ..., T-B, 0-based).
* Per-run quantities come from the ``fixed`` stream, keyed by (seed, d, T), in this order: W*, then a permutation
  of the first T - 1 positions (the fixed positions are its first B entries). So **W* is drawn per (seed, d, T)**:
  every point of a d x T grid gets its own draw, not one draw per (seed, d) shared by every T. The zero-model loss
  0.5 ||W*||_F^2 / d varies between draws (0.46-0.75 at d = 4-8), and a shared draw made the residuals of a fit
  correlated along T, so its intervals were too narrow; independent draws make a seed an honest replicate. W* does
  not depend on B, p or position (sweeping them with one seed keeps the draw: common random numbers). Before
  issue 18 the key was (seed, d): runs recorded earlier (docs/REPRODUCTION.md says which) drew other W*.
* Random numbers for the cross-sample draw are consumed even when p = 0, so sweeping p with one seed changes only
  which sequences carry x~ (common random numbers).
* float32 throughout. Tokens are drawn in chunks of whole sequences (deterministic for a given batch size), so a
  seed gives the same tokens with and without the indicator feature.
"""

from __future__ import annotations

import math

import torch

from sparse_tui.presets.tasks import LinregTask as LinregConfig
from sparse_tui.science.repetition import all_values, initial
from sparse_tui.tasks._common import make_generator
from sparse_tui.tasks.base import Batch, Task

_CHUNK_ELEMENTS = 1 << 24  # tokens are generated in chunks of about this many floats (64 MiB)


class LinearRegression(Task):
    """The linear regression task on one device; see the module docstring."""

    def __init__(self, cfg: LinregConfig, seed: int, device: torch.device | str = "cpu"):
        super().__init__(cfg, seed, device)
        self.d = cfg.d
        self.T = cfg.T
        self.B = int(initial(cfg.B))  # a schedule's (repetition.py) value is set by the loop before each step
        self.p = float(initial(cfg.p))
        b_max = int(max(all_values(cfg.B)))  # fixed positions for the largest B the schedule reaches
        fixed = make_generator(self.seed, "fixed", "cpu", key=(self.d, self.T))
        w = torch.randn(self.d, self.d, generator=fixed) / math.sqrt(self.d)
        self.w_star = w.to(self.device)
        perm = torch.randperm(self.T - 1, generator=fixed)  # never the readout (last) position
        if cfg.position == "last":
            self.positions: torch.Tensor | None = torch.arange(self.T - 1, self.T - 1 - b_max, -1).to(self.device)
        elif cfg.position == "fixed":
            self.positions = perm[:b_max].to(self.device)
        else:
            self.positions = None
        if cfg.x_tilde == "random":  # its own stream: W*, positions and tokens are those of x_tilde = "e1"
            v = torch.randn(self.d, generator=make_generator(self.seed, "x_tilde", "cpu", key=(self.d,)))
            self.x_tilde = (v / v.norm()).to(self.device)
        else:
            self.x_tilde = torch.zeros(self.d, device=self.device)
            self.x_tilde[0] = 1.0

    # ------------------------------------------------------------------------------------------------------
    def _sample(self, n: int, gen: torch.Generator, B: int, p: float) -> Batch:
        d, T, dev = self.d, self.T, self.device
        x = torch.empty(n, T, self.in_dim, device=dev)
        xs = x[..., :d] if self.cfg.indicator else x
        # Tokens, drawn in contiguous chunks of sequences (normal_ on the strided view x[..., :d] is ~2.5x slower
        # on CPU, and chunks bound the extra memory); the same numbers with or without the indicator feature.
        std = 1.0 / math.sqrt(d)
        chunk = max(1, _CHUNK_ELEMENTS // (T * d))
        for i in range(0, n, chunk):
            if self.cfg.indicator:
                xs[i : i + chunk] = torch.empty(min(chunk, n - i), T, d, device=dev).normal_(0.0, std, generator=gen)
            else:
                xs[i : i + chunk].normal_(0.0, std, generator=gen)

        if self.positions is None:
            noise = torch.rand(n, T, generator=gen, device=dev)
            pos = noise.topk(B, dim=1).indices  # [n, B] distinct positions per row
            del noise
        else:
            pos = self.positions[:B].unsqueeze(0).expand(n, B)
        rows = torch.arange(n, device=dev).unsqueeze(1)

        x_rel = xs[rows[:, 0], pos[:, 0]].clone()  # [n, d]
        repeat = torch.rand(n, generator=gen, device=dev) < p
        if p > 0:
            x_rel = torch.where(repeat.unsqueeze(1), self.x_tilde.unsqueeze(0), x_rel)
        xs[rows, pos] = x_rel.unsqueeze(1).expand(n, B, d)

        # scatter_ with a Python scalar: no host-to-device copy and no stream sync (``relevant[rows, pos] = True``
        # is an index_put_ of a CPU scalar: a sync every step on CUDA, and illegal inside a CUDA graph capture)
        relevant = torch.zeros(n, T, dtype=torch.bool, device=dev).scatter_(1, pos, True)
        if self.cfg.indicator:
            x[..., d] = relevant.to(x.dtype)
        y = x_rel @ self.w_star.T
        return Batch(x=x, y=y, relevant=relevant)

    def train_batch(self, batch_size: int, meta: bool = True) -> Batch:
        """Training sequences with in-context repetition B and cross-sample repetition p (``meta`` is accepted for
        the Task protocol: the relevant mask is part of the input here, through the indicator feature)."""
        return self._sample(int(batch_size), self._train_gen, self.B, self.p)

    def test_sample(self, size: int, gen: torch.Generator) -> Batch:
        """The fixed test set's sequences: p = 0; B only if ``test_repetition`` (else 1)."""
        return self._sample(size, gen, self.B if self.cfg.test_repetition else 1, 0.0)
