"""Evaluation metrics: loss, accuracy, perplexity, attention probes and entropy, toy-model projections.

Names follow docs/ARCHITECTURE.md. Attention probes read the attention probabilities that the evaluation forward
pass returns (no extra pass):

* ``attn/L{l}/H{h}/relevant`` — mass from the readout (last) position onto the relevant position(s) (linreg: the
  relevant token(s), paper Fig. 1b α; nearest: the closest token).
* recall (paper Fig. 17): ``select`` — query (last position) → the relevant value token(s); ``copy`` — the relevant
  value token → its key (the previous position), the first layer of an induction head.
* ``attn/entropy/L{l}`` — entropy in nats of the readout position's attention, averaged over heads and sequences
  (log L at uniform attention, 0 when fully sparse).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from sparse_tui.presets.resources import EVAL_ATTN_ELEMENTS
from sparse_tui.presets.schema import task_kind
from sparse_tui.tasks.base import Batch

# Upper bound on attention-probability elements materialised per evaluation chunk (about 256 MB in float32): the
# memory model's (resources.EVAL_ATTN_ELEMENTS), for one model or a whole stack.
_ATTN_BUDGET = EVAL_ATTN_ELEMENTS


def loss_fn(out: Tensor, y: Tensor, classification: bool) -> Tensor:
    """Cross-entropy for classification; 0.5 * ||y - y*||^2 averaged over the batch otherwise (paper App. A.2)."""
    if classification:
        return F.cross_entropy(out, y)
    return 0.5 * ((out - y) ** 2).sum(-1).mean()


def _attn_elements(model: torch.nn.Module, seq_len: int) -> int:
    """Attention probabilities one sequence materialises in an evaluation (all layers and heads; a stack: of all
    its models). A Transformer's or a stack's from its config; the toy model has one layer of one head."""
    cfg = getattr(model, "cfg", None)
    return max(1, getattr(model, "M", 1) * (cfg.n_layers * cfg.n_heads if cfg is not None else 1) * seq_len ** 2)


def eval_chunk_size(model: torch.nn.Module, n: int, seq_len: int) -> int:
    """Sequences per evaluation chunk so that the attention maps of all layers and heads (of every model of a
    stack) fit the budget."""
    return max(1, min(n, _ATTN_BUDGET // _attn_elements(model, seq_len)))


def _slice(batch: Batch, i: int, j: int) -> Batch:
    s = lambda t: None if t is None else t[i:j]  # noqa: E731
    return Batch(batch.x[i:j], batch.y[i:j], batch.relevant[i:j], s(batch.copy_q), s(batch.copy_k))


def _accumulate(sums: dict[str, Tensor], out: Tensor, attn, b: Batch, probe: str, classification: bool) -> None:
    """Add one chunk's sums (loss, accuracy, probes, entropy) to ``sums``: ``out`` [m, C], ``attn`` per layer
    [m, H, Lq, L] (or None), ``b`` the chunk's labels with ``relevant`` / ``copy_q`` / ``copy_k`` in the
    attention's position coordinates (left-padded in a stack)."""

    def add(name: str, value: Tensor) -> None:
        sums[name] = sums[name] + value if name in sums else value

    m = len(b)
    if classification:
        add("test/loss", F.cross_entropy(out, b.y, reduction="sum"))
        add("test/acc", (out.argmax(-1) == b.y).float().sum())
    else:
        add("test/loss", 0.5 * ((out - b.y) ** 2).sum())
    rel = b.relevant.to(torch.float32)  # [m, L]
    for li, a in enumerate(attn, start=1):
        if a is None:
            continue
        L = a.shape[-1]
        row = a[:, :, -1, :].float()  # readout position: [m, H, L]
        add(f"attn/L{li}/{probe}", (row * rel[:, None, :]).sum(-1).sum(0))  # per head, summed over seqs
        ent = -(row * torch.log(row.clamp_min(1e-30))).sum(-1)  # [m, H]
        add(f"attn/entropy/L{li}", ent.mean(1).sum())
        if b.copy_q is not None and b.copy_k is not None:
            lq = a.shape[2]
            qi = b.copy_q - (L - lq)  # index among the computed query rows
            ok = (qi >= 0) & (b.copy_q >= 0)
            if bool(ok.any()):
                idx = torch.arange(m, device=a.device)[ok]
                vals = a[idx, :, qi[ok], b.copy_k[ok]].float()  # [k, H]
                add(f"attn/L{li}/copy", vals.sum(0))
                add(f"attn/L{li}/copy_n", torch.tensor(float(idx.numel()), device=a.device))


