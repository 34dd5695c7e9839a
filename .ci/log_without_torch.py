"""The logging calls of examples/copy_first_token.py, without torch (numpy numbers and arrays instead of tensors):
used by .ci/installed in a venv without torch. Three runs of the example's group, T = 16, 32, 64, whose test/acc
crosses 0.5 at 3 T; ``sparse-tui fit --preset copy-first --vars T`` then fits plateau ~ T^1.

    python .ci/log_without_torch.py RUNS_DIR
"""

from __future__ import annotations

import sys

import numpy as np

import sparse_tui

runs_dir = sys.argv[1]
for T in (16, 32, 64):
    config = {"task": {"name": "copy-first", "T": T, "vocab": 16}, "model": {"d_model": 32, "n_layer": 1, "n_head": 1},
              "train": {"lr": 3e-4, "batch_size": 64, "steps": 4 * T, "optimizer": "adamw"}, "seed": 0}
    with sparse_tui.init(name=f"T={T} seed=0", group="copy-first", config=config, runs_dir=runs_dir,
                         plateau={"metric": "test/acc", "mode": "above", "value": 0.5}, tags=["example"],
                         total_steps=4 * T, device="cpu") as run:
        rng = np.random.default_rng(T)
        tokens = rng.integers(0, 16, size=(4, T))
        for step in range(0, 4 * T + 1, 4):
            acc = np.float32(0.06 if step < 3 * T else 0.99)
            run.log({"test/loss": float(np.log(16)) * (1.0 - acc), "test/acc": acc, "attn/L1/relevant": acc}, step=step)
            run.log({"train/loss": np.float64(2.77 / (1 + step))}, step=step)
            if step in (0, 4 * T):
                maps = rng.random((1, 4, T, T)).astype(np.float32)
                run.log_attention({"L1": maps / maps.sum(-1, keepdims=True)}, step=step, tokens=tokens,
                                  relevant=np.eye(T, dtype=int)[[0] * 4])
print(f"logged 3 runs into {runs_dir} ({'with' if 'torch' in sys.modules else 'without'} torch)")
sys.exit(1 if "torch" in sys.modules else 0)
