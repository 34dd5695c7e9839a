"""Live resource use for the console's header, read in a thread worker (never on the UI thread): the CPU and
memory of this machine (psutil) and each GPU's use and memory through NVML (``sparse_tui.base.sysmetrics.Nvml``, which
the
training loop's per-run ``sys/*`` metrics read too), not by parsing ``nvidia-smi``. The console never imports torch
(seconds of import and hundreds of MB for a header line; tests/tui/test_imports.py). Without NVML, or without a
GPU, or when NVML fails, the GPU part is None and the header says "no GPU".
"""

from __future__ import annotations

import psutil


def host_summary() -> str:
    """``CPU 35% · RAM 6.1/15.6G`` (the CPU share since the previous call: the first call primes it)."""
    vm = psutil.virtual_memory()
    return f"CPU {psutil.cpu_percent(None):.0f}% · RAM {(vm.total - vm.available) / 2**30:.1f}/{vm.total / 2**30:.1f}G"
