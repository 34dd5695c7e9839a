"""Matmul FLOPs of a training step, of one run or of a stack (padding included): what the sweep scheduler's cost
line (training/scheduler.py) and the GPU calibration (training/calibration.py) count. A module of its own, below
both: the scheduler imports the training loop (to time steps) and the loop records calibrations."""

from __future__ import annotations

from sparse_tui.presets.resources import dims
from sparse_tui.presets.schema import RunConfig


def _shape(cfg: RunConfig) -> dict[str, int]:
    """The sizes that set a Transformer's training FLOPs (``step_flops``); per run, or padded over a stack."""
    m, td = cfg.model, dims(cfg)
    kind = m.input if m.input != "auto" else ("embedding" if td["vocab"] else "linear")
    return {"D": m.d_model, "Q": m.n_heads * (m.d_qk or m.d_model // m.n_heads), "V": m.d_model,
            "F": m.mlp_factor * m.d_model if m.mlp else 0, "L": td["seq_len"],
            "in": 0 if kind == "embedding" else (td["in_dim"] or 0), "out": td["out_dim"]}


def step_flops(cfg: RunConfig, shape: dict[str, int] | None = None) -> float:
    """Matmul FLOPs of one training step (forward + backward = 3x forward) of ``cfg``'s model, at its own shape or
    at ``shape`` (the padded shape of a stack: ``stack_flops``). Toy models: their one weighted sum and map."""
    td = dims(cfg)
    bs = cfg.train.batch_size
    if cfg.model.kind != "transformer":
        return 3.0 * bs * 2 * (td["seq_len"] * (td["in_dim"] or 1) + (td["in_dim"] or 1) * td["out_dim"])
    s = shape or _shape(cfg)
    D, Q, V, F, L = s["D"], s["Q"], s["V"], s["F"], s["L"]
    n_layers = cfg.model.n_layers
    fwd = 2 * L * s["in"] * D  # a linear input map (an embedding lookup costs no matmul)
    for i in range(n_layers):
        n_q = 1 if i == n_layers - 1 else L  # the last layer computes the readout position only
        fwd += 2 * L * D * (Q + V)  # keys and values of every position
        fwd += 2 * n_q * D * (Q + V)  # queries and the output projection
        fwd += 2 * n_q * L * (Q + V)  # scores and the weighted values
        fwd += 4 * n_q * D * F  # MLP
    fwd += 2 * D * s["out"]
    return 3.0 * bs * fwd


def stack_flops(cfgs: list[RunConfig]) -> float:
    """FLOPs of one step of ``cfgs`` as one stack: every member at the largest size of each dimension."""
    if cfgs[0].model.kind != "transformer":
        return sum(step_flops(c) for c in cfgs)
    shapes = [_shape(c) for c in cfgs]
    padded = {k: max(sh[k] for sh in shapes) for k in shapes[0]}
    return len(cfgs) * step_flops(cfgs[0], padded)
