"""What an install without an extra cannot do, said in one line (README, "Install"). The built-in training needs
torch, which is the ``train`` extra: viewing, fitting, exporting, the theory and the logging API do not."""

from __future__ import annotations

import importlib.util

TRAIN_HINT = ('training needs torch, which this install lacks: pip install "sparse-tui[train]" (on a machine without'
              " a GPU, first: pip install torch --index-url https://download.pytorch.org/whl/cpu)")


def missing_torch() -> str | None:
    """``TRAIN_HINT`` when torch cannot be imported here (None when it can); torch itself is not imported."""
    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # an import hook that refuses it, a half-removed install
        found = False
    return None if found else TRAIN_HINT
