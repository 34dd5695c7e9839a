"""What a run needs before it trains: parameters, the largest tensor, memory for a training batch and for an
evaluation, and the number of evaluations, estimated from the config alone (no torch, no model is built).

``check`` refuses a preset whose largest run cannot fit the device's memory, with the estimate in its one-line
message, before anything is written to the run store (``runner.preflight``). The estimate is generous (float32
everywhere, every attention probability materialised, autograd's saved activations counted twice for temporaries),
so a run it accepts fits; a run it refuses would at best swap the machine to a halt.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sparse_tui.presets import RunConfig, n_eval_steps, task_kind

F32 = 4
# Evaluation materialises at most this many attention probabilities per chunk (training/metrics.py _ATTN_BUDGET).
EVAL_ATTN_ELEMENTS = 64 * 1024 * 1024
# Host bytes per training step of the learning-rate schedule the loop builds before training (schedule.py
# lr_table: a Python list of floats per step, ~100 B, plus a float32 copy on the device).
LR_TABLE_BYTES_PER_STEP = 104
# Share of the available memory one run may plan to use (the rest: Python, torch's allocator, the store).
MEMORY_FRACTION = 0.8


class ResourceError(Exception):
    """A run that cannot fit the device (one line, with the estimate)."""


def dims(cfg: RunConfig) -> dict:
    """Sequence length, vocabulary and vector sizes the task gives the model (its kind's ``presets.TaskKind.dims``;
    an unregistered kind is a ValueError)."""
    return task_kind(cfg.task.kind).dims(cfg.task)


@dataclass
class Estimate:
    """Sizes of one run (bytes unless named otherwise)."""

    params: int
    largest_tensor: int  # elements
    largest_name: str
    state_bytes: int  # parameters, gradients, optimiser state
    batch_bytes: int  # one training step: the batch and the activations autograd keeps
    eval_bytes: int  # the fixed test set (and a fixed training set) plus one evaluation chunk
    eval_steps: int
    schedule_bytes: int = 0  # the learning-rate table of every step

    @property
    def total_bytes(self) -> int:
        return self.state_bytes + self.batch_bytes + self.eval_bytes + self.schedule_bytes

    def describe(self) -> str:
        table = f", learning-rate table {human(self.schedule_bytes)}" if self.schedule_bytes > 2**30 else ""
        return (
            f"{human(self.total_bytes)} ({_count(self.params)} parameters, largest tensor {_count(self.largest_tensor)}"
            f" elements ({self.largest_name}), batch {human(self.batch_bytes)}, evaluation {human(self.eval_bytes)},"
            f" {_count(self.eval_steps)} evaluations{table})"
        )


def estimate(cfg: RunConfig) -> Estimate:
    """The memory one run of ``cfg`` needs on its device (see the module docstring)."""
    d = dims(cfg)
    L, out, vocab, in_dim = d["seq_len"], d["out_dim"], d["vocab"], d["in_dim"]
    m, bs, n_test = cfg.model, cfg.train.batch_size, cfg.eval.test_size
    tensors: dict[str, int] = {}
    x_elems = L * (in_dim or 1)  # one sequence's input: token ids (int64) or vectors (float32)
    x_bytes = 8 if in_dim is None else F32
    if m.kind == "transformer":
        dm, H = m.d_model, m.n_heads
        dqk = m.d_qk or dm // H
        embed = vocab * dm if vocab and m.input != "linear" else (in_dim or 1) * dm + dm
        tensors["input map"] = embed
        per_layer = 2 * dm * H * dqk + H * dqk + 2 * (dm * dm + dm)
        if m.mlp:
            hid = m.mlp_factor * dm
            per_layer += 2 * dm * hid + hid + dm
            tensors["MLP weight"] = dm * hid
        params = embed + L * dm + m.n_layers * per_layer + dm * out + out + 4 * dm * m.n_layers
        tensors["attention scores of a batch"] = bs * H * L * L
        per_seq_act = m.n_layers * (L * (4 * dm + 2 * H * dqk + (2 * m.mlp_factor * dm if m.mlp else 0)) + 3 * H * L * L)
        layers_heads = m.n_layers * H
    else:  # the toy model (paper Eq. 2) and the integrated ODE
        params = L + out * (in_dim or 1)
        per_seq_act = 4 * L * (in_dim or 1)
        layers_heads = 1
    tensors["training batch"] = bs * x_elems
    tensors["test set"] = n_test * x_elems
    train_set = getattr(cfg.task, "train_size", 0) or 0
    if train_set:
        tensors["fixed training set"] = train_set * x_elems
    chunk = max(1, min(n_test, EVAL_ATTN_ELEMENTS // max(1, layers_heads * L * L)))
    state = F32 * 4 * params
    batch = bs * x_elems * x_bytes + 2 * F32 * bs * per_seq_act
    evaluation = (n_test + train_set) * x_elems * x_bytes + F32 * chunk * per_seq_act
    if m.kind == "ode":
        state, batch, evaluation = 0, 0, 0
    name, largest = max(tensors.items(), key=lambda kv: kv[1])
    return Estimate(
        params=params,
        largest_tensor=largest,
        largest_name=name,
        state_bytes=state,
        batch_bytes=batch,
        eval_bytes=evaluation,
        eval_steps=n_eval_steps(cfg.train.steps, cfg.eval.every),
        schedule_bytes=0 if m.kind == "ode" else LR_TABLE_BYTES_PER_STEP * cfg.train.steps,
    )


def available_bytes(device: str) -> tuple[int | None, str]:
    """Memory a run may use on ``device`` ('cpu', 'cuda', 'cuda:N') and how it was measured; None = unknown."""
    if device.startswith("cuda"):
        import torch

        dev = torch.device(device)
        _, total = torch.cuda.mem_get_info(dev)
        return int(total * MEMORY_FRACTION), f"{device} has {human(total)}"
    try:
        with open("/proc/meminfo") as fh:
            info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in fh if line.split()}
        avail = info.get("MemAvailable") or info.get("MemFree")
        if avail:
            return int(avail * MEMORY_FRACTION), f"this machine has {human(avail)} available"
    except (OSError, ValueError, IndexError):
        pass
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return int(total * MEMORY_FRACTION), f"this machine has {human(total)}"
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX system
        return None, "unknown memory"


def check(cfgs: list[RunConfig], device: str, source: str) -> None:
    """Raise ``ResourceError`` when the largest of ``cfgs`` cannot fit ``device`` (resolved: cpu, cuda, cuda:N)."""
    if not cfgs:
        return
    budget, what = available_bytes(device)
    worst = max(cfgs, key=lambda c: estimate(c).total_bytes)
    est = estimate(worst)
    if budget is not None and est.total_bytes > budget:
        raise ResourceError(
            f"{source}: a run needs about {est.describe()}, more than {device} can hold ({what}); reduce"
            + (" train.steps" if est.schedule_bytes * 2 > est.total_bytes
               else " train.batch_size, eval.test_size or the model size")
        )


def lone_run_threads(cfg: RunConfig, idle: int) -> int:
    """Torch threads for a batch of one run on a CPU with ``idle`` cores that other processes leave idle (the sweep
    scheduler's ``idle_cores``): the idle cores for a Transformer, at least 1; 1 for the toy model and the ODE (too
    small to use a second thread). Torch's default (every core) oversubscribes a busy machine: on a shared 2-core
    CPU at load 4-5, ``run presets/smoke.toml`` took 55-79 s with the default against 5-9 s with one thread (issue
    21). The same judgement as a sweep's ``auto`` plan, for a lone run."""
    return max(1, idle) if cfg.model.kind == "transformer" else 1


def human(n: float) -> str:
    """Bytes as B, KiB, MiB, GiB, TiB, PiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def _count(n: int) -> str:
    return f"{n:,}" if n < 10**7 else f"{n:.2e}"