def _finish(sums: dict[str, Tensor], n: int, classification: bool) -> dict[str, float]:
    metrics: dict[str, float] = {}
    for name, total in sums.items():
        if name.endswith("copy_n"):
            continue
        if name.endswith("/copy"):
            cnt = float(sums[name + "_n"])
            per_head = (total / cnt).tolist()
        else:
            per_head = (total / n).tolist() if total.ndim else float(total) / n
        if isinstance(per_head, list):
            base, kind = name.rsplit("/", 1)
            for h, v in enumerate(per_head):
                metrics[f"{base}/H{h}/{kind}"] = v
            metrics[name] = sum(per_head) / len(per_head)
        else:
            metrics[name] = per_head
    if classification:
        metrics["test/ppl"] = math.exp(min(metrics["test/loss"], 700.0))
    return metrics


@torch.no_grad()
def evaluate(model: torch.nn.Module, batch: Batch, kind: str, classification: bool) -> dict[str, float]:
    """All evaluation metrics of ``model`` on ``batch`` (the fixed test set of a task of kind ``kind``), computed in
    memory-bounded chunks."""
    n = len(batch)
    chunk = eval_chunk_size(model, n, batch.x.shape[1])
    sums: dict[str, Tensor] = {}
    probe = task_kind(kind).probes[0]  # the readout's mass on ``relevant`` (presets.TaskKind.probes)
    for i in range(0, n, chunk):
        b = _slice(batch, i, i + chunk)
        out, attn = model(b.x)
        _accumulate(sums, out, attn, b, probe, classification)
    return _finish(sums, n, classification)


def _padded_labels(b: Batch, L: int) -> Batch:
    """A member's test labels in its stack's position coordinates: sequences left-padded to ``L``."""
    off = L - b.relevant.shape[1]
    if not off:
        return b
    shift = lambda t: None if t is None else torch.where(t >= 0, t + off, t)  # noqa: E731
    return Batch(b.x, b.y, F.pad(b.relevant, (off, 0)), shift(b.copy_q), shift(b.copy_k))


@torch.no_grad()
def evaluate_stack(stack: torch.nn.Module, x: Tensor, tests: list[Batch], which: list[int], kind: str,
                   classification: bool) -> dict[int, dict[str, float]]:
    """The metrics of members ``which`` of ``stack`` (models/stack.py) from one forward of the whole stack per
    chunk of test sequences: ``x`` the members' test inputs stacked as for training ([M, n, L, ...], left-padded),
    ``tests`` each member's own test batch. Equal to ``evaluate`` of each member's own module within float rounding
    (tests/test_batched_eval.py); members not in ``which`` (ended runs) ride along in the forward."""
    n = x.shape[1]
    chunk = eval_chunk_size(stack, n, x.shape[2])
    probe = task_kind(kind).probes[0]
    sums: dict[int, dict[str, Tensor]] = {i: {} for i in which}
    labels = {i: _padded_labels(tests[i], x.shape[2]) for i in which}
    for j in range(0, n, chunk):
        out, attn = stack(x[:, j:j + chunk], need_attn=True)
        for i in which:
            C = stack.outs[i] if hasattr(stack, "outs") else out.shape[-1]  # its own outputs (padded: -inf / 0)
            _accumulate(sums[i], out[i, :, :C], [None if a is None else a[i] for a in attn],
                        _slice(labels[i], j, j + chunk), probe, classification)
    return {i: _finish(sums[i], n, classification) for i in which}


@torch.no_grad()
def toy_metrics(model: torch.nn.Module, task) -> dict[str, float]:
    """Toy model (paper Eq. 2): w = <W*, W>_F / ||W*||_F (§2.2 footnote 1) and α, the attention on one relevant
    token (Eq. 9), averaged over the relevant positions of the test set."""
    w_star = task.w_star.to(model.W.device, torch.float32)
    W = model.W[:, : w_star.shape[1]].float()
    w = float((W * w_star).sum() / w_star.norm())
    att = torch.softmax(model.a.float(), 0)
    rel = task.test_batch(1).relevant[0].to(att.device)
    alpha = float(att[rel].mean()) if bool(rel.any()) else float("nan")
    return {"toy/w": w, "toy/alpha": alpha}
