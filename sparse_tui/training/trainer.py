"""The training loop of one run: task batches on the device → model → optimiser, metrics into the run store.

``train_run`` is the only place a model is trained, whoever started the run (headless CLI, TUI, a worker process).
The step itself (``train_step``) is a plain function of the model's parameters and a batch, with data made on the
device and no host synchronisation except where a metric is read, so that a sweep scheduler can stack many models.

A NaN or infinite training loss stops the run with status ``diverged`` at that step (checked every step on CPU, at
every evaluation on GPUs to avoid per-step syncs). ``should_stop`` is polled at every heartbeat; when it returns a
status (``interrupted`` / ``cancelled``) the run ends with that status and keeps everything logged so far.
"""

from __future__ import annotations

import math
import platform
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import torch

from sparse_tui.presets import RunConfig, eval_steps
from sparse_tui.training.metrics import evaluate, loss_fn, toy_metrics
from sparse_tui.training.plateau import PlateauDetector

HEARTBEAT_SECONDS = 1.0


@dataclass
class RunResult:
    status: str
    reason: str | None = None
    plateau_step: float | None = None
    summary: dict = field(default_factory=dict)
    step: int = 0


class RunLogger:
    """Where a run's records go: the run store (``store`` + ``run_id``), or nowhere (tests, benchmarks)."""

    def __init__(self, store=None, run_id: str | None = None, on_eval: Callable[[int, dict], None] | None = None):
        self.store, self.run_id, self.on_eval = store, run_id, on_eval
        self._last_beat = 0.0

    def metrics(self, step: int, values: dict[str, float]) -> None:
        if self.store is not None:
            self.store.log_metrics(self.run_id, step, values)
        if self.on_eval is not None:
            self.on_eval(step, values)

    def series(self, steps: list[int], series: dict[str, list[float]]) -> None:
        """Whole metric series at once (integrated ODE runs)."""
        if self.store is not None:
            self.store.log_metrics_many(self.run_id, steps, series)
        if self.on_eval is not None and steps:
            self.on_eval(steps[-1], {k: v[-1] for k, v in series.items()})

    def attention(self, step: int, maps: dict, meta: dict) -> None:
        if self.store is not None:
            self.store.log_attention(self.run_id, step, maps, meta)

    def heartbeat(self, step: int, force: bool = False) -> bool:
        """Rate-limited heartbeat; True when the store says this run should be cancelled."""
        now = time.monotonic()
        if self.store is None or (not force and now - self._last_beat < HEARTBEAT_SECONDS):
            return False
        self._last_beat = now
        return self.store.heartbeat(self.run_id, step)


def resolve_device(name: str) -> torch.device:
    """``auto`` → first CUDA device if available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {name} requested but CUDA is not available")
    return dev


def library_versions(device: torch.device | None = None) -> dict:
    import numpy

    import sparse_tui

    v = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "sparse_tui": sparse_tui.__version__,
        "platform": platform.platform(),
    }
    if device is not None and device.type == "cuda":
        v["cuda"] = torch.version.cuda
        v["gpu"] = torch.cuda.get_device_name(device)
    return v


def lr_factor(step: int, cfg: RunConfig) -> float:
    """Learning-rate multiplier at ``step`` (1-based): linear warmup, then constant / linear / cosine decay."""
    t = cfg.train
    if t.warmup_steps and step <= t.warmup_steps:
        return step / t.warmup_steps
    if t.schedule == "constant":
        return 1.0
    span = max(1, t.steps - t.warmup_steps)
    frac = min(1.0, max(0.0, (step - t.warmup_steps) / span))
    lo = t.min_lr_ratio
    if t.schedule == "linear":
        return lo + (1 - lo) * (1 - frac)
    return lo + (1 - lo) * 0.5 * (1 + math.cos(math.pi * frac))


def make_optimizer(params, cfg: RunConfig) -> torch.optim.Optimizer:
    """The preset's optimiser, as torch.optim computes it. Its fused implementation (one kernel over all parameters
    instead of ~10 ops per parameter tensor) is used on CPU and CUDA: the same update, up to rounding; it saves
    about 1 ms per step on CPU, 5-12% of a blog model's step (docs/PERFORMANCE.md)."""
    t = cfg.train
    params = list(params)
    fused = bool(params) and all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params)
    if t.optimizer == "sgd":
        return torch.optim.SGD(params, lr=t.lr, momentum=t.momentum, weight_decay=t.weight_decay, fused=fused)
    cls = torch.optim.AdamW if t.optimizer == "adamw" else torch.optim.Adam
    return cls(params, lr=t.lr, betas=(t.beta1, t.beta2), weight_decay=t.weight_decay, fused=fused)


