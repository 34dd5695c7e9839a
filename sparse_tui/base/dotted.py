"""Nested tables as dotted keys (``{"task": {"d": 8}}`` -> ``{"task.d": 8}``): a preset's sections, a run's stored
config and the fit's rows share the one flattening."""

from __future__ import annotations

from typing import Any, Mapping


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested tables to dotted keys (lists stay values)."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out
