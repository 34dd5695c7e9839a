"""CUDA graphs for the training step (``train.cuda_graph``): the only CUDA-only code of the training loop.

The loop (training/loop.py) calls one step function, eagerly on every device; on CUDA it can instead capture that
same function once (sampling on the device from the runs' own generators, forward, backward, clipping, optimiser)
and replay it, which removes the per-kernel launch cost that dominates small models. The captured function reads
its learning rates from a device tensor the loop refreshes before each replay and accumulates the loss on the
device, so nothing is read back between evaluations. Evaluations run outside the graph.

The loop captures only after the stack's trial (``loop.trial_step``), which ran the step eagerly on the capture
stream (the warm-up torch asks for: cuBLAS handles, allocator, the optimiser's state) and checked, under CUDA's sync
debug mode (``host_syncs``), that the step never waits for the host: a step that does would fail mid-capture.

A capture that fails midway (measured on an H100 with torch 2.11: "Cannot copy between CPU and CUDA tensors during
CUDA graph capture ...") raises ``CaptureFailed``. Capture runs nothing, so no tensor changed; the generators
registered with the graph are replaced by fresh ones carrying their pre-capture state (torch versions that leave a
registered generator in capture mode after a failed ``capture_end`` make every later draw from it raise), and this
process captures nothing more and never empties the CUDA cache (the failed graph's private memory pool is never
released, and ``torch.cuda.empty_cache()`` can then trip an internal assert).
"""

from __future__ import annotations

import warnings
from typing import Callable

import torch

WARMUP_STEPS = 3  # eager steps on the capture stream before capture (the trial's; torch's advice for capture)

# Why graphs are off in this process (a capture failed here), or None.
_capture_broken: str | None = None


class CaptureFailed(RuntimeError):
    """The step could not be captured (``reason`` says why, with the underlying cause); nothing ran."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def capture_broken() -> str | None:
    """Why graphs are off in this process (a capture failed here), or None."""
    return _capture_broken


def free_cached_memory(device: torch.device) -> None:
    """``torch.cuda.empty_cache()`` where it is safe: on a CUDA device, in a process with no failed capture.
    The one place the package empties the CUDA cache (after an out-of-memory error, between fallback stacks)."""
    if device.type == "cuda" and _capture_broken is None:
        torch.cuda.empty_cache()


def describe(e: BaseException) -> str:
    """``Type: first line`` of an exception, and of its cause: torch's ``capture_end`` raises its own error while
    the one that broke the capture is in ``__context__``."""

    def one(x: BaseException) -> str:
        text = str(x).strip().splitlines()
        return f"{type(x).__name__}: {text[0] if text else ''}".strip()

    cause = e.__cause__ or e.__context__
    return one(e) + (f" (cause: {one(cause)})" if cause is not None and cause is not e else "")


def host_syncs(fn: Callable[[], None]) -> str | None:
    """Run ``fn`` once under CUDA's sync debug mode ("warn"): the first call that made the host wait for the
    device (``.item()``, a copy from pageable host memory, ``nonzero``, ...), or None. ``fn`` runs to the end
    either way, so its state changes are those of a normal call."""
    before = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(before)
    # only the per-call warning ("called a synchronizing CUDA operation"), not the notice torch prints once when the
    # mode is first set ("Synchronization debug mode is a prototype feature ...": seen on an H100, torch 2.11)
    hits = [str(w.message).strip().splitlines()[0] for w in seen if "called a synchronizing" in str(w.message)]
    return hits[0] if hits else None


class GraphedStep:
    """``fn`` captured once as a CUDA graph on ``stream``; ``step()`` replays it.

    ``slots``: ``(owner, attribute)`` pairs holding the CUDA generators ``fn`` draws from (the tasks' streams);
    they are registered with the graph, so that every replay advances them as an eager step would. Raises
    ``CaptureFailed`` (after replacing those generators by fresh ones in the same state) when the capture fails,
    or when an earlier capture in this process failed."""

    def __init__(self, fn: Callable[[], None], slots: list[tuple[object, str]], device: torch.device,
                 stream) -> None:
        global _capture_broken
        if _capture_broken is not None:
            raise CaptureFailed(f"an earlier CUDA graph capture in this process failed ({_capture_broken})")
        gens = [getattr(owner, name) for owner, name in slots]
        states = [g.get_state() for g in gens]
        graph = torch.cuda.CUDAGraph()
        for g in gens:
            graph.register_generator_state(g)
        stream.wait_stream(torch.cuda.current_stream(device))
        try:
            with torch.cuda.graph(graph, stream=stream):
                fn()
        except Exception as e:  # noqa: BLE001 - any failure: no graph, the caller decides (eager or fail)
            _capture_broken = why = describe(e)
            for (owner, name), old, state in zip(slots, gens, states):
                fresh = type(old)(device=old.device)
                fresh.set_state(state)
                setattr(owner, name, fresh)
            raise CaptureFailed(why) from None
        torch.cuda.current_stream(device).wait_stream(stream)
        self.graph = graph

    def step(self) -> None:
        self.graph.replay()
