"""One optimiser step for a whole stack of models (models/stack.py), with per-model hyperparameters.

Adam / AdamW / SGD on stacked parameters ``[M, ...]``. The update of model m is the ``torch.optim`` update of that
model alone: Adam adds L2 weight decay to the gradient, AdamW decays decoupled (``p *= 1 - lr wd``), SGD uses
momentum with dampening 0 (its first step copies the gradient). Per model: learning rate (``[M]``, from the
schedule table, every step), weight decay (``[M]``) and gradient-norm clipping (``[M]``: each model's own norm
over all its parameters, as ``clip_grad_norm_`` computes it alone; never a norm across models).

Two implementations of the same update:

* ``fused``: when every model has the same learning-rate schedule and weight decay (a stack of one, or a sweep
  over seeds or widths), torch's fused optimiser kernel runs over the stacked tensors: the update is elementwise, so
  it is each model's own update. One kernel instead of ~10 ops per parameter (about 1 ms per step of a small model
  on CPU, docs/PERFORMANCE.md).
* ``per-model``: otherwise the formulas are written out with ``[M]`` tensors broadcast over each parameter.

The step counter, bias corrections and learning rates live on the device (``lr`` is a device tensor the loop
copies in before each step), so the step can be captured in a CUDA graph and replayed.
"""

from __future__ import annotations

import math

import torch


def _uniform(cfgs, table: list[list[float]]) -> bool:
    """Whether every model has the same optimiser hyperparameters at every step (one fused kernel can serve)."""
    same = {(c.train.weight_decay, c.train.beta1, c.train.beta2, c.train.momentum) for c in cfgs}
    return len(same) == 1 and all(len(set(row)) == 1 for row in table)


