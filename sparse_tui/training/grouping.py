"""Which runs can share one stack (models/stack.py), from their configs alone.

Runs may share a stack when they differ only in what the stack handles per model or by exact padding:

* per model: seed, learning rate and its schedule, gradient clipping, weight decay, Adam betas, SGD momentum,
  initialisation, and the data (train_size, B, p, ...);
* padded (Transformers): width (``d_model``, ``d_qk``, MLP width via ``mlp_factor``), sequence length (recall's
  ``n_pairs``, nearest's ``context``, linreg's ``T``), vocabulary and vector dimensions.

Everything else separates stacks: task kind, model kind, layer and head count, the structural switches (MLP,
LayerNorm, residual, positions, input, causal, tied embeddings, a frozen previous-token head), optimiser kind, batch
size, step count, device, precision and CUDA-graph mode. Toy models (paper Eq. 2) stack only with toy models of the
same shape.
"""

from __future__ import annotations

from sparse_tui.presets.resources import dims

# Model fields that may differ inside one stack: initial values, and (Transformers) the padded widths.
_PER_MODEL_MODEL_FIELDS = ("init_std", "init", "init_scale", "pos_init_std")
_PADDED_MODEL_FIELDS = ("d_model", "d_qk", "mlp_factor")


def group_key(cfg) -> tuple | None:
    """Runs with equal keys can be trained in one stack; None = never stacked (the ODE 'model' is integrated)."""
    if cfg.model.kind == "ode":
        return None
    m = cfg.model.model_dump(mode="json")
    for k in _PER_MODEL_MODEL_FIELDS:
        m.pop(k, None)
    shapes: tuple = ()
    if cfg.model.kind == "transformer":
        for k in _PADDED_MODEL_FIELDS:
            m.pop(k, None)
        if m.get("input", "auto") == "auto":  # resolved by the task: an embedding for token tasks
            m["input"] = "embedding" if dims(cfg)["vocab"] else "linear"
    else:
        shapes = tuple(sorted(dims(cfg).items()))
    t = cfg.train
    return (
        cfg.task.kind,
        shapes,
        tuple(sorted(m.items())),
        t.optimizer,
        t.batch_size,
        t.steps,
        t.device,
        t.precision,
        t.cuda_graph,
    )


def stackable(cfgs: list) -> bool:
    keys = {group_key(c) for c in cfgs}
    return len(keys) == 1 and None not in keys


def padded_config(cfgs: list):
    """A config with the largest shape of each kind among ``cfgs`` (what each model of their stack costs)."""
    if len(cfgs) == 1 or cfgs[0].model.kind != "transformer":
        return cfgs[0]
    big = max(cfgs, key=lambda c: (c.model.d_model, dims(c)["seq_len"]))
    m = big.model.model_copy(update={
        "d_model": max(c.model.d_model for c in cfgs),
        "d_qk": max((c.model.d_qk or c.model.d_model // c.model.n_heads) for c in cfgs),
        "mlp_factor": max(c.model.mlp_factor for c in cfgs),
    })
    return big.model_copy(update={"model": m})
