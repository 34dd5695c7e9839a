"""GPU use for the header: ``nvidia-smi`` when present, else ``torch.cuda`` (imported lazily, in a worker thread).

Called from a thread worker only; never on the UI thread (importing torch takes seconds).
"""

from __future__ import annotations

import shutil
import subprocess


def gpu_summary() -> str | None:
    """One short line per machine, e.g. ``GPU0 H100 37% 12.1/80G``; None when there is no GPU."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=index,name,utilization.gpu,memory.used,memory.total",
                 "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=5, check=True,
            ).stdout
            parts = []
            for line in out.strip().splitlines():
                idx, name, util, used, total = [x.strip() for x in line.split(",")]
                short = name.replace("NVIDIA ", "").split()[0]
                parts.append(f"GPU{idx} {short} {util}% {float(used) / 1024:.1f}/{float(total) / 1024:.0f}G")
            return "  ".join(parts) or None
        except (OSError, subprocess.SubprocessError, ValueError):
            pass
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    parts = []
    for i in range(torch.cuda.device_count()):
        free, total = torch.cuda.mem_get_info(i)
        name = torch.cuda.get_device_name(i).replace("NVIDIA ", "").split()[0]
        parts.append(f"GPU{i} {name} {(total - free) / 2**30:.1f}/{total / 2**30:.0f}G")
    return "  ".join(parts) or None
