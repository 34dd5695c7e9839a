"""What a figure needs: its preset's runs, those already in the store, those to train (``plan``), and
the store's runs of the same configuration (``match_runs``), so that a figure reuses what any earlier ``run``,
``reproduce`` or console launch trained.

No torch, no textual at import."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from pydantic import ValidationError

from sparse_tui.atlas import SIZES, AtlasError, Entry
from sparse_tui.presets.catalog import CatalogError, resolve
from sparse_tui.presets.loading import config_from_json, expand, load_preset
from sparse_tui.training.checkpoint import has_checkpoint

# A run recorded with one of these statuses is a result: reused, never trained again (a diverged run diverges
# again: training is seeded).
REUSED = ("finished", "diverged")


_NOT_CONFIG = ("name", "description", "tags")


def config_key(config: dict) -> str:
    """A run's configuration as canonical JSON, without the preset's name, description and tags."""
    return json.dumps({k: v for k, v in config.items() if k not in _NOT_CONFIG}, sort_keys=True)


def _canonical(config: dict) -> dict:
    """A stored config as today's schema writes it: a field added since the run was recorded takes its default
    (which is what the run trained with), so adding a field does not orphan the store's runs. A config the schema
    no longer accepts is kept as stored (it then matches nothing)."""
    try:
        return config_from_json(config).model_dump(mode="json")
    except ValidationError:
        return config


def index_runs(store: Any, statuses: Sequence[str] = REUSED) -> dict[str, list[Any]]:
    """The store's runs of ``statuses`` (default: those whose status is a result, ``REUSED``), by ``config_key`` of
    their canonical config."""
    by_key: dict[str, list[Any]] = {}
    for r in store.runs(status=list(statuses)):
        by_key.setdefault(config_key(_canonical(r.config)), []).append(r)
    return by_key


def match_runs(store: Any, specs: Sequence[Any], index: dict[str, list[Any]] | None = None
               ) -> tuple[dict[int, Any], list[int]]:
    """For each spec (``presets.RunSpec``) the newest store run of the same configuration whose status is a result
    (``REUSED``; finished before diverged). ``index``: ``index_runs(store)`` read once for many calls. Returns
    ({spec index: RunRecord}, [indices of specs with none])."""
    by_key = index_runs(store) if index is None else index
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
    name = entry.preset(size)
    if name is None:
        sizes = ", ".join(s for s in SIZES if entry.preset(s)) or "none"
        raise AtlasError(f"{entry.key}: no {size}-sized preset (sizes: {sizes})")
    try:
        path = resolve(name, presets_dir).path  # ./presets/NAME.toml of the user's own, else the bundled one
    except CatalogError as e:
        raise AtlasError(f"{entry.key}: {e}") from None
    loaded = load_preset(path)
    return loaded, expand(loaded)


@dataclass
class Plan:
    """An entry at one size: the preset's runs (``specs``), the store runs that already hold their results
    (``reused``: spec index -> RunRecord), the specs still without a result (``missing``) and, of those, the ones
    whose run an earlier ``reproduce`` (or ``run``) left interrupted or failed (``resumable``: spec index ->
    RunRecord): they are continued in their own row (from their checkpoint when they have one), never trained
    again as new runs, so the store holds one row per point and seed."""

    entry: Entry
    size: str
    preset: str
    specs: list[Any]
    reused: dict[int, Any]
    missing: list[int]
    resumable: dict[int, Any] = field(default_factory=dict)
    checkpointed: int = 0  # how many of ``resumable`` have a checkpoint to continue from
    elsewhere: dict[int, Any] = field(default_factory=dict)  # queued or running in another process: never trained here

    def to_train(self) -> list[Any]:
        """The specs to create as new runs (those with no row in the store at all)."""
        return [self.specs[i] for i in self.missing if i not in self.resumable and i not in self.elsewhere]

    def describe(self) -> str:
        cont = ""
        if self.resumable:
            ckpt = f" ({self.checkpointed} from a checkpoint)" if self.checkpointed else ""
            cont = f", {len(self.resumable)} resumed in their own rows{ckpt}"
        if self.elsewhere:
            cont += f", {len(self.elsewhere)} training elsewhere (not trained again)"
        return (f"{self.entry.key} ({self.entry.figure}): preset {self.preset} ({self.size}), {len(self.specs)} "
                f"run(s): {len(self.reused)} already in the store{cont}, {len(self.to_train())} to train")


RESUMED = ("interrupted", "failed")  # statuses of a run that reproduce continues in place (resume.RESUMABLE's ended)
TRAINING = ("queued", "running")  # a run another process is training (or about to): joined, never trained again


def training_runs(store: Any, specs: Sequence[Any], missing: Sequence[int]) -> dict[int, Any]:
    """For each of ``missing`` (spec indices), a store run of the same configuration that is queued or running (in
    another ``reproduce``, a console launch, a ``run``): the point is joined, not trained a second time."""
    return _same_config(store, specs, missing, TRAINING, key=lambda r: r.created_at)


def _same_config(store: Any, specs: Sequence[Any], missing: Sequence[int], statuses: Sequence[str], key: Any
                 ) -> dict[int, Any]:
    """For each of ``missing``, the store run in ``statuses`` of the same configuration that ranks highest by
    ``key``; each run is given to one spec index at most."""
    by_key = index_runs(store, statuses)
    out: dict[int, Any] = {}
    taken: set[str] = set()
    for i in missing:
        recs = [r for r in by_key.get(config_key(specs[i].config.model_dump(mode="json")), []) if r.run_id not in taken]
        if recs:
            out[i] = max(recs, key=key)
            taken.add(out[i].run_id)
    return out


def still_training(store: Any, p: Plan) -> list[str]:
    """The runs of ``p.elsewhere`` that are still queued or running now (read again: they may have ended since)."""
    ids = [r.run_id for r in p.elsewhere.values()]
    if not ids:
        return []
    now = {r.run_id for r in store.runs(status=list(TRAINING))}
    return [i for i in ids if i in now]


def resumable_runs(store: Any, specs: Sequence[Any], missing: Sequence[int]) -> dict[int, Any]:
    """For each of ``missing`` (spec indices), the store run of the same configuration that was interrupted or
    failed, if any: the one with the latest checkpoint, else the newest (older duplicates stay as they are)."""
    return _same_config(store, specs, missing, RESUMED,
                        key=lambda r: (has_checkpoint(store.runs_dir, r.run_id) or -1, r.created_at))


def resume_batches(store: Any, p: Plan) -> list[tuple[str, list[str], list[Any]]]:
    """``p.resumable`` by batch, as ``resume`` takes them: [(batch id, run ids, their specs)], checked first
    (``resume.check_resumable``: a writable store, configs that validate, checkpoints that are the runs' own;
    StoreError names a refused one). ``runner.run_headless(..., batch_id=, resume=)`` then re-queues and trains them
    in their own rows."""
    from sparse_tui.lifecycle.resume import check_resumable

    recs = [p.resumable[i] for i in sorted(p.resumable)]
    if not recs:
        return []
    specs = dict(zip((r.run_id for r in recs), check_resumable(store, [r.run_id for r in recs])))
    batches: dict[str, list[str]] = {}
    for r in recs:
        batches.setdefault(r.batch_id, []).append(r.run_id)
    return [(b, ids, [specs[i] for i in ids]) for b, ids in batches.items()]


def plan(store: Any, entry: Entry, size: str, presets_dir: Path | None = None) -> Plan:
    """The plan of ``entry`` at ``size`` against ``store``. Raises ``AtlasError`` / ``presets.PresetError``."""
    if entry.built:
        raise AtlasError(f"{entry.key}: {entry.built}")
    loaded, specs = load_specs(entry, size, presets_dir)
    reused, missing = match_runs(store, specs) if store is not None else ({}, list(range(len(specs))))
    resumable = resumable_runs(store, specs, missing) if store is not None else {}
    ckpt = sum(1 for r in resumable.values() if has_checkpoint(store.runs_dir, r.run_id) is not None)
    rest = [i for i in missing if i not in resumable]
    elsewhere = training_runs(store, specs, rest) if store is not None else {}
    return Plan(entry, size, loaded.name, specs, reused, missing, resumable, ckpt, elsewhere)


def read_only_problem(store: Any, chosen: Sequence[Entry], size: str, presets_dir: Path | None = None
                      ) -> str | None:
    """On a run store that can only be read (read-only media, a copy without write permission): None when every
    run the entries need is stored (``reproduce`` then only reports, as ``fit`` does), else the one line that says
    what would have to be trained."""
    need = {e.key: len(plan(store, e, size, presets_dir).missing) for e in chosen}
    missing = [f"{k} needs {n} run(s) trained" for k, n in need.items() if n]
    if not missing:
        return None
    return (f"{store.path}: the run store is read-only (file system or permissions); {'; '.join(missing)} "
            "(pass another --runs-dir)")


def plan_run_ids(store: Any, p: Plan) -> list[str]:
    """After training: the run of every spec (reused or newly finished), in the preset's order; specs still without
    a result (failed, interrupted) are left out."""
    found, _ = match_runs(store, p.specs)
    return [found[i].run_id for i in sorted(found)]