def train_step(model, opt, batch, classification: bool, grad_clip: float) -> torch.Tensor:
    """One optimisation step; returns the (detached) training loss without synchronising."""
    out, _ = model(batch.x)
    loss = loss_fn(out, batch.y, classification)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    return loss.detach()


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
    """Full attention maps (all query rows) of the first ``n`` test sequences, for the heatmap panel."""
    x = batch.x[:n]
    prev = getattr(model, "readout_only", None)
    if prev is not None:
        model.readout_only = False
    try:
        _, attn = model(x)
    finally:
        if prev is not None:
            model.readout_only = prev
    L = x.shape[1]
    maps = {}
    for li, a in enumerate(attn, start=1):
        if a is None:
            continue
        a = a.float()
        if L > 160:  # long sequences: keep the readout row only (a T x T map would not fit a terminal anyway)
            a = a[:, :, -1:, :]
        maps[f"L{li}"] = a.permute(1, 0, 2, 3).cpu().numpy()  # [H, E, Lq, L]
    meta = {"seq_len": L, "relevant": batch.relevant[:n].int().cpu().tolist()}
    if x.dtype == torch.long:
        meta["tokens"] = x.cpu().tolist()
    if batch.copy_q is not None:
        meta["copy_q"] = batch.copy_q[:n].cpu().tolist()
        meta["copy_k"] = batch.copy_k[:n].cpu().tolist()
    return maps, meta


def denormals_flushed() -> bool:
    """Whether this thread's CPU arithmetic flushes denormal floats to zero now (FTZ / DAZ)."""
    return float(torch.tensor([1e-39], dtype=torch.float32) * 1.0) == 0.0


@contextmanager
def cpu_float_mode(flush_denormal: bool, device: torch.device):
    """``train.flush_denormal`` on a CPU: denormal floats are flushed to zero while the run trains (restored after).

    Unstable runs drive values into the denormal range (below 1.2e-38), where every CPU float operation takes
    tens of times longer; measured on blog_n80 at lr 1e-2, 600 steps took 49.1 s without and 17.1 s with flushing,
    ending at the same loss (docs/PERFORMANCE.md). It changes results only where a value underflows."""
    if not (flush_denormal and device.type == "cpu"):
        yield
        return
    before = denormals_flushed()
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(before)


def train_run(
    cfg: RunConfig,
    *,
    device: torch.device | str = "cpu",
    logger: RunLogger | None = None,
    should_stop: Callable[[], str | None] | None = None,
    on_step: Callable[[int], None] | None = None,
) -> RunResult:
    """Train one run to completion (or divergence / interruption) and return its result.

    Every evaluation is written through ``logger`` as it happens, so another process can follow the run live.
    """
    logger = logger or RunLogger()
    device = torch.device(device) if isinstance(device, str) else device
    if cfg.model.kind == "ode":
        return _integrate_ode_run(cfg, logger)
    with cpu_float_mode(cfg.train.flush_denormal, device):
        return _train_model(cfg, device, logger, should_stop, on_step)


