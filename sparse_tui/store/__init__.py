"""The run store: an SQLite database (WAL mode) in the runs directory, the hub of sparse-tui.

Training processes write to it; the TUI, ``runs``, ``show``, ``export`` and ``fit`` read it. Several processes can
read and write at once (WAL journal, busy timeout, short transactions). Nothing here imports torch or textual.

Tables
    runs       one row per run: config (JSON), flattened params, status, times, device, versions, summary.
    metrics    long form (run_id, step, name, value).
    attention  attention maps of a few fixed test sequences at chosen steps (compressed numpy arrays).
    arrays     small named arrays a run keeps (its final token embedding), raw bytes with shape and dtype.

Run lifecycle: ``queued -> running -> finished | diverged | failed | interrupted | cancelled``. A running run writes a
heartbeat; ``reap()`` (called by every reader) marks a running run whose process is gone, or whose heartbeat is older
than ``STALE_AFTER`` seconds, as ``failed`` at its last logged step. A terminal status is never rewritten
(``finish`` refuses); only ``requeue`` (``sparse-tui resume``) puts a failed or interrupted run back in the queue.

A batch has one or more **coordinators** (the processes that train its queued runs: the one that launched it, and
every ``resume`` of it); its queued runs are orphaned only when none of them is alive.

The package follows the store's seams, and ``RunStore`` is their sum: ``schema`` (the file: schema, migrations,
opening, connections, transactions), ``claims`` (the queue: launch, coordinators, claims, requeue, cancel, reaping),
``writes`` (what a run records, its end, the researcher's edits), ``reads`` (what the console and the commands read)
and ``records`` (``RunRecord``, ``StoreError`` and the helpers they share); ``RunSink`` is what a training run writes
through (the store, or a Ray worker's channel). The names imported below from
``records`` and ``schema`` are the package's API: import them from ``sparse_tui.store``.
"""

from sparse_tui.store.claims import Claims
from sparse_tui.store.reads import Reads
from sparse_tui.store.records import (
    DB_NAME,
    STATUSES,
    TERMINAL,
    RunRecord,
    StoreError,
    default_runs_dir,
    is_disk_full,
    pid_alive,
)
from sparse_tui.store.schema import SCHEMA_VERSION, StoreFile
from sparse_tui.store.writes import RunSink, Writes

__all__ = ["DB_NAME", "STATUSES", "TERMINAL", "RunRecord", "StoreError", "default_runs_dir", "is_disk_full",
           "pid_alive", "SCHEMA_VERSION", "StoreFile", "Claims", "Reads", "RunSink", "Writes", "RunStore"]


class RunStore(Reads, Writes, Claims, StoreFile, RunSink):
    """Access to ``RUNS_DIR/runs.db``. Cheap to create; one SQLite connection per thread.

    Opening checks the file before anything is written: a file that is not SQLite, a SQLite database of another
    program, or a store written by a newer sparse-tui (``meta.schema_version``) raises ``StoreError`` with one line
    and is left byte for byte as it was. An older store is migrated. ``create=False`` (the read-only commands)
    never creates a store."""

