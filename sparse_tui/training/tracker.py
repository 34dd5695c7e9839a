"""One run's bookkeeping in the training loop (training/loop.py): its ``Tracker`` (evaluations, best and last
metrics, plateau detection, buffered train/loss points, its end and its summary) and the read-back of those
points kept on the device."""

from __future__ import annotations

import math
import time
from typing import Callable

import torch

from sparse_tui.presets.loading import eval_steps
from sparse_tui.science.repetition import Switcher, scheduled
from sparse_tui.science.schedule import lr_factor
from sparse_tui.training.metrics import evaluate, toy_metrics
from sparse_tui.training.plateau import PlateauDetector
from sparse_tui.training.precision import full_fp32
from sparse_tui.training.runlog import RunResult
from sparse_tui.training.snapshots import attention_snapshot, snapshot_steps


class Tracker:
    """One run's bookkeeping, whoever computes its numbers (``train_stack`` for a member of a stack, the ODE
    integration in training/trainer.py): ``evaluate`` (a trained member), ``record`` (the one rule for "best": the
    lowest finite value of a ``*loss``, the highest of an ``*acc``, and the plateau detector), ``log_train``,
    ``end`` and ``summary`` (the one summary builder of a run). ``begin`` starts its clock and says what its
    summary reports about how it trained (``context``) and whom ``end`` tells (``on_done(index, result)``)."""

    def __init__(self, cfg, logger, task=None, module=None, test=None, index: int = 0):
        self.index, self.cfg, self.logger, self.task, self.module, self.test = index, cfg, logger, task, module, test
        self.slot, self.stack = index, None  # its place in the stack it trains in now, and that stack (Prepared)
        self.ev_steps = set(eval_steps(cfg))
        self.snaps = snapshot_steps(cfg)
        self.det = PlateauDetector(mode=cfg.plateau.mode, value=cfg.plateau.value)
        # repetition schedules (repetition.py) of a trained run: task.p / task.B switched by the run's own metrics
        self.switchers = {k: Switcher(s, cfg.plateau.metric, cfg.plateau.mode == "above")
                          for k, s in scheduled(cfg.task).items()} if task is not None else {}
        self.best: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.n_since = 0  # training steps summed in the stack's loss sum since this run's last logged point
        self.train_log: list[tuple[int, float]] = []  # train/loss points buffered until the next evaluation
        self.result: RunResult | None = None
        self.begin({})

    def begin(self, context: dict, on_done: Callable[[int, RunResult], None] | None = None) -> None:
        self.started, self.context, self.on_done = time.perf_counter(), context, on_done

    def measure(self) -> dict[str, float]:
        """The member's metrics now, from its own module (its slice of the stack copied in), in float32."""
        self.stack.load_into(self.slot, self.module)
        self.module.eval()
        with full_fp32(self.test.x.device):
            vals = evaluate(self.module, self.test, self.task.kind, self.task.classification)
            if self.cfg.model.kind == "toy":
                vals.update(toy_metrics(self.module, self.task))
        self.module.train()
        return vals

    def evaluate(self, step: int, loss_sum: float | None = None, measured: dict | None = None,
                 snapshot: tuple[dict, dict] | None = None, system: dict | None = None) -> None:
        """Evaluate, log the metrics (and the attention maps at snapshot steps) and record them. ``loss_sum``:
        the stack's training-loss sum of this run since its last logged point (its mean is ``train/loss``).
        ``measured`` / ``snapshot``: this member's metrics and maps from the stack's batched pass
        (``evaluate_due``), else computed here from its own module. ``system``: the process's ``sys/*`` metrics
        (sparse_tui/base/sysmetrics.py), logged with the others but not part of the run's final metrics."""
        self.flush()
        vals = dict(measured) if measured is not None else self.measure()
        if self.n_since and loss_sum is not None:
            vals["train/loss"] = loss_sum / self.n_since
        self.n_since = 0
        vals["lr"] = self.cfg.train.lr * lr_factor(max(step, 1), self.cfg)
        self.record(step, vals)  # before logging: a schedule's switch adds its value in force (sched/p, sched/B)
        self.logger.metrics(step, {**vals, **system} if system else vals)
        if step in self.snaps:
            if snapshot is None:
                with full_fp32(self.test.x.device):
                    snapshot = attention_snapshot(self.module, self.test, self.cfg.eval.snapshot_examples)
            self.logger.attention(step, *snapshot)

    def record(self, step: int, vals: dict[str, float]) -> None:
        self.last = vals
        before = self.det.step
        self.det.update(step, vals.get(self.cfg.plateau.metric, math.nan))
        if before is None and self.det.step is not None and self.task is not None:
            self.logger.plateau(self.det.step)  # live: runs and the console show it before the run ends
        for key, sw in self.switchers.items():  # a switch fires here, at an evaluation; it acts from step + 1
            sw.observe(step, vals, plateau=self.det.step is not None)
            vals[f"sched/{key}"] = float(sw.value(step + 1))
        for k, v in vals.items():
            if k.endswith("loss") and math.isfinite(v):
                self.best[k] = min(self.best.get(k, math.inf), v)
            elif k.endswith("acc") and math.isfinite(v):
                self.best[k] = max(self.best.get(k, -math.inf), v)

    def schedule_to(self, step: int) -> None:
        """Set the task's scheduled repetition keys to their values for training step ``step``."""
        for key, sw in self.switchers.items():
            v = sw.value(step)
            setattr(self.task, key, int(v) if isinstance(getattr(self.task, key), int) else float(v))

    def log_train(self, step: int, loss_sum: float | torch.Tensor) -> None:
        """A train/loss point between evaluations: the mean since the last one (stored at the next ``flush``).
        ``loss_sum``: a float, or on GPUs a 0-d tensor on the device (read back at the next evaluation with the
        others: ``read_back``)."""
        self.train_log.append((step, loss_sum / self.n_since))
        self.n_since = 0

    def flush(self) -> None:
        """Store the buffered train/loss points in one transaction (at evaluations, checkpoints and the end)."""
        if self.train_log:
            read_back([self])
            self.logger.series([p[0] for p in self.train_log], {"train/loss": [p[1] for p in self.train_log]})
            self.train_log.clear()

    def summary(self, step: int) -> dict:
        elapsed = time.perf_counter() - self.started
        out = {"final": self.last, "best": self.best, "steps_done": step, "wall_seconds": elapsed}
        if self.module is not None:
            out["steps_per_second"] = step / elapsed if elapsed > 0 else None
            out["n_params"] = sum(p.numel() for p in self.module.parameters())
        out.update({k: list(v) if isinstance(v, list) else v for k, v in self.context.items() if v != []})
        return out

    def end(self, status: str, step: int, reason: str | None = None) -> RunResult:
        self.flush()
        if isinstance(getattr(self.module, "embed", None), torch.nn.Embedding):
            # the final token embedding outlives the checkpoints (blog 3's geometry view:
            # sparse_tui/science/geometry.py)
            self.stack.load_into(self.slot, self.module)
            self.logger.array("embed", self.module.embed.weight.detach().float().cpu().numpy())
        self.result = RunResult(status=status, reason=reason, plateau_step=self.det.step, summary=self.summary(step),
                                step=step)
        if self.on_done is not None:
            self.on_done(self.index, self.result)
        return self.result

    def state_dict(self) -> dict:
        """What a checkpoint keeps of this run: its random streams, detector, metrics and loss count."""
        return {"gens": {k: g.get_state() for k, g in vars(self.task).items() if isinstance(g, torch.Generator)},
                "det": (self.det.initial, self.det.step), "best": dict(self.best), "last": dict(self.last),
                "n_since": self.n_since, "sched": {k: sw.state_dict() for k, sw in self.switchers.items()}}

    def load_state_dict(self, state: dict) -> None:
        for k, st in state["gens"].items():
            getattr(self.task, k).set_state(st)
        self.det.initial, self.det.step = state["det"]
        self.best, self.last, self.n_since = dict(state["best"]), dict(state["last"]), state["n_since"]
        for key, st in state.get("sched", {}).items():
            self.switchers[key].load_state_dict(st)


def read_back(trackers: list[Tracker]) -> None:
    """The train/loss points ``trackers`` keep on the device, read back to the host in one transfer."""
    held = [(tr, i) for tr in trackers for i, p in enumerate(tr.train_log) if torch.is_tensor(p[1])]
    if not held:
        return
    vals = torch.stack([tr.train_log[i][1].reshape(()) for tr, i in held]).tolist()
    for (tr, i), v in zip(held, vals):
        tr.train_log[i] = (tr.train_log[i][0], v)
