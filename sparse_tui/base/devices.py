"""The one device resolver: the torch device that ``train.device`` or ``--device`` (auto, cpu, cuda, cuda:N, mps)
names on this machine. The preflight, the trainer, the tasks, the Ray worker and ``doctor`` all ask it."""

from __future__ import annotations

from typing import Any


class DeviceError(RuntimeError):
    """A device that this machine does not have (one line)."""


def resolve(want: Any) -> Any:
    """``want`` (a name, a ``torch.device`` or None = auto) as a ``torch.device``; ``DeviceError`` when it is not
    here. ``auto`` (and None) is the first CUDA device when there is one, else the CPU."""
    import torch  # here, not at the top: runner.py imports this module and ``sparse-tui --help`` stays light

    if isinstance(want, torch.device):
        return want
    if want is None or want == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if want == "cpu":
        return torch.device("cpu")
    if want == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise DeviceError("mps is not available on this machine")
        return torch.device("mps")
    if isinstance(want, str) and (want == "cuda" or want.startswith("cuda:")):
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, no GPU visible"
            raise DeviceError(f"{want} requested but CUDA is not available (torch {torch.__version__}, {build})")
        index = want.split(":")[1] if ":" in want else "0"
        if not index.isdigit() or int(index) >= torch.cuda.device_count():
            raise DeviceError(f"{want} requested but this machine has {torch.cuda.device_count()} GPU(s)")
        return torch.device(want)
    raise DeviceError(f"unknown device {want!r}")
