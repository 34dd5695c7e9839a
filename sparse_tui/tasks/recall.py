"""In-context associative recall (arXiv 2505.17863 §3.1, App. C.1, Fig. 17; blog "Sparse attention 6 – In-context
associative recall").

A sequence is n_pairs (key, value) pairs followed by a query key::

    x = [k_1 v_1 k_2 v_2 ... k_n v_n q],   L = 2 n_pairs + 1,

with token ids 0..n_tokens-1 shared by keys and values (App. C.1). The target is the value bound to the query key.

Generative process per sequence (App. C.1), all vectorised over the batch:

* **Mapping** (``values``): ``"permutation"`` (App. C.1, the default) draws an injective key -> value map, a random
  permutation of the vocabulary (argsort of uniform noise), so the values of one context are all distinct;
  ``"uniform"`` draws each key's value independently and uniformly from the vocabulary, so values may repeat (about
  n_pairs^2 / (2 n_tokens) repeated pairs per context, the birthday rate). The blog's Goldilocks zone at 32 pairs
  needs ``"uniform"`` (docs/REPRODUCTION.md). The value of key k is ``mapping[k]`` either way.
* **Query**: with probability p one of the 2 repeated tokens (drawn once per run from the seed), uniformly; else
  uniform over all n_tokens tokens. So a repeated token is the query with probability p/2 + (1-p)/n_tokens.
* **Context**: the query pair occupies some slots; the other slots hold distinct keys drawn without replacement
  from the n_tokens - 1 non-query tokens, each followed by its value.
* ``relevant`` marks the value tokens of the query's pair(s) (the selection step, Fig. 17 right); ``copy_q`` is the
  position of the first of them and ``copy_k = copy_q - 1`` the position of its key (the copy step, Fig. 17
  middle).

Decisions where the sources are silent or where we depart from them:

* **In-context repetition (departure, documented in presets.RecallTask.B).** App. C.1 puts the query pair in each
  slot independently with probability B/N, which leaves some sequences without the query (unanswerable). Here the
  query pair occupies one uniformly drawn slot, and each other slot independently with probability
  (B-1)/(n_pairs-1) (0 when n_pairs = 1). Every sequence is answerable, the mean count is exactly B, and B = 1 gives
  exactly one occurrence. B may be fractional.
* **Fixed training set.** ``train_size = 0``: fresh sequences every batch (online). ``train_size > 0``: a set of
  train_size sequences is generated once at construction (on the device, from its own ``data`` stream) and each
  batch takes batch_size indices drawn uniformly **with replacement** from [0, train_size) (``train`` stream). The blog
  uses 10^4 sequences but does not say how batches are drawn.
* **Test set**: B = 1 and p = 0 (no repetition of either kind), fresh sequences from the ``test`` stream; with a
  fixed training set a test sequence may occasionally coincide with a training one.
* The 2 repeated tokens are the first two entries of a seeded permutation of the vocabulary (distinct).
* Random numbers for the query-repetition and slot draws are consumed even when p = 0 / B = 1, so sweeping p or B
  with one seed keeps the rest of the randomness (common random numbers).
* Large sets are generated in chunks of 8192 sequences to bound peak memory (deterministic for a given size).
"""

from __future__ import annotations

import torch

from sparse_tui.presets.tasks import RecallTask as RecallConfig
from sparse_tui.science.repetition import initial
from sparse_tui.tasks._common import make_generator
from sparse_tui.tasks.base import Batch, Task

_CHUNK = 8192


