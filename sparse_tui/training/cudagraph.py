"""CUDA graphs for the training step (``train.cuda_graph``): the only CUDA-only code of the training loop.

The loop (training/loop.py) calls one step function, eagerly on every device; on CUDA it can instead capture that
same function once (sampling on the device from the runs' own generators, forward, backward, clipping, optimiser)
and replay it, which removes the per-kernel launch cost that dominates small models. The captured function reads
its learning rates from a device tensor the loop refreshes before each replay and accumulates the loss on the
device, so nothing is read back between evaluations. Evaluations run outside the graph.
"""

from __future__ import annotations

from typing import Callable

import torch

WARMUP_STEPS = 3  # eager steps on a side stream before capture (cuBLAS / allocator warm-up, as torch advises)

# A capture that fails midway leaves torch's caching allocator with a capture "underway" (its private pool is
# never released), after which ``torch.cuda.empty_cache()`` trips an internal assert, and any later capture in
# the process is unsafe. Once one fails, this process captures nothing more and never empties the cache.
_capture_broken: str | None = None


def capture_broken() -> str | None:
    """Why graphs are off in this process (a capture failed here), or None."""
    return _capture_broken


def free_cached_memory(device: torch.device) -> None:
    """``torch.cuda.empty_cache()`` where it is safe: on a CUDA device, in a process with no failed capture.
    The one place the package empties the CUDA cache (after an out-of-memory error, between fallback stacks)."""
    if device.type == "cuda" and _capture_broken is None:
        torch.cuda.empty_cache()


class GraphedStep:
    """``step()`` runs ``fn`` eagerly for the first ``WARMUP_STEPS`` calls, then captures it and replays it.

    ``generators``: the CUDA generators ``fn`` draws from (the tasks' streams); they are registered with the graph
    so that every replay advances them like an eager step would."""

    def __init__(self, fn: Callable[[], None], generators: list[torch.Generator], device: torch.device):
        self.fn, self.generators, self.device = fn, generators, device
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.stream = torch.cuda.Stream(device)

    def step(self) -> None:
        if self.graph is not None:
            self.graph.replay()
            return
        self.calls += 1
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):
            if self.calls <= WARMUP_STEPS:
                self.fn()
            else:
                g = torch.cuda.CUDAGraph()
                for gen in self.generators:
                    g.register_generator_state(gen)
                with torch.cuda.graph(g, stream=self.stream):
                    self.fn()
                self.graph = g
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
        if self.graph is not None:
            self.graph.replay()  # capture records the step without running it
