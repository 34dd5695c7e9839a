"""Live resource use for the console's header, read in a thread worker (never on the UI thread): the CPU and
memory of this machine (psutil) and each GPU's use and memory through NVML (``nvidia-ml-py``, the ``pynvml``
module; ``pip install "sparse-tui[gpu]"``), not by parsing ``nvidia-smi``. The console never imports torch
(seconds of import and hundreds of MB for a header line; tests/tui/test_imports.py). Without NVML, or without a
GPU, or when NVML fails, the GPU part is None and the header says "no GPU".
"""

from __future__ import annotations

from typing import Any

import psutil


class Nvml:
    """NVML opened once (``nvmlInit``) and read on every ``summary()``; ``ok`` False when there is no NVML or no GPU.
    ``module``: the pynvml module (tests pass a fake one)."""

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
        except Exception:  # noqa: BLE001 - NVMLError (no driver, no GPU): the header says "no GPU"
            self.ok = False

    def summary(self) -> str | None:
        """``GPU0 H100 37% 12.1/80G`` per GPU; None without a GPU or when NVML fails now."""
        if not self.ok:
            return None
        parts = []
        try:
            for i in range(self.count):
                h = self.nv.nvmlDeviceGetHandleByIndex(i)
                util = self.nv.nvmlDeviceGetUtilizationRates(h).gpu
                mem = self.nv.nvmlDeviceGetMemoryInfo(h)
                parts.append(f"GPU{i} {self.names[i]} {util}% {mem.used / 2**30:.1f}/{mem.total / 2**30:.0f}G")
        except Exception:  # noqa: BLE001 - a GPU gone or a driver reset: say nothing rather than something wrong
            return None
        return "  ".join(parts) or None

    def close(self) -> None:
        if self.ok:
            try:
                self.nv.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass


def host_summary() -> str:
    """``CPU 35% · RAM 6.1/15.6G`` (the CPU share since the previous call: the first call primes it)."""
    vm = psutil.virtual_memory()
    return f"CPU {psutil.cpu_percent(None):.0f}% · RAM {(vm.total - vm.available) / 2**30:.1f}/{vm.total / 2**30:.1f}G"