class StackOptimizer:
    """``clip_()`` then ``step(lr)`` on the stacked parameters; ``lr`` is ``[M]`` on the device."""

    def __init__(self, params: list[torch.Tensor], cfgs: list, table: list[list[float]], device: torch.device,
                 capturable: bool = False):
        t0 = cfgs[0].train
        self.params = params
        self.M = len(cfgs)
        self.kind = t0.optimizer
        self.eps = 1e-8
        dtype = params[0].dtype if params else torch.float32
        f = dict(device=device, dtype=dtype)
        self.wd = torch.tensor([c.train.weight_decay for c in cfgs], **f)
        self.any_wd = bool((self.wd > 0).any())
        clip = [c.train.grad_clip for c in cfgs]
        self.clip = torch.tensor([c if c > 0 else math.inf for c in clip], **f) if any(clip) else None
        self.fused = _uniform(cfgs, table) and all(p.device.type in ("cpu", "cuda") for p in params)
        self.table = table
        self.capturable = capturable
        self.lr_now = torch.tensor(table[0] if table else [t0.lr] * self.M, **f)
        if self.fused:
            lr0 = self.lr_now[0].clone() if capturable else float(self.lr_now[0])
            if self.kind == "sgd":
                self.opt = torch.optim.SGD(params, lr=lr0, momentum=t0.momentum, weight_decay=t0.weight_decay,
                                           fused=True)
            else:
                cls = torch.optim.AdamW if self.kind == "adamw" else torch.optim.Adam
                self.opt = cls(params, lr=lr0, betas=(t0.beta1, t0.beta2), weight_decay=t0.weight_decay,
                               fused=True, capturable=capturable)
            return
        self.t = torch.zeros((), device=device, dtype=torch.float64)
        f64 = dict(device=device, dtype=torch.float64)
        self.b1_m = torch.tensor([c.train.beta1 for c in cfgs], **f64)  # [M]: per-model betas and momentum
        self.b2_m = torch.tensor([c.train.beta2 for c in cfgs], **f64)
        self.mom_m = torch.tensor([c.train.momentum for c in cfgs], **f)
        self.any_momentum = any(c.train.momentum for c in cfgs)
        # each parameter's state under torch.optim's names, so that either implementation loads the other's
        names = ("momentum_buffer",) if self.any_momentum else ()
        names = ("exp_avg", "exp_avg_sq") if self.kind != "sgd" else names
        self.state = [{k: torch.zeros_like(p) for k in names} for p in params]

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
    def set_lr(self, step: int, lr_dev: torch.Tensor) -> None:
        """The learning rates of ``step`` (1-based): from the host table for the eager fused kernel, else copied on
        the device from ``lr_dev`` ([steps, M]) into the tensor the (possibly captured) step reads."""
        if self.fused and not self.capturable:
            self.opt.param_groups[0]["lr"] = self.table[step - 1][0]
        elif self.fused:
            self.opt.param_groups[0]["lr"].copy_(lr_dev[step - 1, 0])
        else:
            self.lr_now.copy_(lr_dev[step - 1])

    @torch.no_grad()
    def step(self) -> None:
        """One update with the learning rates set by ``set_lr``."""
        if self.fused:
            self.opt.step()
            return
        self.t += 1
        first = self.t == 1
        if self.kind != "sgd":
            b1 = self.b1_m.to(self.params[0].dtype)
            b2 = self.b2_m.to(self.params[0].dtype)
            bc1 = (1 - self.b1_m.pow(self.t)).to(b1.dtype)  # [M] bias corrections, each model's own betas
            bc2_sqrt = (1 - self.b2_m.pow(self.t)).sqrt().to(b1.dtype)
        else:  # momentum buffer: the gradient on the first step (torch.optim.SGD), then mom * buf + g
            mom = torch.where(first, torch.zeros_like(self.mom_m), self.mom_m)
        for i, p in enumerate(self.params):
            g = p.grad
            lr_v = self._view(self.lr_now, p)
            wd_v = self._view(self.wd, p) if self.any_wd else None
            if self.kind == "sgd":
                if wd_v is not None:
                    g = g.add(p * wd_v)
                if self.any_momentum:
                    buf = self.state[i]["momentum_buffer"]
                    buf.mul_(self._view(mom, p)).add_(g)
                    # a model without momentum uses its gradient (its buffer is then exactly g)
                    g = buf
                p.sub_(g * lr_v)
                continue
            if self.kind == "adamw" and wd_v is not None:
                p.mul_(1 - lr_v * wd_v)
            elif wd_v is not None:
                g = g.add(p * wd_v)
            m, v = self.state[i]["exp_avg"], self.state[i]["exp_avg_sq"]
            b1_v, b2_v = self._view(b1, p), self._view(b2, p)
            m.mul_(b1_v).add_(g * (1 - b1_v))
            v.mul_(b2_v).addcmul_(g, g * (1 - b2_v))
            denom = (v.sqrt() / self._view(bc2_sqrt, p)).add_(self.eps)
            p.sub_((m / denom) * (lr_v / self._view(bc1, p)))

    def state_tensors(self) -> list[dict[str, torch.Tensor]]:
        """Per parameter, its optimiser state under torch.optim's names (``exp_avg``, ``exp_avg_sq``,
        ``momentum_buffer``, ``step``), the same for both implementations: the tensors themselves, empty before a
        fused optimiser's first step."""
        if self.fused:
            return [{k: v for k, v in self.opt.state.get(p, {}).items() if torch.is_tensor(v)} for p in self.params]
        return [{"step": self.t, **st} for st in self.state]

    def state_dict(self) -> dict:
        """A copy of the state (``state_tensors``): what a checkpoint keeps. The learning rates are not in it: the
        loop sets them before every step."""
        return {"state": [{k: v.detach().clone() for k, v in st.items()} for st in self.state_tensors()]}

    @torch.no_grad()
    def load_state_dict(self, state: dict) -> None:
        """Take over ``state_dict()``'s state (of this optimiser, or of one of a stack rebuilt into these
        parameters by ``loop.Prepared.restack``), whichever implementation made it: a fused optimiser is given its
        state as torch.optim makes it (a float32 step on the parameter's device); the per-model update copies."""
        if self.fused:
            for p, st in zip(self.params, state["state"], strict=True):
                if st:
                    self.opt.state[p] = {k: v.to(p.device, torch.float32, copy=True) if k == "step" else v.clone()
                                         for k, v in st.items()}
            return
        for mine, st in zip(self.state_tensors(), state["state"], strict=True):
            for k, v in mine.items():
                v.copy_(st[k])

    @torch.no_grad()
    def snapshot(self) -> list[dict[str, torch.Tensor]] | None:
        """Copies of the state (None: a fused optimiser that has not stepped yet, whose state is made lazily)."""
        states = self.state_tensors()
        if not any(states):
            return None
        return [{k: v.clone() for k, v in st.items()} for st in states]

    @torch.no_grad()
    def restore(self, snap: list[dict[str, torch.Tensor]] | None) -> None:
        """Back to ``snapshot()``'s state, in place (a captured CUDA graph that reads the state stays valid)."""
        if snap is None:
            self.reset_state()
            return
        for st, saved in zip(self.state_tensors(), snap, strict=True):
            for k, v in st.items():
                v.copy_(saved[k])

    @torch.no_grad()
    def reset_state(self) -> None:
        """Back to the state of a fresh optimiser, in place (the same tensors, so a captured CUDA graph that reads
        them stays valid): moments, momentum buffers and step counts zero. A zero momentum buffer gives
        ``0 * momentum + g = g``, exactly the first step of a fresh SGD (dampening 0)."""
        for st in self.state_tensors():
            for v in st.values():
                v.zero_()

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
