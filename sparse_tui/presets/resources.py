"""What a run needs before it trains: parameters, the largest tensor, memory for a training batch and for an
evaluation, and the number of evaluations, estimated from the config alone (no torch, no model is built).

The one memory model of sparse-tui: ``step_bytes`` (parameters, gradients, optimiser state and one training step's
batch and activations) is what the sweep scheduler packs into a stack (``training/scheduler.py``); ``estimate``
adds the evaluation and the learning-rate table for the preflight. ``MEMORY_FRACTION`` is the one share of a
device's memory that either may plan to use.

``check`` refuses a preset whose largest run cannot fit the device's memory, with the estimate in its one-line
message, before anything is written to the run store (``LocalExecutor.preflight``). The estimate is generous (float32
everywhere, every attention probability materialised, autograd's saved activations counted twice for temporaries),
so a run it accepts fits; a run it refuses would at best swap the machine to a halt.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sparse_tui.presets.schema import RunConfig, n_eval_steps
from sparse_tui.presets.tasks import task_kind

F32 = 4
# Evaluation materialises at most this many attention probabilities per chunk (training/metrics.py _ATTN_BUDGET).
EVAL_ATTN_ELEMENTS = 64 * 1024 * 1024
# Host bytes per training step of the learning-rate schedule the loop builds before training (schedule.py
# lr_table: a Python list of floats per step, ~100 B, plus a float32 copy on the device).
LR_TABLE_BYTES_PER_STEP = 104
# Share of a device's memory that a run (the preflight: of the total on CUDA, of the available RAM on a CPU) or a
# stack of runs (the scheduler: of the free CUDA memory) may plan to use; the rest: evaluation, fragmentation,
# Python, torch's allocator. 0.7 is the value the scheduler's stacks on GPUs were measured with (docs/PERFORMANCE.md);
# the preflight used 0.8 until the two memory models became one (issue 23).
MEMORY_FRACTION = 0.7


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


def n_params(cfg: RunConfig) -> int:
    """Parameter count of a run's model, from its config (matches ``models.build_model``; 0 for the ODE)."""
    m = cfg.model
    td = dims(cfg)
    L, out = td["seq_len"], td["out_dim"]
    if m.kind == "toy":
        return L + out * td["in_dim"]
    if m.kind != "transformer":
        return 0
    d, H = m.d_model, m.n_heads
    dqk = m.d_qk or d // H
    kind = m.input if m.input != "auto" else ("embedding" if td["vocab"] else "linear")
    b = 1 if m.bias else 0  # model.bias: biases on every Linear layer but the key projection
    p = td["vocab"] * d if kind == "embedding" else td["in_dim"] * d + b * d
    if m.pos_enc == "learned":
        p += L * d
    per_layer = (d * H * dqk + b * H * dqk) + d * H * dqk + (d * d + b * d) * 2
    if m.mlp:
        hid = m.mlp_factor * d
        per_layer += d * hid + b * hid + hid * d + b * d
    if m.layernorm:
        per_layer += 2 * d * (2 if m.mlp else 1)
    p += m.n_layers * per_layer
    if m.layernorm:
        p += 2 * d
    if m.tie_embeddings:
        return p
    return p + d * out + b * out


def _input(cfg: RunConfig) -> tuple[int, int]:
    """One sequence's input: (elements, bytes per element): token ids (int64) or vectors (float32)."""
    d = dims(cfg)
    return d["seq_len"] * (d["in_dim"] or 1), 8 if d["in_dim"] is None else F32


def _activations(cfg: RunConfig) -> int:
    """Activations autograd keeps for one sequence (elements): per layer the stream, LayerNorm, q/k/v/out and MLP
    activations and the attention scores and probabilities (counted as materialised even when fused kernels are
    used), plus the input map's output."""
    d, m = dims(cfg), cfg.model
    L = d["seq_len"]
    if m.kind != "transformer":  # the toy model (paper Eq. 2) and the integrated ODE
        return 4 * L * (d["in_dim"] or 1)
    dm, H = m.d_model, m.n_heads
    dqk = m.d_qk or dm // H
    per_layer = L * (4 * dm + 2 * H * dqk + (2 * m.mlp_factor * dm if m.mlp else 0)) + 3 * H * L * L
    return m.n_layers * per_layer + L * dm


