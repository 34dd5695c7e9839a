"""model.embedding = "ordered": the frozen 1-D embedding of blog 3's Euclidean-attention argument (token v at v on
the first axis) is built as stated, does not move in training (alone or in a stack of two), and is refused where it
cannot hold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from sparse_tui.executors import LocalExecutor
from sparse_tui.presets.errors import PresetError
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.store import RunStore

ROOT = Path(__file__).resolve().parent.parent


def _specs(*sets: str):
    return expand(load_preset(ROOT / "presets" / "blog3_nearest.toml",
                              ["train.steps=200", "eval.every=100", "eval.test_size=64", "train.device=cpu",
                               "model.d_model=1", "model.attention=euclidean", *sets]))


def test_the_ordered_embedding_is_the_token_value_on_a_line():
    from sparse_tui.models import build_model
    from sparse_tui.tasks import make_task

    cfg = _specs("model.embedding=ordered", "model.d_model=3")[0].config
    model = build_model(cfg, make_task(cfg, "cpu"))
    V = cfg.task.vocab
    E = model.embed.weight.detach()
    assert torch.equal(E[:, 0], torch.arange(V, dtype=E.dtype)) and not E[:, 1:].any()
    assert not model.embed.weight.requires_grad
    learned = build_model(_specs("model.d_model=3")[0].config, make_task(cfg, "cpu"))
    for (name, p), (_, q) in zip(model.named_parameters(), learned.named_parameters()):
        if name != "embed.weight":
            assert torch.equal(p, q), name  # the same seeded draws for everything else


def test_training_leaves_the_ordered_embedding_where_it_is(tmp_path: Path):
    """Two runs (V 16 and 32) trained as one stack with Adam: the stored final embeddings are exactly the ordered
    ones, while the same runs with a learned embedding move theirs."""
    from sparse_tui.lifecycle import runner

    store = RunStore(tmp_path / "runs")
    for emb in ("ordered", "learned"):
        specs = _specs(f"model.embedding={emb}", "sweep.task.vocab=[16, 32]")
        batch, ids = store.create_runs(specs)
        runner.run_batch(store, batch, LocalExecutor(), workers=1, group=8)
        for rid, V in zip(ids, (16, 32)):
            assert store.get(rid).status == "finished"
            E = store.array(rid, "embed")
            ordered = np.arange(V, dtype=np.float32)[:, None]
            assert np.array_equal(E, ordered) == (emb == "ordered"), (emb, V)


@pytest.mark.parametrize("sets, message", [
    (["model.embedding=ordered", "train.optimizer=adamw", "train.weight_decay=0.01"], "train.weight_decay"),
    (["model.embedding=diagonal"], "model.embedding"),
])
def test_an_ordered_embedding_that_cannot_hold_is_refused(sets, message):
    with pytest.raises(PresetError, match=message):
        _specs(*sets)


def test_a_vector_task_cannot_have_an_ordered_embedding():
    with pytest.raises(PresetError, match="model.embedding: 'ordered' needs a token task"):
        load_preset(ROOT / "presets" / "paper_fig15_adam_cpu.toml",
                    ["model.embedding=ordered"])
