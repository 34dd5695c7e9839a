"""The run store's records and the helpers every part of it shares: statuses, ``RunRecord`` (a decoded row of the
runs table), ``StoreError``, liveness (``pid_alive``, ``stale_after``), ids and JSON. Nothing here touches a database.
"""

from __future__ import annotations

import errno
import functools
import json
import math
import os
import secrets
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATUSES = ("queued", "running", "finished", "diverged", "failed", "interrupted", "cancelled")
TERMINAL = frozenset({"finished", "diverged", "failed", "interrupted", "cancelled"})
STALE_AFTER = 60.0  # seconds without heartbeat before a run (or coordinator) on another host counts as dead
DB_NAME = "runs.db"
# The dtypes ``log_array`` stores (raw little-endian bytes; nothing a file holds is ever unpickled).
ARRAY_DTYPES = ("<f4", "<f8", "<i8")


def stale_after() -> float:
    """Seconds without a heartbeat after which a run or coordinator on *another host* counts as dead
    (``$SPARSE_TUI_STALE_AFTER``, default 60). On this host liveness is decided by the pid alone."""
    try:
        return float(os.environ.get("SPARSE_TUI_STALE_AFTER") or STALE_AFTER)
    except ValueError:
        return STALE_AFTER


def is_disk_full(exc: BaseException) -> bool:
    """Whether an exception says the disk (or the database's quota) is full."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(exc, sqlite3.Error) and "disk is full" in str(exc).lower()


def default_runs_dir() -> Path:
    """``$SPARSE_TUI_RUNS`` or ``./runs``."""
    return Path(os.environ.get("SPARSE_TUI_RUNS") or "runs")


def new_id(nbytes: int = 4) -> str:
    return secrets.token_hex(nbytes)


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().split(b")")[-1].split()[0]
        return state != b"Z"
    except OSError:
        return True


@dataclass
class RunRecord:
    """One row of the runs table, with JSON columns decoded."""

    run_id: str
    batch_id: str
    preset: str
    preset_path: str | None
    label: str
    status: str
    reason: str | None
    config: dict
    params: dict
    swept: dict
    seed: int | None
    device: str | None
    versions: dict
    host: str | None
    pid: int | None
    created_at: float
    started_at: float | None
    ended_at: float | None
    heartbeat_at: float | None
    step: int
    total_steps: int | None
    plateau_step: float | None
    summary: dict = field(default_factory=dict)
    cancel_requested: bool = False
    position: int = 0  # index of the run in its batch (sweep order)
    note: str | None = None  # the researcher's note (sparse-tui note, n in the console)
    tags: list = field(default_factory=list)  # the preset's tags, or as edited since (sparse-tui tag, T)
    archived: bool = False  # hidden from runs and the console unless asked for (sparse-tui archive)

    @functools.cached_property
    def run_config(self) -> Any:
        """The run's config as today's schema reads it (``presets.RunConfig``), validated once: a field added since
        the run was recorded takes its default (what the run trained with); None when the stored config no longer
        validates. The one typed read of ``config``: reports, forecasts and executors read its fields."""
        from pydantic import ValidationError

        from sparse_tui.presets.loading import config_from_json

        try:
            return config_from_json(self.config)
        except (ValidationError, ValueError, TypeError):
            return None

    @property
    def duration(self) -> float | None:
        if self.started_at is None:
            return None
        end = self.ended_at or (self.heartbeat_at if self.status != "running" else time.time())
        return max(0.0, (end or time.time()) - self.started_at)

    @property
    def name(self) -> str:
        """What tells a run apart (tables, legends, exports, the compare view): its preset and its label (the swept
        values and the keys edited away from the preset file, then the seed)."""
        return f"{self.preset} {self.label or ''}".strip()

    @property
    def final(self) -> dict:
        return self.summary.get("final", {}) if self.summary else {}

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _row_to_record(row: sqlite3.Row) -> RunRecord:
    """A row as a record. Columns this version does not know (added by a newer or patched sparse-tui at the same
    schema version) are ignored."""
    d = {k: row[k] for k in row.keys() if k in _FIELDS}
    for key in ("config", "params", "swept", "versions", "summary"):
        d[key] = json.loads(d[key]) if d.get(key) else {}
    if d.get("plateau_step") is not None and (isinstance(d["plateau_step"], bool)
                                              or not isinstance(d["plateau_step"], (int, float))):
        raise ValueError(f"plateau_step {d['plateau_step']!r} is not a number")
    d["cancel_requested"] = bool(d["cancel_requested"])
    d["archived"] = bool(d.get("archived"))
    tags = json.loads(d["tags"]) if d.get("tags") is not None else (d["config"] or {}).get("tags")
    d["tags"] = [str(t) for t in tags] if isinstance(tags, list) else []
    return RunRecord(**d)


_FIELDS = frozenset(RunRecord.__dataclass_fields__)


def _json(obj: Any) -> str:
    return json.dumps(obj, default=_json_default, allow_nan=True)


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


class StoreError(Exception):
    """A problem with the run store (missing directory, unknown run id, damaged or foreign file, ...)."""


def _shown(text: str) -> str:
    """A user-given id in quotes, control characters escaped."""
    return "'" + "".join(c if c.isprintable() else repr(c)[1:-1] for c in text) + "'"


def _finite_or_none(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None

