"""Seeding and small helpers shared by the three tasks.

Every task draws from independent random streams derived from the run seed (``cfg.seed``):

* ``fixed``: the per-run quantities drawn once at construction (W*, fixed positions, recall's 2 repeated tokens).
  This stream runs on a **CPU** generator and the results are moved to the device, so a seed gives the same W*
  (etc.) whatever the training device.
* ``train``: training batches (and, for recall with ``train_size > 0``, the indices into the fixed training set).
* ``test``: the fixed test set. A fresh generator is seeded from it for each requested size, so ``test_batch(n)``
  is the same tensors on every call and does not depend on how many training batches were drawn.
* ``data``: recall's fixed training set (``train_size > 0``).

``train`` and ``test`` generators live on the task's device (``torch.Generator(device=device)``), so the numbers
drawn for a given seed differ between CPU and CUDA: reproducibility is per device.

Stream seeds come from ``numpy.random.SeedSequence([seed, stream])``, so seeds 0, 1, 2, ... give well separated
streams and no two streams of one run share a seed.
"""

from __future__ import annotations

import numpy as np
import torch

STREAMS = {"fixed": 0, "train": 1, "test": 2, "data": 3, "x_tilde": 4}


def derive_seed(seed: int, stream: str, key: tuple[int, ...] = ()) -> int:
    """A 63-bit seed for one named random stream of a run; ``key`` (integers) makes the stream depend on more than
    the seed (linreg's W* is drawn per (seed, d, T))."""
    entropy = [int(seed), STREAMS[stream], *(int(k) for k in key)]
    state = np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint64)[0]
    return int(state) & 0x7FFF_FFFF_FFFF_FFFF


def make_generator(seed: int, stream: str, device: torch.device | str = "cpu",
                   key: tuple[int, ...] = ()) -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded for one stream of a run (``key``: see ``derive_seed``)."""
    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(derive_seed(seed, stream, key))
    return gen


