"""A run's attention snapshots (``eval.snapshot_every``): at which steps, and the maps and token roles of the
first test examples, from a lone model (``attention_snapshot``) or a stack's batched pass (training/loop.py)."""

from __future__ import annotations

import torch

from sparse_tui.presets.loading import eval_steps
from sparse_tui.presets.schema import RunConfig


def snapshot_steps(cfg: RunConfig) -> set[int]:
    ev = eval_steps(cfg)
    if cfg.eval.snapshot_every <= 0:
        picks = {0, cfg.train.steps}
        # plus a few evenly spaced evaluation steps so the heatmap can be stepped through training
        for k in range(1, 4):
            picks.add(ev[round(k * (len(ev) - 1) / 4)])
        return picks
    return {s for s in ev if s % cfg.eval.snapshot_every == 0} | {cfg.train.steps}


@torch.no_grad()
def attention_snapshot(model, batch, n: int) -> tuple[dict, dict]:
    """Full attention maps (all query rows) of the first ``n`` test sequences of one model, for the heatmap panel
    (a stack's members: ``Prepared.snapshots``, from one forward of the stack)."""
    x = batch.x[:n]
    prev = getattr(model, "readout_only", None)
    if prev is not None:
        model.readout_only = False
    try:
        _, attn = model(x)
    finally:
        if prev is not None:
            model.readout_only = prev
    return snapshot_maps(attn, x.shape[1]), snapshot_meta(batch, n)


def snapshot_maps(attn: list[torch.Tensor], L: int) -> dict:
    """``{'L1': [H, E, Lq, L], ...}`` from each layer's probabilities [E, H, Lq, L] (a model's own positions)."""
    maps = {}
    for li, a in enumerate(attn, start=1):
        a = a.float()
        if L > 160:  # long sequences: keep the readout row only (a T x T map would not fit a terminal anyway)
            a = a[:, :, -1:, :]
        maps[f"L{li}"] = a.permute(1, 0, 2, 3).cpu().numpy()  # [H, E, Lq, L]
    return maps


def snapshot_meta(batch, n: int) -> dict:
    x = batch.x[:n]
    meta = {"seq_len": x.shape[1], "relevant": batch.relevant[:n].int().cpu().tolist()}
    if x.dtype == torch.long:
        meta["tokens"] = x.cpu().tolist()
    if batch.copy_q is not None:
        meta["copy_q"] = batch.copy_q[:n].cpu().tolist()
        meta["copy_k"] = batch.copy_k[:n].cpu().tolist()
    return meta
