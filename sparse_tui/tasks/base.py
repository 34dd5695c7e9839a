"""What every task hands the trainer: a ``Batch`` of tensors on the training device, and the ``Task`` protocol."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor


@dataclass
class Batch:
    """One batch of sequences, all tensors on the task's device.

    x: long [N, L] token ids (recall, nearest) or float [N, L, in_dim] vectors (linreg).
    y: long [N] class targets (recall, nearest) or float [N, out_dim] regression targets (linreg).
    relevant: bool [N, L], the positions the readout (last position) must attend to: the relevant token(s) for
        linreg, the value token(s) of the query's pair(s) for recall (selection step, paper Fig. 17 right),
        the closest token for nearest. None in training batches drawn with ``meta=False``.
    copy_q, copy_k: long [N] (recall only): position of the relevant value token and of its key; the copy step of
        an induction head is attention from copy_q to copy_k (paper Fig. 17 middle). None for other tasks.
    """

    x: Tensor
    y: Tensor
    relevant: Tensor | None
    copy_q: Tensor | None = None
    copy_k: Tensor | None = None

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def to(self, device: torch.device | str) -> "Batch":
        mv = lambda t: None if t is None else t.to(device)  # noqa: E731
        return Batch(mv(self.x), mv(self.y), mv(self.relevant), mv(self.copy_q), mv(self.copy_k))


class Task(Protocol):
    """A seeded batch generator on one device. Data are made with vectorised torch ops (no per-sequence loop)."""

    kind: str
    classification: bool  # cross-entropy over n_classes, else 0.5 * ||y - y*||^2
    seq_len: int  # L
    vocab_size: int | None  # token tasks: number of input token ids
    in_dim: int | None  # vector tasks: feature dimension of x
    out_dim: int  # number of classes, or regression output dimension
    device: torch.device

    def train_batch(self, batch_size: int, meta: bool = True) -> Batch:
        """A training batch (with the preset's repetition), drawn from the task's own generator. ``meta=False``: the
        training step's batch, x and y only (the same random draws; no relevant mask or probe positions)."""
        ...

    def test_batch(self, size: int) -> Batch:
        """The fixed test set: the same tensors every call for a given seed; no repetition (see each task)."""
        ...