def _state_and_batch(cfg: RunConfig) -> tuple[int, int]:
    """Bytes of the parameters, their gradients and two optimiser states (4 x params), and of one training step:
    the batch and its activations, times 2 for temporaries. Nothing for the ODE (it is integrated, on the host)."""
    if cfg.model.kind == "ode":
        return 0, 0
    elems, elem_bytes = _input(cfg)
    bs = cfg.train.batch_size
    return F32 * 4 * n_params(cfg), bs * elems * elem_bytes + 2 * F32 * bs * _activations(cfg)


def step_bytes(cfg: RunConfig) -> int:
    """Device memory one run (one model of a stack) takes while it trains: parameters, gradients, optimiser state,
    one batch and its activations. What the scheduler packs into a stack (``scheduler.stack_member_bytes``)."""
    return sum(_state_and_batch(cfg))


def estimate(cfg: RunConfig) -> Estimate:
    """The memory one run of ``cfg`` needs on its device: ``step_bytes`` plus the evaluation and the learning-rate
    table (see the module docstring)."""
    d = dims(cfg)
    L, vocab, in_dim = d["seq_len"], d["vocab"], d["in_dim"]
    m, bs, n_test = cfg.model, cfg.train.batch_size, cfg.eval.test_size
    x_elems, x_bytes = _input(cfg)
    tensors: dict[str, int] = {}
    if m.kind == "transformer":
        dm, H = m.d_model, m.n_heads
        tensors["input map"] = vocab * dm if vocab and m.input != "linear" else (in_dim or 1) * dm + dm
        if m.mlp:
            tensors["MLP weight"] = dm * m.mlp_factor * dm
        tensors["attention scores of a batch"] = bs * H * L * L
        layers_heads = m.n_layers * H
    else:
        layers_heads = 1
    tensors["training batch"] = bs * x_elems
    tensors["test set"] = n_test * x_elems
    train_set = getattr(cfg.task, "train_size", 0) or 0
    if train_set:
        tensors["fixed training set"] = train_set * x_elems
    chunk = max(1, min(n_test, EVAL_ATTN_ELEMENTS // max(1, layers_heads * L * L)))
    state, batch = _state_and_batch(cfg)
    evaluation = 0 if m.kind == "ode" else (n_test + train_set) * x_elems * x_bytes + F32 * chunk * _activations(cfg)
    name, largest = max(tensors.items(), key=lambda kv: kv[1])
    return Estimate(
        params=n_params(cfg),
        largest_tensor=largest,
        largest_name=name,
        state_bytes=state,
        batch_bytes=batch,
        eval_bytes=evaluation,
        eval_steps=n_eval_steps(cfg.train.steps, cfg.eval.every),
        schedule_bytes=0 if m.kind == "ode" else LR_TABLE_BYTES_PER_STEP * cfg.train.steps,
    )


def meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes (OSError, ValueError or IndexError where it cannot be read)."""
    with open("/proc/meminfo") as fh:
        return {line.split(":")[0]: int(line.split()[1]) * 1024 for line in fh if line.split()}


def available_bytes(device: str) -> tuple[int | None, str]:
    """Memory a run may use on ``device`` ('cpu', 'cuda', 'cuda:N') and how it was measured; None = unknown."""
    if device.startswith("cuda"):
        import torch

        dev = torch.device(device)
        _, total = torch.cuda.mem_get_info(dev)
        return int(total * MEMORY_FRACTION), f"{device} has {human(total)}"
    try:
        info = meminfo()
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
    est = max((estimate(c) for c in cfgs), key=lambda e: e.total_bytes)
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

