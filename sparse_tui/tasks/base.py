"""What every task hands the trainer: a ``Batch`` of tensors on the training device, and the ``Task`` base class."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from sparse_tui.base.devices import resolve
from sparse_tui.presets.tasks import task_kind
from sparse_tui.tasks._common import make_generator


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


class Task(ABC):
    """The base of every task: a seeded batch generator on one device, built by ``tasks.make_task`` from a run's
    config. Data are made with vectorised torch ops (no per-sequence loop).

    The shapes come from the kind's registry entry (``presets.TaskKind.dims``), the one definition that the resource
    estimate and the scheduler read too; a task with a vocabulary is a classification task."""

    def __init__(self, cfg: Any, seed: int, device: torch.device | str = "cpu"):
        self.cfg, self.kind, self.seed, self.device = cfg, cfg.kind, int(seed), resolve(device)
        d = task_kind(cfg.kind).dims(cfg)
        self.seq_len: int = d["seq_len"]  # L
        self.vocab_size: int | None = d["vocab"]  # token tasks: number of input token ids
        self.in_dim: int | None = d["in_dim"]  # vector tasks: feature dimension of x
        self.out_dim: int = d["out_dim"]  # number of classes, or regression output dimension
        self.classification = self.vocab_size is not None  # cross-entropy over out_dim, else 0.5 * ||y - y*||^2
        self._train_gen = make_generator(self.seed, "train", self.device)
        self._test_cache: dict[int, Batch] = {}

    @abstractmethod
    def train_batch(self, batch_size: int, meta: bool = True) -> Batch:
        """A training batch (with the preset's repetition), drawn from the task's own generator. ``meta=False``: the
        training step's batch, x and y only (the same random draws; no relevant mask or probe positions)."""

    @abstractmethod
    def test_sample(self, size: int, gen: torch.Generator) -> Batch:
        """``size`` test sequences drawn from ``gen``: the training distribution without repetition (see each task)."""

    def test_batch(self, size: int) -> Batch:
        """The fixed test set: the same tensors on every call (``test_sample`` from the run's test stream, seeded
        afresh, so it does not depend on the training batches drawn), cached per size."""
        size = int(size)
        if size not in self._test_cache:
            self._test_cache[size] = self.test_sample(size, make_generator(self.seed, "test", self.device))
        return self._test_cache[size]
