"""Projections calibrated on the card that trains, cached per card (issue 44), torch-free to read.

On a GPU, the first stack a process trains times itself once training began (``Calibrator``, training/loop.py): its
first evaluation (the runs' evaluations at step 0, written to the store) and ``STEPS`` training steps (graph replays
when the step is captured), one device synchronisation at the end. Each stack's point (its padded training GFLOP per
step, ms per step, seconds per evaluation of one run, the process's start-up) is added to a JSON cache,
``$SPARSE_TUI_CACHE/gpu_calibration.json`` (default ``$XDG_CACHE_HOME/sparse-tui``, else ``~/.cache/sparse-tui``),
under the card's name (``torch.cuda.get_device_name``). ``lifecycle/estimate.py`` projects from a card's points when
it has them (a step line fitted through them) and from the H100 cost model of 2026-11-26 otherwise.

A failure to read or write the cache never stops training or a dry run: the projection then falls back.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

STEPS = 20  # training steps timed per stack (after its first evaluation)
KEEP = 64  # points kept per card (the newest)


def cache_path() -> Path:
    root = os.environ.get("SPARSE_TUI_CACHE")
    if root:
        return Path(root) / "gpu_calibration.json"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "sparse-tui" / "gpu_calibration.json"


def load() -> dict[str, list[dict]]:
    """Every card's points (``{card name: [point, ...]}``); {} when there is no cache or it cannot be read."""
    try:
        data = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): [p for p in v if isinstance(p, dict)] for k, v in data.items() if isinstance(v, list)}


def record(card: str, point: dict) -> bool:
    """Add ``point`` (``gflop``, ``ms_per_step``, ``eval_s``, ``start_s``, ``runs``, ``precision``, ``graphed``) to
    ``card``'s points, written whole by ``files.write_file``. False when the cache cannot be written."""
    data = load()
    pts = data.setdefault(card, [])
    pts.append({**point, "date": time.strftime("%Y-%m-%d")})
    data[card] = pts[-KEEP:]
    from sparse_tui.base.files import WriteError, write_file

    try:  # the one writer: all or nothing, like every file the package writes outside the store
        write_file(cache_path(), lambda fh: fh.write(json.dumps(data, indent=1)), mkdir=True)
    except WriteError:
        return False
    return True


def step_line(points: list[dict]) -> tuple[float, float] | None:
    """``(ms at 0 GFLOP, ms per GFLOP)`` of a card's fp32 training steps: a least-squares line through its points
    when they span two sizes or more and the line makes sense (both terms positive); else None (one size fixes a
    scale only: ``fp32_points``)."""
    pts = fp32_points(points)
    if len({x for x, _ in pts}) < 2:
        return None
    n = len(pts)
    mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
    b = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    a = my - b * mx
    return (a, b) if a >= 0 and b > 0 else None


def fp32_points(points: list[dict]) -> list[tuple[float, float]]:
    """``(GFLOP per step, ms per step)`` of a card's fp32 points."""
    return [(float(p["gflop"]), float(p["ms_per_step"])) for p in points
            if p.get("precision", "fp32") == "fp32" and p.get("gflop") and p.get("ms_per_step")]


def mean_of(points: list[dict], key: str) -> float | None:
    vals = [float(p[key]) for p in points if p.get(key) is not None]
    return sum(vals) / len(vals) if vals else None


def card_of(device) -> str | None:
    """The card's name (``torch.cuda.get_device_name``) for a CUDA device, else None (nothing is calibrated)."""
    if getattr(device, "type", None) != "cuda":
        return None
    import torch

    return torch.cuda.get_device_name(device)


_FIRST = [True]  # the process's first stack records the start-up (later ones started long before their step 0)


class Calibrator:
    """One stack's first seconds on a card (training/loop.py): ``evaluated(seconds)`` after its first evaluation,
    ``begin(step)`` before its first timed step, ``step(step)`` after each (``pause`` / ``resume`` around an
    evaluation among them: not counted as step time); at ``STEPS`` steps it synchronises the device and records the
    point. Never raises: a calibration that fails is not recorded."""

    def __init__(self, card: str, device, cfgs: list, graphed: bool, since_start: float) -> None:
        from sparse_tui.training.flops import stack_flops

        self.card, self.device, self.graphed = card, device, graphed
        self.runs = len(cfgs)
        self.gflop = stack_flops(cfgs) / 1e9
        self.precision = cfgs[0].train.precision
        self.start_s = since_start if _FIRST[0] else None
        _FIRST[0] = False
        self.eval_s: float | None = None
        self.t0 = self.first = self.paused = None

    def evaluated(self, seconds: float) -> None:
        self.eval_s = seconds / max(1, self.runs)  # per evaluation of one run, as the projection counts them

    def _sync(self) -> None:
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)

    def begin(self, step: int) -> None:
        self._sync()
        self.t0, self.first = time.perf_counter(), step

    def pause(self) -> None:
        """Before an evaluation inside the timed steps (the projection counts evaluations apart): the steps queued
        so far finish first, then the clock stops until ``resume``."""
        if self.t0 is not None:
            self._sync()
            self.paused = time.perf_counter()

    def resume(self) -> None:
        if self.t0 is not None and self.paused is not None:
            self.t0 += time.perf_counter() - self.paused
            self.paused = None

    def step(self, step: int) -> bool:
        """After training step ``step``; True once the point is recorded (the caller then drops this)."""
        if self.t0 is None or step - self.first < STEPS:
            return False
        try:
            self._sync()
            ms = 1e3 * (time.perf_counter() - self.t0) / (step - self.first)
            point = {"gflop": self.gflop, "ms_per_step": ms, "eval_s": self.eval_s, "start_s": self.start_s,
                     "runs": self.runs, "precision": self.precision, "graphed": self.graphed}
            if self.device.type == "cuda":
                import torch

                point["memory_bytes"] = torch.cuda.get_device_properties(self.device).total_memory
                point["torch"] = torch.__version__
            record(self.card, point)
        except Exception:  # noqa: BLE001 - a calibration never stops a run
            pass
        return True
