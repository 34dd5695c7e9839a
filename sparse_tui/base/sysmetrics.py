"""System metrics, torch-free: the process's CPU share and resident memory (psutil) and a GPU's utilisation and
memory through NVML (``nvidia-ml-py``, the ``pynvml`` module; ``pip install "sparse-tui[gpu]"``), never by parsing
``nvidia-smi``. Two readers: the console's header (tui/sysinfo.py, every 2 s in a thread worker) and the training
loop, which records ``sys/*`` metrics with every evaluation of a run (training/loop.py ``evaluate_due``):

* ``sys/cpu_pct``: CPU time of this process over wall time since the previous sample (the first: since the process
  started), in % of one core (200 = two cores busy);
* ``sys/rss_mb``: the process's resident memory, MiB;
* ``sys/gpu_util`` / ``sys/gpu_mem_mb`` (CUDA runs, NVML present): the GPU's utilisation over NVML's last sample
  period, %, and the memory in use on that GPU (every process on it), MiB.

``SPARSE_TUI_SYSTEM_METRICS=0`` (or ``off``, ``false``, ``no``, any case) turns the recording off (the test suite
does, so that the runs it compares bit for bit carry only deterministic metrics; tests/test_sysmetrics.py turns it
on). Reading them costs microseconds and never waits for the GPU (tests/test_no_host_sync.py runs the evaluation
path's sample under its sync guard). Without NVML, without a GPU, or when NVML fails, the GPU metrics are absent.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psutil

OFF = ("0", "off", "false", "no")  # SPARSE_TUI_SYSTEM_METRICS values that turn the recording off


class Nvml:
    """NVML opened once (``nvmlInit``); ``ok`` False when there is no NVML or no GPU. ``module``: the pynvml module
    (tests pass a fake one)."""

    def __init__(self, module: Any = None) -> None:
        self.nv = module
        self.ok = False
        if self.nv is None:
            try:
                import pynvml as nv  # nvidia-ml-py
            except ImportError:
                return
            self.nv = nv
        try:
            self.nv.nvmlInit()
            self.count = int(self.nv.nvmlDeviceGetCount())
            self.names = []
            for i in range(self.count):
                name = self.nv.nvmlDeviceGetName(self.nv.nvmlDeviceGetHandleByIndex(i))
                name = name.decode() if isinstance(name, bytes) else str(name)
                self.names.append(name.replace("NVIDIA ", "").split()[0] if name.strip() else f"GPU{i}")
            self.ok = self.count > 0
        except Exception:  # noqa: BLE001 - NVMLError (no driver, no GPU): "no GPU"
            self.ok = False

    def read(self, i: int) -> tuple[float | None, float | None, float | None] | None:
        """GPU ``i``'s (utilisation %, memory used MiB, memory total MiB); None without it or when NVML fails. The
        utilisation and the memory are read apart: a card or a driver that answers NotSupported for one (MIG
        slices, some virtual GPUs) still gives the other, the missing one None."""
        if not self.ok or not 0 <= i < self.count:
            return None
        try:
            h = self.nv.nvmlDeviceGetHandleByIndex(i)
        except Exception:  # noqa: BLE001 - a GPU gone or a driver reset: say nothing rather than something wrong
            return None
        util = used = total = None
        try:
            util = float(self.nv.nvmlDeviceGetUtilizationRates(h).gpu)
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported and the like: this one stays unknown
            pass
        try:
            mem = self.nv.nvmlDeviceGetMemoryInfo(h)
            used, total = mem.used / 2**20, mem.total / 2**20
        except Exception:  # noqa: BLE001
            pass
        return None if util is None and used is None else (util, used, total)

    def summary(self) -> str | None:
        """``GPU0 H100 37% 12.1/80G`` per GPU (``?`` for what the card does not report); None without a GPU or
        when NVML fails now."""
        parts = []
        for i in range(self.count if self.ok else 0):
            r = self.read(i)
            if r is None:
                return None
            util = "?" if r[0] is None else f"{r[0]:.0f}"
            mem = "?" if r[1] is None else f"{r[1] / 1024:.1f}/{r[2] / 1024:.0f}G"
            parts.append(f"GPU{i} {self.names[i]} {util}% {mem}")
        return "  ".join(parts) or None

    def close(self) -> None:
        if self.ok:
            try:
                self.nv.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass


def nvml_index(cuda_index: int | None) -> int:
    """NVML's index of CUDA device ``cuda_index`` (``CUDA_VISIBLE_DEVICES`` renumbers CUDA's, not NVML's)."""
    i = cuda_index or 0
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if i < len(visible) and visible[i].isdigit():
        return int(visible[i])
    return i


class SystemSampler:
    """``sample(device_type, index)`` -> the ``sys/*`` metrics of this process now (module docstring). NVML is
    opened at the first sample of a CUDA run only; ``nvml`` may be given (tests pass a fake)."""

    def __init__(self, nvml: Nvml | None = None) -> None:
        self.nvml = nvml
        self._proc: psutil.Process | None = None
        self._last: tuple[float, float] | None = None  # (wall, cpu seconds) at the previous sample

    @staticmethod
    def enabled() -> bool:
        """Off for ``0``, ``off``, ``false`` or ``no`` (any case, spaces around ignored: ``' 0'`` is off too)."""
        return os.environ.get("SPARSE_TUI_SYSTEM_METRICS", "1").strip().lower() not in OFF

    def sample(self, device_type: str = "cpu", index: int | None = None) -> dict[str, float]:
        """The ``sys/*`` metrics now; {} when recording is off (``SPARSE_TUI_SYSTEM_METRICS=0``)."""
        if not self.enabled():
            return {}
        if self._proc is None or self._proc.pid != os.getpid():  # a forked worker samples itself
            self._proc, self._last = psutil.Process(), None
        p = self._proc
        with p.oneshot():
            t = p.cpu_times()
            cpu, rss = t.user + t.system, p.memory_info().rss
            wall0, cpu0 = self._last or (p.create_time(), 0.0)
        now = time.time()
        self._last = (now, cpu)
        out = {"sys/cpu_pct": 100.0 * (cpu - cpu0) / max(now - wall0, 1e-3), "sys/rss_mb": rss / 2**20}
        if device_type == "cuda":
            if self.nvml is None:
                self.nvml = Nvml()
            r = self.nvml.read(nvml_index(index))
            for key, v in zip(("sys/gpu_util", "sys/gpu_mem_mb"), r or ()):
                if v is not None:
                    out[key] = v
        return out


SYSTEM = SystemSampler()  # the process's sampler (the training loop's)
