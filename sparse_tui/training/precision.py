"""The float modes a run trains in: ``train.flush_denormal`` on CPUs, ``train.precision`` (fp32 / tf32 / bf16) and
TF32 on CUDA, set while a stack trains and restored after (training/loop.py)."""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import torch


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


@contextmanager
def precision_mode(precision: str, device: torch.device):
    """``train.precision`` for the training steps (evaluations always run in float32):

    * ``fp32``: float32 everywhere (the default; the results the tests and docs quote);
    * ``tf32``: CUDA matmuls round their inputs to TensorFloat-32 (10-bit mantissa, float32 range and accumulation):
      curves match fp32 to about 1e-3 relative, plateau steps can move by an evaluation; no effect on CPUs;
    * ``bf16``: the forward runs under bfloat16 autocast (8-bit mantissa; weights, gradients, optimiser state and
      the loss stay float32): curves differ visibly from fp32 (about 1e-2), plateau lengths can shift; on CPUs it
      is slower than fp32 on most chips."""
    if precision == "tf32" and device.type == "cuda":
        with _tf32(True):
            yield nullcontext
        return
    if precision == "bf16":
        # cache_enabled=False: autocast's weight-cast cache must not outlive a CUDA graph capture
        yield lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16, cache_enabled=False)
        return
    yield nullcontext


def full_fp32(device: torch.device):
    """Evaluations run in float32 whatever ``train.precision`` says: TF32 matmuls are switched off inside."""
    return _tf32(False) if device.type == "cuda" and tf32_enabled() else nullcontext()


def _new_precision_api() -> bool:
    """Whether this torch has the ``fp32_precision`` switches (2.9 and later). Once anything in the process set one,
    reading the legacy ``allow_tf32`` raises ("mix of the legacy and new APIs"), so where they exist they are the
    only ones read or written here; older torch has the legacy flags only."""
    return hasattr(torch.backends.cuda.matmul, "fp32_precision")


def tf32_enabled() -> bool:
    """Whether CUDA float32 matmuls run in TensorFloat-32 now."""
    if _new_precision_api():
        p = torch.backends.cuda.matmul.fp32_precision
        if p == "none":  # inherits the global setting
            p = getattr(torch.backends, "fp32_precision", "none")
        return p == "tf32"
    return bool(torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32)


@contextmanager
def _tf32(on: bool):
    """CUDA matmuls in TensorFloat-32 (``on``) or in full float32 inside (the legacy flags: and cuDNN's; the
    models here run no convolution); the setting as it was after."""
    if _new_precision_api():
        m = torch.backends.cuda.matmul
        before = m.fp32_precision
        m.fp32_precision = "tf32" if on else "ieee"
        try:
            yield
        finally:
            m.fp32_precision = before
        return
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