def _train_model(cfg: RunConfig, device: torch.device, logger: RunLogger, should_stop, on_step) -> RunResult:
    """``train_run`` for a Transformer or toy model (the ODE runs are integrated instead)."""
    from sparse_tui.models import build_model
    from sparse_tui.tasks import make_task

    torch.manual_seed(cfg.seed)
    task = make_task(cfg, device)
    model = build_model(cfg, task).to(device)
    opt = make_optimizer(model.parameters(), cfg)
    test = task.test_batch(cfg.eval.test_size)
    ev_steps = set(eval_steps(cfg))
    snaps = snapshot_steps(cfg)
    det = PlateauDetector(mode=cfg.plateau.mode, value=cfg.plateau.value)
    sync_every = 1 if device.type == "cpu" else cfg.eval.every
    history: dict[str, list[float]] = {}
    best: dict[str, float] = {}
    t0 = time.perf_counter()
    loss_sum = torch.zeros((), device=device)
    n_since = 0
    last: dict[str, float] = {}

    # Training steps need no attention probabilities (metrics come from the evaluation pass, which computes them):
    # they use the fused scaled_dot_product_attention kernel, 5-30% faster per step on CPU (docs/PERFORMANCE.md).
    fused = hasattr(model, "need_attn")

    def do_eval(step: int) -> dict[str, float]:
        nonlocal loss_sum, n_since
        if fused:
            model.need_attn = True
        model.eval()
        vals = evaluate(model, test, task.kind, task.classification)
        if cfg.model.kind == "toy":
            vals.update(toy_metrics(model, task))
        model.train()
        if n_since:
            vals["train/loss"] = float(loss_sum) / n_since
        loss_sum = torch.zeros((), device=device)
        n_since = 0
        vals["lr"] = cfg.train.lr * lr_factor(max(step, 1), cfg)
        logger.metrics(step, vals)
        if step in snaps:
            maps, meta = attention_snapshot(model, test, cfg.eval.snapshot_examples)
            logger.attention(step, maps, meta)
        if fused:
            model.need_attn = False
        det.update(step, vals.get(cfg.plateau.metric, math.nan))
        for k, v in vals.items():
            history.setdefault(k, []).append(v)
            if k.endswith("loss") and math.isfinite(v):
                best[k] = min(best.get(k, math.inf), v)
            elif k.endswith("acc") and math.isfinite(v):
                best[k] = max(best.get(k, -math.inf), v)
        return vals

    def result(status: str, step: int, reason: str | None = None) -> RunResult:
        elapsed = time.perf_counter() - t0
        summary = {
            "final": last,
            "best": best,
            "steps_done": step,
            "wall_seconds": elapsed,
            "steps_per_second": step / elapsed if elapsed > 0 else None,
            "n_params": sum(p.numel() for p in model.parameters()),
        }
        return RunResult(status=status, reason=reason, plateau_step=det.step, summary=summary, step=step)

    last = do_eval(0)
    logger.heartbeat(0, force=True)
    bad_step = None
    step = 0
    for step in range(1, cfg.train.steps + 1):
        f = lr_factor(step, cfg)
        for g in opt.param_groups:
            g["lr"] = cfg.train.lr * f
        batch = task.train_batch(cfg.train.batch_size)
        loss = train_step(model, opt, batch, task.classification, cfg.train.grad_clip)
        loss_sum = loss_sum + loss
        n_since += 1
        if step % sync_every == 0 or step in ev_steps:
            if not math.isfinite(float(loss_sum)):
                bad_step = step
                break
        if step in ev_steps:
            last = do_eval(step)
        if on_step is not None:
            on_step(step)
        cancel = logger.heartbeat(step)
        why = "cancelled" if cancel else (should_stop() if should_stop is not None else None)
        if why:
            return result(why, step, f"{why} at step {step}")
    if bad_step is not None:
        return result("diverged", bad_step, f"non-finite training loss at step {bad_step}")
    for k in ("test/loss", "train/loss"):
        if k in last and not math.isfinite(last[k]):
            return result("diverged", step, f"non-finite {k} at step {step}")
    return result("finished", step)


def _integrate_ode_run(cfg: RunConfig, logger: RunLogger) -> RunResult:
    """Record the reduced gradient-flow dynamics (paper Eqs. 12-14 / 17-21) as an ordinary run."""
    from sparse_tui.models.ode import simulate_run

    t0 = time.perf_counter()
    sim = simulate_run(cfg)
    steps = [int(s) for s in sim.steps]
    logger.series(steps, {k: [float(x) for x in v] for k, v in sim.metrics.items()})
    last = {k: float(v[-1]) for k, v in sim.metrics.items()}
    plateau = sim.plateau_step
    if not sim.plateau_exact:  # a metric the flow cannot watch exactly: use the evaluation-grid crossing
        from sparse_tui.training.plateau import plateau_step

        series = sim.metrics.get(cfg.plateau.metric)
        plateau = None if series is None else plateau_step(steps, list(series), cfg.plateau.mode, cfg.plateau.value)
    best = {}
    for k, v in sim.metrics.items():
        if k.endswith("loss"):
            best[k] = float(min(v))
    elapsed = time.perf_counter() - t0
    summary = {
        "final": last,
        "best": best,
        "steps_done": steps[-1] if steps else 0,
        "wall_seconds": elapsed,
        "integrator_steps": sim.integrator_steps,
        "notes": sim.notes,
    }
    return RunResult("finished", None, plateau, summary, steps[-1] if steps else 0)


def python_info() -> str:
    return f"{sys.executable} {platform.python_version()}"
