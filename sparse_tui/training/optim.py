"""One optimiser step for a whole stack of models (models/stack.py), with per-model hyperparameters.

Adam / AdamW / SGD on stacked parameters ``[M, ...]``. The update of model m is the ``torch.optim`` update of that
model alone: Adam adds L2 weight decay to the gradient, AdamW decays decoupled (``p *= 1 - lr wd``), SGD uses
momentum with dampening 0 (its first step copies the gradient). Per model: learning rate (``[M]``, from the
schedule table, every step), weight decay (``[M]``) and gradient-norm clipping (``[M]``: each model's own norm
over all its parameters, as ``clip_grad_norm_`` computes it alone; never a norm across models).

Two implementations of the same update:

* ``fused``: when every model has the same learning-rate schedule and weight decay (a stack of one, or a sweep
  over seeds or widths), torch's fused optimiser kernel (``FusedStep``) runs over the stacked tensors: the update is
  elementwise, so
  it is each model's own update. One kernel instead of ~10 ops per parameter (about 1 ms per step of a small model
  on CPU, docs/PERFORMANCE.md).
* ``per-model``: otherwise the formulas are written out with ``[M]`` tensors broadcast over each parameter.

The step counter, bias corrections and learning rates live on the device (``lr`` is a device tensor the loop
copies in before each step), so the step can be captured in a CUDA graph and replayed.
"""

from __future__ import annotations

import math

import torch


class FusedStep:
    """``torch.optim``'s ``fused=True`` Adam / AdamW / SGD step, calling the same aten kernels (``_fused_adam_``,
    ``_fused_adamw_``, ``_fused_sgd_``) the way ``torch.optim`` calls them, with its state under its names
    (``state[p]``: ``step`` (float32, on the parameter's device), ``exp_avg``, ``exp_avg_sq``; or
    ``momentum_buffer``) and ``param_groups[0]["lr"]`` (a float, or a device tensor for a captured step): the same
    update bit for bit (tests/test_fused_step.py). Not ``torch.optim`` itself because constructing one imports
    ``torch._dynamo`` (``add_param_group`` is wrapped by ``torch._disable_dynamo``), which takes about as long
    as importing torch (docs/PERFORMANCE.md, "Start-up") and which no run uses."""

    def __init__(self, kind: str, params: list[torch.Tensor], lr, betas: tuple[float, float], weight_decay: float,
                 momentum: float, eps: float = 1e-8):
        self.kind, self.params, self.betas, self.wd, self.momentum, self.eps = kind, params, betas, weight_decay, \
            momentum, eps
        self.param_groups = [{"lr": lr}]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    @torch.no_grad()
    def step(self) -> None:
        ps = [p for p in self.params if p.grad is not None]
        if not ps:
            return
        grads, lr = [p.grad for p in ps], self.param_groups[0]["lr"]
        if self.kind == "sgd":
            bufs: list = []
            first = False
            if self.momentum != 0:
                bufs = [self.state.get(p, {}).get("momentum_buffer") for p in ps]
                first = all(b is None for b in bufs)
                if first:  # the kernel copies the gradient in (dampening 0)
                    bufs = [torch.empty_like(g) for g in grads]
            torch._fused_sgd_(ps, grads, bufs, weight_decay=self.wd, momentum=self.momentum, lr=lr, dampening=0.0,
                              nesterov=False, maximize=False, is_first_step=first, grad_scale=None, found_inf=None)
            for p, b in zip(ps, bufs):
                self.state.setdefault(p, {})["momentum_buffer"] = b
            return
        for p in ps:
            if p not in self.state:
                self.state[p] = {"step": torch.zeros((), dtype=torch.float32, device=p.device),
                                 "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                                 "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}
        st = [self.state[p] for p in ps]
        steps = [s["step"] for s in st]
        torch._foreach_add_(steps, 1)
        kernel = torch._fused_adamw_ if self.kind == "adamw" else torch._fused_adam_
        kernel(ps, grads, [s["exp_avg"] for s in st], [s["exp_avg_sq"] for s in st], [], steps, amsgrad=False,
               lr=lr, beta1=self.betas[0], beta2=self.betas[1], weight_decay=self.wd, eps=self.eps, maximize=False,
               grad_scale=None, found_inf=None)


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
            self.opt = FusedStep(self.kind, params, lr0, (t0.beta1, t0.beta2), t0.weight_decay, t0.momentum)
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
        states = self.state_dict()["state"]
        return states if any(states) else None

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
