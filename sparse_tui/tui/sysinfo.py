"""GPU use for the header, from ``nvidia-smi`` (called from a thread worker, never on the UI thread).

The console never imports torch (seconds of import and hundreds of MB for a header line; tests/tui/test_imports.py):
without ``nvidia-smi`` the header says "no GPU".
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
    return None
