"""A toy "copy" task: the target is the token ``lag`` positions before the last one. The worked example of
docs/ARCHITECTURE.md ("A new task"), which shows this file as it is; tests/test_task_registry.py registers it and
trains it through the runner."""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, model_validator

from sparse_tui.presets.tasks import TaskKind, TaskSection
from sparse_tui.tasks.base import Batch, Task


class CopyConfig(TaskSection):
    """The preset's [task] table: what the user sets, with defaults, descriptions (the form's help) and checks."""

    kind: Literal["copy"] = "copy"
    vocab: int = Field(8, ge=2, description="Vocabulary size V.")
    T: int = Field(6, ge=2, description="Sequence length T.")
    lag: int = Field(3, ge=1, description="The target is the token lag positions before the last one.")

    @model_validator(mode="after")
    def _check(self) -> "CopyConfig":
        if self.lag > self.T - 1:
            raise ValueError("lag: must be <= T - 1")
        return self


class CopyTask(Task):
    """Uniform random tokens; the target is the token at position T - 1 - lag, the one relevant position. The base
    class sets the config, seed, device, the shapes (from ``dims`` below) and the training stream ``_train_gen``."""

    def __init__(self, cfg: CopyConfig, seed: int, device: torch.device | str = "cpu"):
        super().__init__(cfg, seed, device)
        self.pos = cfg.T - 1 - cfg.lag

    def _sample(self, n: int, gen: torch.Generator, meta: bool = True) -> Batch:
        x = torch.randint(self.vocab_size, (n, self.seq_len), generator=gen, device=self.device)
        relevant = (torch.arange(self.seq_len, device=self.device) == self.pos).expand(n, -1) if meta else None
        return Batch(x=x, y=x[:, self.pos], relevant=relevant)

    def train_batch(self, batch_size: int, meta: bool = True) -> Batch:
        return self._sample(batch_size, self._train_gen, meta)

    def test_sample(self, size: int, gen: torch.Generator) -> Batch:  # the base class caches the test set
        return self._sample(size, gen)


COPY = TaskKind(CopyConfig, CopyTask, dims=lambda t: dict(seq_len=t.T, vocab=t.vocab, in_dim=None, out_dim=t.vocab))
