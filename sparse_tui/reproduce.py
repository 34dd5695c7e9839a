"""``sparse-tui reproduce``: the atlas (``sparse_tui.atlas``) put to work.

* ``status_rows``: one row per atlas entry for ``reproduce --list`` and the console's atlas: what it shows, its
  presets, how many of each preset's runs the store already holds finished (matched by configuration, see
  ``match_runs``) and the last measurement the record in docs/REPRODUCTION.md reports.
* ``match_runs``: the store's finished runs whose configuration equals a preset's run (the preset's name,
  description and tags aside), so that a figure reuses what any earlier ``run`` or ``reproduce`` trained.

No torch, no textual at import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from sparse_tui.atlas import SIZES, AtlasError, Entry, entries, preset_path

# A run recorded with one of these statuses is a result: reused, never trained again (a diverged run diverges
# again: training is seeded).
REUSED = ("finished", "diverged")
_NOT_CONFIG = ("name", "description", "tags")


def config_key(config: dict) -> str:
    """A run's configuration as canonical JSON, without the preset's name, description and tags."""
    return json.dumps({k: v for k, v in config.items() if k not in _NOT_CONFIG}, sort_keys=True)


def match_runs(store: Any, specs: Sequence[Any]) -> tuple[dict[int, Any], list[int]]:
    """For each spec (``presets.RunSpec``) the newest store run of the same configuration whose status is a result
    (``REUSED``; finished before diverged). Returns ({spec index: RunRecord}, [indices of specs with none])."""
    by_key: dict[str, list[Any]] = {}
    for r in store.runs(status=list(REUSED)):
        by_key.setdefault(config_key(r.config), []).append(r)
    found: dict[int, Any] = {}
    missing: list[int] = []
    for i, spec in enumerate(specs):
        recs = by_key.get(config_key(spec.config.model_dump(mode="json")), [])
        recs = sorted(recs, key=lambda r: (r.status != "finished", -r.created_at))
        if recs:
            found[i] = recs[0]
        else:
            missing.append(i)
    return found, missing


def load_specs(entry: Entry, size: str, presets_dir: Path | None = None) -> tuple[Any, list[Any]]:
    """The loaded preset of ``entry`` at ``size`` and its runs. Raises ``AtlasError`` (no such size, file missing) or
    ``presets.PresetError``."""
    from sparse_tui.presets import expand, load_preset

    name = entry.preset(size)
    if name is None:
        sizes = ", ".join(s for s in SIZES if entry.preset(s)) or "none"
        raise AtlasError(f"{entry.key}: no {size}-sized preset (sizes: {sizes})")
    loaded = load_preset(preset_path(name, presets_dir))
    return loaded, expand(loaded)


@dataclass
class StatusRow:
    entry: Entry
    stored: dict[str, str]  # size -> "12/30" finished runs of that preset in the store, "" when unknown


def status_rows(store: Any | None, presets_dir: Path | None = None, only: Iterable[Entry] | None = None
                ) -> list[StatusRow]:
    """Every atlas entry (or ``only``) with, per size, how many of its preset's runs the store holds as results."""
    rows = []
    for e in (list(only) if only is not None else entries()):
        stored: dict[str, str] = {}
        for size in SIZES:
            if e.preset(size) is None or store is None or e.built:
                continue
            if size == "gpu" and e.preset("gpu") == e.preset("cpu"):
                continue
            try:
                _, specs = load_specs(e, size, presets_dir)
            except AtlasError:
                stored[size] = "preset missing"
                continue
            except Exception:  # a broken preset is shown, not fatal for the listing
                stored[size] = "preset invalid"
                continue
            found, _ = match_runs(store, specs)
            stored[size] = f"{len(found)}/{len(specs)}"
        rows.append(StatusRow(e, stored))
    return rows


def format_status(rows: Sequence[StatusRow], with_store: bool) -> list[tuple[str, ...]]:
    """Table cells of ``reproduce --list``: key, figure, kind, what it shows, presets (cpu / gpu), stored runs, the
    record's last measurement (or why it is not built)."""
    out = []
    for r in rows:
        e = r.entry
        presets = " / ".join(f"{s}: {e.preset(s)}" for s in SIZES if e.preset(s)
                             and not (s == "gpu" and e.preset("gpu") == e.preset("cpu"))) or "-"
        stored = ", ".join(f"{s} {v}" for s, v in r.stored.items()) if with_store else "-"
        status = e.built or e.measured or "built, not measured yet"
        out.append((e.key, e.figure, e.kind, e.shows, presets, stored or "-", status))
    return out