class AssociativeRecall(Task):
    """The associative recall task on one device; see the module docstring."""

    def __init__(self, cfg: RecallConfig, seed: int, device: torch.device | str = "cpu"):
        super().__init__(cfg, seed, device)
        self.n_tokens = cfg.n_tokens
        self.n_pairs = cfg.n_pairs
        self.B = float(initial(cfg.B))  # a schedule's (repetition.py) value is set by the loop before each step
        self.p = float(initial(cfg.p))
        self.values = cfg.values

        fixed = make_generator(self.seed, "fixed", "cpu")
        self.repeated_tokens = torch.randperm(self.n_tokens, generator=fixed)[:2].to(self.device)

        self.train_set: Batch | None = None
        if cfg.train_size > 0:
            data_gen = make_generator(self.seed, "data", self.device)
            self.train_set = self._sample(cfg.train_size, data_gen, self.B, self.p)

    # ------------------------------------------------------------------------------------------------------
    def _sample(self, n: int, gen: torch.Generator, B: float, p: float, meta: bool = True) -> Batch:
        if n <= _CHUNK:
            return self._sample_chunk(n, gen, B, p, meta)
        parts = [self._sample_chunk(min(_CHUNK, n - i), gen, B, p) for i in range(0, n, _CHUNK)]
        return Batch(
            x=torch.cat([b.x for b in parts]),
            y=torch.cat([b.y for b in parts]),
            relevant=torch.cat([b.relevant for b in parts]),
            copy_q=torch.cat([b.copy_q for b in parts]),
            copy_k=torch.cat([b.copy_k for b in parts]),
        )

    def _sample_chunk(self, n: int, gen: torch.Generator, B: float, p: float, meta: bool = True) -> Batch:
        V, P, dev = self.n_tokens, self.n_pairs, self.device

        if self.values == "permutation":
            # Injective key -> value mapping: one random permutation of the vocabulary per sequence (App. C.1).
            mapping = torch.rand(n, V, generator=gen, device=dev).argsort(dim=1)
        else:
            # Each key's value uniform over the vocabulary, independently (values may repeat).
            mapping = torch.randint(0, V, (n, V), generator=gen, device=dev)

        # Query: one of the 2 repeated tokens with probability p, else uniform over the vocabulary.
        q_uniform = torch.randint(0, V, (n,), generator=gen, device=dev)
        use_rep = torch.rand(n, generator=gen, device=dev) < p
        which = torch.randint(0, 2, (n,), generator=gen, device=dev)
        q = torch.where(use_rep, self.repeated_tokens[which], q_uniform)

        # Slots holding the query pair: one uniform slot, plus each other slot w.p. (B-1)/(P-1).
        first = torch.randint(0, P, (n,), generator=gen, device=dev)
        extra = (B - 1.0) / (P - 1) if P > 1 else 0.0
        is_q = torch.rand(n, P, generator=gen, device=dev) < extra
        is_q.scatter_(1, first.unsqueeze(1), True)

        # Other slots: distinct non-query keys, in random order (the query's noise is pushed to the end).
        noise = torch.rand(n, V, generator=gen, device=dev)
        noise.scatter_(1, q.unsqueeze(1), 2.0)
        cand = noise.topk(P, dim=1, largest=False, sorted=True).indices  # [n, P]; query only possibly at P-1
        rank = ((~is_q).long().cumsum(1) - 1).clamp_(min=0)  # k-th non-query slot takes candidate k (k <= P-2)
        keys = torch.where(is_q, q.unsqueeze(1), cand.gather(1, rank))
        values = mapping.gather(1, keys)

        L = 2 * P + 1
        x = torch.empty(n, L, dtype=torch.long, device=dev)
        x[:, 0 : 2 * P : 2] = keys
        x[:, 1 : 2 * P : 2] = values
        x[:, -1] = q
        y = mapping.gather(1, q.unsqueeze(1)).squeeze(1)
        if not meta:  # a training step reads x and y only (the same random numbers were drawn)
            return Batch(x=x, y=y, relevant=None)

        relevant = torch.zeros(n, L, dtype=torch.bool, device=dev)
        relevant[:, 1 : 2 * P : 2] = is_q
        first_slot = is_q.to(torch.uint8).argmax(dim=1)  # first True (argmax returns the first maximum)
        copy_q = 2 * first_slot + 1
        copy_k = copy_q - 1
        return Batch(x=x, y=y, relevant=relevant, copy_q=copy_q, copy_k=copy_k)

    # ------------------------------------------------------------------------------------------------------
    def train_batch(self, batch_size: int, meta: bool = True) -> Batch:
        """Online sequences (train_size = 0) or a uniform draw with replacement from the fixed training set.
        ``meta=False``: x and y only (``relevant``, ``copy_q``, ``copy_k`` None; the training step's batches)."""
        n = int(batch_size)
        if self.train_set is None:
            return self._sample(n, self._train_gen, self.B, self.p, meta)
        idx = torch.randint(0, self.train_set.x.shape[0], (n,), generator=self._train_gen, device=self.device)
        s = self.train_set
        pick = lambda t: t.index_select(0, idx)  # noqa: E731  (much faster than t[idx] on a busy multi-thread CPU)
        if not meta:
            return Batch(x=pick(s.x), y=pick(s.y), relevant=None)
        return Batch(x=pick(s.x), y=pick(s.y), relevant=pick(s.relevant), copy_q=pick(s.copy_q), copy_k=pick(s.copy_k))

    def test_sample(self, size: int, gen: torch.Generator) -> Batch:
        """The fixed test set's sequences: B = 1 (one occurrence) and p = 0."""
        return self._sample(size, gen, 1.0, 0.0)
