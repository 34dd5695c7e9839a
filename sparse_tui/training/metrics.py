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
from sparse_tui.presets.tasks import task_kind
from sparse_tui.tasks.base import Batch

# Upper bound on attention-probability elements materialised per evaluation chunk (about 256 MB in float32): the
# memory model's (resources.EVAL_ATTN_ELEMENTS), for one model or a whole stack.
_ATTN_BUDGET = EVAL_ATTN_ELEMENTS


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
    """Sequences i to j of labels stacked with a leading [W] (``_stacked``)."""
    s = lambda t: None if t is None else t[:, i:j]  # noqa: E731
    return Batch(s(batch.x), s(batch.y), s(batch.relevant), s(batch.copy_q), s(batch.copy_k))


def _accumulate(sums: dict[str, Tensor], out: Tensor, attn, b: Batch, probe: str, classification: bool) -> None:
    """Add one chunk's sums (loss, accuracy, probes, entropy) to ``sums``, for W models at once (the members of a
    stack being evaluated, or one model as W = 1): ``out`` [W, m, C], ``attn`` per layer [W, m, H, Lq, L], ``b``
    the chunk's labels stacked the same way (``y`` [W, m] or [W, m, C], ``relevant`` [W, m, L], ``copy_q`` /
    ``copy_k`` [W, m]) in the attention's position coordinates (left-padded in a stack). Each sum has a leading
    [W]. The number of operations does not depend on W, and nothing is read back to the host here (the copy
    probe's selection is a mask, not a ``bool()``)."""

    def add(name: str, value: Tensor) -> None:
        sums[name] = sums[name] + value if name in sums else value

    W, m = out.shape[0], out.shape[1]
    if classification:
        ce = F.cross_entropy(out.reshape(W * m, -1), b.y.reshape(W * m), reduction="none")
        add("test/loss", ce.view(W, m).sum(1))
        add("test/acc", (out.argmax(-1) == b.y).float().sum(1))
    else:
        add("test/loss", 0.5 * ((out - b.y) ** 2).sum(-1).sum(-1))
    rel = b.relevant.to(torch.float32)  # [W, m, L]
    for li, a in enumerate(attn, start=1):
        L = a.shape[-1]
        row = a[:, :, :, -1, :].float()  # readout position: [W, m, H, L]
        add(f"attn/L{li}/{probe}", (row * rel[:, :, None, :]).sum(-1).sum(1))  # [W, H], summed over seqs
        ent = -(row * torch.log(row.clamp_min(1e-30))).sum(-1)  # [W, m, H]
        add(f"attn/entropy/L{li}", ent.mean(2).sum(1))
        if b.copy_q is not None and b.copy_k is not None:
            lq = a.shape[3]
            qi = b.copy_q - (L - lq)  # index among the computed query rows
            ok = (qi >= 0) & (b.copy_q >= 0)  # [W, m]
            wi = torch.arange(W, device=a.device)[:, None]
            mi = torch.arange(m, device=a.device)[None, :]
            vals = a[wi, mi, :, qi.clamp_min(0), b.copy_k.clamp_min(0)].float()  # [W, m, H]
            add(f"attn/L{li}/copy", (vals * ok[:, :, None]).sum(1))
            add(f"attn/L{li}/copy_n", ok.sum(1).to(torch.float32))


def _finish(sums: dict[str, Tensor], n: int, classification: bool) -> list[dict[str, float]]:
    """The metrics of each of the W models of ``sums`` (each sum [W] or [W, H]), read back to the host in one
    transfer."""
    names = list(sums)
    W = sums[names[0]].shape[0]
    flat = torch.cat([sums[k].reshape(W, -1).double() for k in names], 1).cpu().tolist()  # the one transfer
    widths = [sums[k].reshape(W, -1).shape[1] for k in names]
    out = []
    for row in flat:
        vals, i = {}, 0
        for k, w in zip(names, widths):
            vals[k], i = row[i:i + w], i + w
        metrics: dict[str, float] = {}
        for name in names:
            if name.endswith("copy_n"):
                continue
            if name.endswith("/copy"):
                cnt = vals[name + "_n"][0]
                if not cnt:  # no test sequence has a copy position the computed rows reach
                    continue
                per_head = [v / cnt for v in vals[name]]
            else:
                per_head = [v / n for v in vals[name]]
            if sums[name].dim() > 1:
                base, kind = name.rsplit("/", 1)
                for h, v in enumerate(per_head):
                    metrics[f"{base}/H{h}/{kind}"] = v
                metrics[name] = sum(per_head) / len(per_head)
            else:
                metrics[name] = per_head[0]
        if classification:
            metrics["test/ppl"] = math.exp(min(metrics["test/loss"], 700.0))
        out.append(metrics)
    return out


def _stacked(labels: list[Batch], width: int | None = None) -> Batch:
    """W models' test labels as one batch with a leading [W] (same number of sequences); regression targets
    zero-padded to ``width`` outputs (the stack's: a padded output is 0 against a 0 target)."""
    ys = [b.y for b in labels]
    if width is not None and ys[0].is_floating_point() and ys[0].dim() == 2:
        ys = [F.pad(y, (0, width - y.shape[1])) for y in ys]
    st = lambda ts: None if ts[0] is None else torch.stack(ts)  # noqa: E731
    y = torch.stack(ys)
    return Batch(y, y, st([b.relevant for b in labels]),  # x: unused here
                 st([b.copy_q for b in labels]), st([b.copy_k for b in labels]))


@torch.no_grad()
def evaluate(model: torch.nn.Module, batch: Batch, kind: str, classification: bool) -> dict[str, float]:
    """All evaluation metrics of ``model`` on ``batch`` (the fixed test set of a task of kind ``kind``), computed in
    memory-bounded chunks."""
    n = len(batch)
    chunk = eval_chunk_size(model, n, batch.x.shape[1])
    sums: dict[str, Tensor] = {}
    probe = task_kind(kind).probes[0]  # the readout's mass on ``relevant`` (presets.TaskKind.probes)
    labels = _stacked([batch])
    for i in range(0, n, chunk):
        out, attn = model(batch.x[i:i + chunk])
        _accumulate(sums, out.unsqueeze(0), [a.unsqueeze(0) for a in attn],
                    _slice(labels, i, i + chunk), probe, classification)
    return _finish(sums, n, classification)[0]


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
    (tests/test_batched_eval.py); members not in ``which`` (ended runs) ride along in the forward.

    The sums of all members ``which`` are accumulated together (``_accumulate`` on [W, ...] tensors: per chunk as
    many operations as for one member, so a long-sequence stack, chunked to a few sequences by the memory budget,
    costs no more operations than evaluating its members one at a time), and read back in one transfer."""
    n, L = x.shape[1], x.shape[2]
    chunk = eval_chunk_size(stack, n, L)
    probe = task_kind(kind).probes[0]
    labels = _stacked([_padded_labels(tests[i], L) for i in which], getattr(stack, "C", None))
    pick = None if list(which) == list(range(x.shape[0])) else torch.tensor(which, device=x.device)
    sums: dict[str, Tensor] = {}
    for j in range(0, n, chunk):
        out, attn = stack(x[:, j:j + chunk], need_attn=True)
        if pick is not None:
            out = out.index_select(0, pick)
            attn = [a.index_select(0, pick) for a in attn]
        _accumulate(sums, out, attn, _slice(labels, j, j + chunk), probe, classification)
    return dict(zip(which, _finish(sums, n, classification)))


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
