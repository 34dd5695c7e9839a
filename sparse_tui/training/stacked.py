"""Stacked training: M runs whose tensors share shapes, trained as one model with a leading model dimension.

The runs of a group differ in anything that leaves the shapes alone: seed, learning rate and its schedule, gradient
clipping, weight decay, data (train_size, B, p, ...), init scale. Each run keeps its own task (its own seeded data
streams on the device), its own initialisation (``models.build_model``), its own fixed test set, metrics, plateau
detector, attention snapshots and store record, so that a run trained in a group gives the same curve as the same
run trained alone by ``trainer.train_run`` (to float tolerance: batched matmuls round differently).

How the step works (same code on CPU and GPU; ``device`` is an argument):

* parameters: every parameter of the run's module is stacked to ``[M, *shape]`` (one leaf tensor per name);
* forward: ``torch.func.vmap`` over ``torch.func.functional_call`` of one template module (the model's forward is a
  pure function of its parameters, see models/transformer.py); each model sees its own batch ``x[m]``; the loss
  of each model is the trainer's ``loss_fn``; the sum of the M losses is differentiated once, which gives every
  model exactly its own gradient;
* optimiser: Adam / AdamW / SGD written out on the stacked tensors with a per-model learning rate (a ``[steps, M]``
  table built once, so the schedule costs no host work per step), per-model weight decay and **per-model**
  gradient-norm clipping (the norm of each model's own gradient, as ``clip_grad_norm_`` computes it alone; never a
  norm across models);
* no host synchronisation per step except on CPU, where (as in ``train_run``) the loss is checked for NaN every
  step because a sync costs nothing there; on GPUs the check happens at evaluations;
* evaluation: at a run's evaluation steps its slice of the stack is copied into its own module and the trainer's
  ``evaluate`` / ``attention_snapshot`` are called on it, so metrics come from the same code as a lone run.

The bookkeeping of a run (evaluation, plateau, divergence, cancel, summary) mirrors ``trainer.train_run`` line by
line; tests/test_stacked.py compares the two.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch.func import functional_call, vmap

from sparse_tui.presets import RunConfig
from sparse_tui.training.metrics import evaluate, loss_fn, toy_metrics
from sparse_tui.training.plateau import PlateauDetector
from sparse_tui.training.trainer import (
    RunLogger,
    RunResult,
    attention_snapshot,
    cpu_float_mode,
    eval_steps,
    lr_factor,
    snapshot_steps,
)

# Config fields that may differ between the runs of one stack (everything else must be equal: see group_key).
PER_MODEL_FIELDS = (
    "seed",
    "train.lr",
    "train.warmup_steps",
    "train.schedule",
    "train.min_lr_ratio",
    "train.grad_clip",
    "train.weight_decay",
)


def task_dims(cfg: RunConfig) -> dict:
    """Shapes the task gives the model, from the config alone (no task is built)."""
    t = cfg.task
    if t.kind == "recall":
        return {"seq_len": 2 * t.n_pairs + 1, "vocab": t.n_tokens, "in_dim": None, "out_dim": t.n_tokens}
    if t.kind == "nearest":
        return {"seq_len": t.context, "vocab": t.vocab, "in_dim": None, "out_dim": t.vocab}
    return {"seq_len": t.T, "vocab": None, "in_dim": t.d + int(t.indicator), "out_dim": t.d}


def group_key(cfg: RunConfig) -> tuple | None:
    """Runs with equal keys can be trained in one stack; None = never stacked (the ODE 'model' is integrated)."""
    if cfg.model.kind == "ode":
        return None
    m = cfg.model.model_dump(mode="json")
    for k in ("init_std", "init", "init_scale", "pos_init_std"):  # initial values, not shapes
        m.pop(k, None)
    t = cfg.train
    return (
        cfg.task.kind,
        tuple(sorted(task_dims(cfg).items())),
        tuple(sorted(m.items())),
        t.optimizer,
        t.beta1,
        t.beta2,
        t.momentum,
        t.batch_size,
        t.steps,
        t.device,
    )


def stackable(cfgs: list[RunConfig]) -> bool:
    keys = {group_key(c) for c in cfgs}
    return len(keys) == 1 and None not in keys


# --------------------------------------------------------------------------------------------------------------
# The stacked optimiser
# --------------------------------------------------------------------------------------------------------------


class StackedOptimizer:
    """Adam / AdamW / SGD over stacked parameters ``[M, ...]`` with per-model lr, weight decay and grad clipping.

    The update of model m is the torch.optim update of that model alone (same formulas, same order of operations
    up to rounding): Adam as in ``torch.optim.Adam`` (L2 weight decay added to the gradient), AdamW decoupled
    (``p *= 1 - lr * wd``), SGD with momentum and dampening 0 (the first step copies the gradient).
    """

    def __init__(self, params: list[torch.Tensor], cfgs: list[RunConfig], device: torch.device):
        t0 = cfgs[0].train
        self.params = params
        self.M = len(cfgs)
        self.kind = t0.optimizer
        self.b1, self.b2, self.momentum, self.eps = t0.beta1, t0.beta2, t0.momentum, 1e-8
        f32 = dict(device=device, dtype=torch.float32)
        self.wd = torch.tensor([c.train.weight_decay for c in cfgs], **f32)
        self.any_wd = bool((self.wd > 0).any())
        clip = [c.train.grad_clip for c in cfgs]
        self.clip = torch.tensor([c if c > 0 else math.inf for c in clip], **f32) if any(clip) else None
        self.t = 0
        self.state1 = [torch.zeros_like(p) for p in params] if self.kind != "sgd" or self.momentum else None
        self.state2 = [torch.zeros_like(p) for p in params] if self.kind != "sgd" else None

    def _view(self, v: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return v.view(self.M, *([1] * (p.dim() - 1)))

    @torch.no_grad()
    def clip_(self) -> None:
        """Per-model ``clip_grad_norm_``: each model's gradient norm over all its parameters, its own max norm."""
        if self.clip is None:
            return
        grads = [p.grad for p in self.params]
        per_param = torch.stack([g.reshape(self.M, -1).norm(dim=1) for g in grads], dim=1)  # [M, P]
        total = per_param.norm(dim=1)  # [M]
        coef = (self.clip / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(self._view(coef, g))

    @torch.no_grad()
    def step(self, lr: torch.Tensor) -> None:
        """One update with learning rates ``lr`` ([M], on the device)."""
        self.t += 1
        for i, p in enumerate(self.params):
            g = p.grad
            lr_v = self._view(lr, p)
            wd_v = self._view(self.wd, p) if self.any_wd else None
            if self.kind == "sgd":
                if wd_v is not None:
                    g = g.add(p * wd_v)
                if self.momentum:
                    buf = self.state1[i]
                    if self.t == 1:
                        buf.copy_(g)
                    else:
                        buf.mul_(self.momentum).add_(g)
                    g = buf
                p.sub_(g * lr_v)
                continue
            if self.kind == "adamw" and wd_v is not None:
                p.mul_(1 - lr_v * wd_v)
            elif wd_v is not None:
                g = g.add(p * wd_v)
            m, v = self.state1[i], self.state2[i]
            m.lerp_(g, 1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            bc1 = 1 - self.b1**self.t
            bc2_sqrt = math.sqrt(1 - self.b2**self.t)
            denom = (v.sqrt() / bc2_sqrt).add_(self.eps)
            p.sub_((m / denom) * (lr_v / bc1))

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None


# --------------------------------------------------------------------------------------------------------------
# One run inside a stack: the bookkeeping of trainer.train_run
# --------------------------------------------------------------------------------------------------------------


@dataclass
class _Member:
    index: int
    cfg: RunConfig
    logger: RunLogger
    task: object
    model: torch.nn.Module
    test: object
    ev_steps: set
    snaps: set
    det: PlateauDetector
    history: dict = field(default_factory=dict)
    best: dict = field(default_factory=dict)
    last: dict = field(default_factory=dict)
    n_since: int = 0
    result: RunResult | None = None


def train_stacked(
    cfgs: list[RunConfig],
    *,
    device: torch.device | str = "cpu",
    loggers: list[RunLogger] | None = None,
    should_stop: Callable[[], str | None] | None = None,
    on_done: Callable[[int, RunResult], None] | None = None,
    on_step: Callable[[int], None] | None = None,
    fused_attention: bool | None = None,
) -> list[RunResult]:
    """Train the runs ``cfgs`` (all with one ``group_key``) together; return one ``RunResult`` per run.

    ``on_done(i, result)`` is called as soon as run i ends (a run that diverges or is cancelled ends before the
    others), so its store record is final at once. ``fused_attention``: training forward through
    ``scaled_dot_product_attention`` (default: on CUDA; on CPUs vmap has no batching rule for the fused kernel and
    falls back to a loop over models). Evaluation always computes the attention probabilities. The other arguments
    are those of ``train_run``.
    """
    from sparse_tui.models import build_model
    from sparse_tui.tasks import make_task

    if not cfgs:
        return []
    if not stackable(cfgs):
        raise ValueError("train_stacked: the runs do not share one group key (shapes / optimiser / steps)")
    device = torch.device(device) if isinstance(device, str) else device
    with cpu_float_mode(all(c.train.flush_denormal for c in cfgs), device):
        return _train_stacked(cfgs, device, loggers, should_stop, on_done, on_step, fused_attention)


def _train_stacked(cfgs, device, loggers, should_stop, on_done, on_step, fused_attention) -> list[RunResult]:
    """``train_stacked`` inside the run's CPU float mode."""
    from sparse_tui.models import build_model
    from sparse_tui.tasks import make_task

    loggers = loggers or [RunLogger() for _ in cfgs]
    M = len(cfgs)
    steps = cfgs[0].train.steps
    bs = cfgs[0].train.batch_size

    members: list[_Member] = []
    for i, cfg in enumerate(cfgs):
        torch.manual_seed(cfg.seed)  # as train_run does (nothing here draws from the global generator)
        task = make_task(cfg, device)
        model = build_model(cfg, task).to(device)
        test = task.test_batch(cfg.eval.test_size)
        det = PlateauDetector(mode=cfg.plateau.mode, value=cfg.plateau.value)
        members.append(
            _Member(i, cfg, loggers[i], task, model, test, set(eval_steps(cfg)), snapshot_steps(cfg), det)
        )
    classification = members[0].task.classification

    # The stack: one leaf [M, *shape] per parameter name; buffers (mask, sinusoidal positions) are shared.
    template = copy.deepcopy(members[0].model)  # its parameters are never used: functional_call swaps them in
    if hasattr(template, "need_attn"):
        template.need_attn = not (device.type == "cuda" if fused_attention is None else fused_attention)
        template.attn_kernel = "sdpa"  # _AttentionCore has no vmap rule; the CPU stack keeps the probabilities path
    names = [n for n, _ in template.named_parameters()]
    stacked = {
        n: torch.stack([dict(mb.model.named_parameters())[n].detach() for mb in members]).requires_grad_(True)
        for n in names
    }
    buffers = dict(template.named_buffers())
    params = [stacked[n] for n in names]
    opt = StackedOptimizer(params, cfgs, device)
    lr_table = torch.tensor(
        [[c.train.lr * lr_factor(s, c) for c in cfgs] for s in range(1, steps + 1)],
        device=device,
        dtype=torch.float32,
    )  # [steps, M]

    def one_loss(p: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out, _ = functional_call(template, (p, buffers), (x,))
        return loss_fn(out, y, classification)

    stacked_loss = vmap(one_loss, in_dims=(0, 0, 0))
    _trial_step(template, stacked, buffers, members, bs, classification, device)

    sync_every = 1 if device.type == "cpu" else min(c.eval.every for c in cfgs)
    t0 = time.perf_counter()
    loss_sum = torch.zeros(M, device=device)

    def load(mb: _Member) -> None:
        with torch.no_grad():
            for n, p in mb.model.named_parameters():
                p.copy_(stacked[n][mb.index])

    def do_eval(mb: _Member, step: int, loss_host: list[float]) -> dict[str, float]:
        cfg, model = mb.cfg, mb.model
        load(mb)
        model.eval()
        vals = evaluate(model, mb.test, mb.task.kind, mb.task.classification)
        if cfg.model.kind == "toy":
            vals.update(toy_metrics(model, mb.task))
        model.train()
        if mb.n_since:
            vals["train/loss"] = loss_host[mb.index] / mb.n_since
        mb.n_since = 0
        vals["lr"] = cfg.train.lr * lr_factor(max(step, 1), cfg)
        mb.logger.metrics(step, vals)
        if step in mb.snaps:
            maps, meta = attention_snapshot(model, mb.test, cfg.eval.snapshot_examples)
            mb.logger.attention(step, maps, meta)
        mb.det.update(step, vals.get(cfg.plateau.metric, math.nan))
        for k, v in vals.items():
            mb.history.setdefault(k, []).append(v)
            if k.endswith("loss") and math.isfinite(v):
                mb.best[k] = min(mb.best.get(k, math.inf), v)
            elif k.endswith("acc") and math.isfinite(v):
                mb.best[k] = max(mb.best.get(k, -math.inf), v)
        return vals

    def end(mb: _Member, status: str, step: int, reason: str | None = None) -> None:
        elapsed = time.perf_counter() - t0
        summary = {
            "final": mb.last,
            "best": mb.best,
            "steps_done": step,
            "wall_seconds": elapsed,
            "steps_per_second": step / elapsed if elapsed > 0 else None,
            "n_params": sum(p.numel() for p in mb.model.parameters()),
            "stacked_with": M,
        }
        mb.result = RunResult(status=status, reason=reason, plateau_step=mb.det.step, summary=summary, step=step)
        if on_done is not None:
            on_done(mb.index, mb.result)

    zeros = [0.0] * M
    for mb in members:
        mb.last = do_eval(mb, 0, zeros)
        mb.logger.heartbeat(0, force=True)

    live = list(members)
    for step in range(1, steps + 1):
        batches = [mb.task.train_batch(bs) for mb in members]
        x = torch.stack([b.x for b in batches])
        y = torch.stack([b.y for b in batches])
        losses = stacked_loss(stacked, x, y)  # [M]
        opt.zero_grad()
        losses.sum().backward()
        opt.clip_()
        opt.step(lr_table[step - 1])
        loss_sum = loss_sum + losses.detach()
        for mb in live:
            mb.n_since += 1
        evaluating = [mb for mb in live if step in mb.ev_steps]
        loss_host = None
        if step % sync_every == 0 or evaluating:
            loss_host = loss_sum.tolist()
            for mb in list(live):
                if (step % sync_every == 0 or step in mb.ev_steps) and not math.isfinite(loss_host[mb.index]):
                    end(mb, "diverged", step, f"non-finite training loss at step {step}")
                    live.remove(mb)
        for mb in evaluating:
            if mb.result is None:
                mb.last = do_eval(mb, step, loss_host)
                loss_sum[mb.index] = 0.0
        if on_step is not None:
            on_step(step)
        why_all = should_stop() if should_stop is not None else None
        for mb in list(live):
            cancel = mb.logger.heartbeat(step)
            why = "cancelled" if cancel else why_all
            if why:
                end(mb, why, step, f"{why} at step {step}")
                live.remove(mb)
        if not live:
            break
    for mb in live:
        bad = [k for k in ("test/loss", "train/loss") if k in mb.last and not math.isfinite(mb.last[k])]
        if bad:
            end(mb, "diverged", steps, f"non-finite {bad[0]} at step {steps}")
        else:
            end(mb, "finished", steps)
    return [mb.result for mb in members]


# --------------------------------------------------------------------------------------------------------------
# Worker loop over a batch in the store: claim a group, train it stacked, record every run
# --------------------------------------------------------------------------------------------------------------


class GroupTooLarge(RuntimeError):
    """The trial step of a stack ran out of device memory (nothing was trained or logged)."""


def _trial_step(template, stacked, buffers, members, bs, classification, device) -> None:
    """One forward/backward on test data (no generator is touched, no parameter changes) to prove the stack fits
    the device; raises GroupTooLarge on out-of-memory. Only on CUDA (a CPU stack is never memory-limited here)."""
    if device.type != "cuda":
        return
    try:
        xs, ys = [], []
        for mb in members:
            idx = torch.arange(bs, device=device) % len(mb.test)
            xs.append(mb.test.x[idx])
            ys.append(mb.test.y[idx])

        def one(p, x, y):
            out, _ = functional_call(template, (p, buffers), (x,))
            return loss_fn(out, y, classification)

        vmap(one)(stacked, torch.stack(xs), torch.stack(ys)).sum().backward()
        torch.cuda.synchronize(device)
    except torch.cuda.OutOfMemoryError as e:
        raise GroupTooLarge(str(e)) from None
    finally:
        for p in stacked.values():
            p.grad = None


def work_stacked(
    store,
    batch_id: str,
    *,
    device: str | None = None,
    should_stop: Callable[[], str | None] | None = None,
    max_group: int | None = None,
) -> int:
    """Like ``runner.work``, but claims groups of queued runs that share a ``group_key`` (at most ``max_group``
    and as many as fit the device memory) and trains each group stacked. Returns the number of runs trained."""
    from sparse_tui.presets import config_from_json
    from sparse_tui.training.scheduler import MAX_GROUP, device_budget, group_size
    from sparse_tui.training.trainer import library_versions, resolve_device

    limit = max_group or MAX_GROUP
    n = 0
    while True:
        if should_stop is not None and should_stop():
            return n
        queued = [r for r in store.runs(batch_id=batch_id, status="queued", reap=False) if not r.cancel_requested]
        if not queued:
            return n
        first = queued[0]
        want = device or first.config.get("train", {}).get("device", "auto")
        try:
            dev = resolve_device(want)
        except RuntimeError as e:
            for rec in store.claim_runs([first.run_id], device=want, versions={}):
                store.finish(rec.run_id, "failed", reason=str(e))
            continue
        cfgs = {r.run_id: config_from_json(r.config) for r in queued}
        key = group_key(cfgs[first.run_id])
        size = 1 if key is None else group_size(cfgs[first.run_id], device_budget(dev), limit)
        pick = [first.run_id] + [r.run_id for r in queued[1:] if key is not None and group_key(cfgs[r.run_id]) == key]
        recs = store.claim_runs(pick[:size], device=str(dev), versions=library_versions(dev))
        if recs:
            _train_group(store, recs, [cfgs[r.run_id] for r in recs], dev, should_stop)
            n += len(recs)


def _train_group(store, recs, cfgs, dev, should_stop) -> None:
    """Train claimed runs (one alone via train_run, several stacked) and record each as it ends. A stack that does
    not fit the device is split in halves."""
    import traceback

    from sparse_tui.training.trainer import train_run

    done: set[int] = set()

    def finish(i: int, res: RunResult) -> None:
        done.add(i)
        store.finish(
            recs[i].run_id, res.status, reason=res.reason, plateau_step=res.plateau_step, summary=res.summary,
            step=res.step,
        )

    loggers = [RunLogger(store, r.run_id) for r in recs]
    try:
        if len(recs) == 1:
            finish(0, train_run(cfgs[0], device=dev, logger=loggers[0], should_stop=should_stop))
        else:
            train_stacked(cfgs, device=dev, loggers=loggers, should_stop=should_stop, on_done=finish)
    except GroupTooLarge:
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        half = len(recs) // 2
        _train_group(store, recs[:half], cfgs[:half], dev, should_stop)
        _train_group(store, recs[half:], cfgs[half:], dev, should_stop)
    except KeyboardInterrupt:
        for i, r in enumerate(recs):
            if i not in done:
                store.finish(r.run_id, "interrupted", reason="interrupted")
        raise
    except Exception as e:  # a crash is recorded, never lost
        tb = traceback.format_exc(limit=6)
        for i, r in enumerate(recs):
            if i not in done:
                store.finish(r.run_id, "failed", reason=f"{type(e).__name__}: {e}", summary={"traceback": tb})
        if dev.type == "cuda":
            torch.cuda.empty_cache()
