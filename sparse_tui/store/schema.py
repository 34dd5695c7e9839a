"""The run store's file: the schema, its migrations, and opening a store (checked before anything is written),
its connections (one per thread and process) and transactions. ``StoreFile`` is the base of ``RunStore``."""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
from pathlib import Path

from sparse_tui.store.records import DB_NAME, StoreError, default_runs_dir

# 1: runs, metrics, attention, meta.  2: + batches (each batch's coordinator: pid, host, heartbeat).
# 3: batches -> coordinators (a batch may have several coordinators at once: its launcher and each resume of it).
# 4: + runs.note, runs.tags (edited after launch; NULL: the preset's tags in the config), runs.archived.
# 5: + arrays (small named arrays a run keeps after its checkpoints are gone: its final token embedding).
# 6: + metrics.time (the wall-clock time a point was logged; NULL in older stores' points).
SCHEMA_VERSION = 6


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    batch_id TEXT NOT NULL,
    preset TEXT NOT NULL,
    preset_path TEXT,
    label TEXT,
    status TEXT NOT NULL,
    reason TEXT,
    config TEXT NOT NULL,
    params TEXT NOT NULL,
    swept TEXT NOT NULL,
    seed INTEGER,
    device TEXT,
    versions TEXT,
    host TEXT,
    pid INTEGER,
    created_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    heartbeat_at REAL,
    step INTEGER NOT NULL DEFAULT 0,
    total_steps INTEGER,
    plateau_step REAL,
    summary TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    position INTEGER NOT NULL DEFAULT 0,
    note TEXT,
    tags TEXT,
    archived INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_batch ON runs (batch_id, status);
CREATE INDEX IF NOT EXISTS runs_status ON runs (status);
CREATE TABLE IF NOT EXISTS metrics (
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    step INTEGER NOT NULL,
    value REAL,
    time REAL,
    PRIMARY KEY (run_id, name, step)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS coordinators (
    batch_id TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at REAL,
    heartbeat_at REAL,
    PRIMARY KEY (batch_id, host, pid)
);
CREATE TABLE IF NOT EXISTS attention (
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    meta TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, step)
);
CREATE TABLE IF NOT EXISTS arrays (
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    shape TEXT NOT NULL,
    dtype TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, name)
);
"""


# Schema migrations: the statements that take a store from version N to N + 1 (all additive).
_MIGRATIONS = {
    1: [
        "CREATE TABLE IF NOT EXISTS batches (batch_id TEXT PRIMARY KEY, pid INTEGER, host TEXT, started_at REAL,"
        " heartbeat_at REAL)"
    ],
    2: [
        "CREATE TABLE IF NOT EXISTS coordinators (batch_id TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL,"
        " started_at REAL, heartbeat_at REAL, PRIMARY KEY (batch_id, host, pid))",
        "INSERT OR IGNORE INTO coordinators SELECT batch_id, host, pid, started_at, heartbeat_at FROM batches"
        " WHERE host IS NOT NULL AND pid IS NOT NULL",
        "DROP TABLE batches",
    ],
    3: [
        "ALTER TABLE runs ADD COLUMN note TEXT",
        "ALTER TABLE runs ADD COLUMN tags TEXT",
        "ALTER TABLE runs ADD COLUMN archived INTEGER NOT NULL DEFAULT 0",
    ],
    4: [
        "CREATE TABLE IF NOT EXISTS arrays (run_id TEXT NOT NULL, name TEXT NOT NULL, shape TEXT NOT NULL,"
        " dtype TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (run_id, name))"
    ],
    5: ["ALTER TABLE metrics ADD COLUMN time REAL"],
}


def _read_only_fs(path: Path) -> bool:
    """Whether ``path`` lies on a file system mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


class StoreFile:
    """Opens ``RUNS_DIR/runs.db`` (see ``RunStore``); the connection of this thread and process, transactions."""

    def __init__(self, runs_dir: str | Path | None = None, *, create: bool = True):
        self.runs_dir = Path(runs_dir) if runs_dir is not None else default_runs_dir()
        self.path = self.runs_dir / DB_NAME
        self.warnings: list[str] = []  # damaged rows skipped while reading (shown by the CLI)
        self._overrides: dict[str, tuple[str, str, float]] = {}  # reaped in memory when the store can't be written
        self._local = threading.local()
        self._host = socket.gethostname()
        self.read_only = False  # set when the store can only be read (read-only mount or permissions)
        if self.runs_dir.exists() and not self.runs_dir.is_dir():
            raise StoreError(f"{self.runs_dir}: not a directory (--runs-dir must name a directory)")
        if self.path.exists() and not self.path.is_file():
            raise StoreError(f"{self.path}: not a file")
        if not self.path.exists():
            if not create:
                raise StoreError(f"{self.path}: no run store here (run a preset first, or pass --runs-dir)")
            try:
                self.runs_dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"{self.runs_dir}: cannot create the run store directory: {e.strerror}") from None
            if not os.access(self.runs_dir, os.W_OK | os.X_OK):
                raise StoreError(f"{self.runs_dir}: directory is not writable; cannot create a run store here")
        version = self._inspect(create)
        if self.read_only:
            if version is not None and version < SCHEMA_VERSION:
                raise StoreError(f"{self.path}: an older store (schema {version}) on read-only media; copy it to a"
                                 " writable directory to upgrade it")
            return
        try:
            if version is None:
                self.con.executescript(_SCHEMA)  # executescript manages its own transaction
                with self._tx() as con:
                    con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif version < SCHEMA_VERSION:
                self._migrate(version)
            else:
                self.con  # WAL mode and pragmas
        except sqlite3.Error as e:
            if not create and version == SCHEMA_VERSION and isinstance(e, sqlite3.OperationalError) \
                    and self._without_shm(e):
                self.close()
                return
            raise StoreError(f"{self.path}: cannot open the run store: {e}") from None

    def _inspect(self, create: bool) -> int | None:
        """The store's schema version, read without writing anything (None: an empty file, to be created).
        Raises StoreError for a file that is not a sparse-tui store or is newer than this version."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            if not create:
                raise StoreError(f"{self.path}: empty file, not a run store (run a preset first)")
            return None
        uri = self.path.resolve().as_uri()
        try:
            con = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30.0)
            con.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError as e:
            media_ro = "unable to open" in str(e) and (not os.access(self.runs_dir, os.W_OK)
                                                       or _read_only_fs(self.runs_dir))
            full_disk = not media_ro and not create and self._without_shm(e)  # read immutable, below
            if not media_ro and not full_disk:
                raise StoreError(f"{self.path}: cannot open: {e}") from None
            if media_ro and create:  # a WAL store on read-only media can be read, never written
                raise StoreError(f"{self.path}: the run store is read-only (read-only file system or permissions);"
                                 " cannot record runs here (pass another --runs-dir)") from None
            self.read_only = True
            con = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, timeout=30.0)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: not a sparse-tui run store, or damaged ({e})") from None
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables:
                if not create:
                    raise StoreError(f"{self.path}: empty database, not a run store (run a preset first)")
                return None
            if not {"meta", "runs", "metrics"} <= tables:
                shown = ", ".join(sorted(tables)[:4]) + (", ..." if len(tables) > 4 else "")
                raise StoreError(f"{self.path}: not a sparse-tui run store (an SQLite database with tables {shown})")
            row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: not a sparse-tui run store, or damaged ({e})") from None
        finally:
            con.close()
        try:
            version = int(row[0]) if row is not None else 1
        except (TypeError, ValueError):
            raise StoreError(f"{self.path}: damaged run store (schema_version {row[0]!r} is not a number)") from None
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: written by a newer sparse-tui (store schema {version}; this version reads up to"
                f" {SCHEMA_VERSION}); upgrade sparse-tui"
            )
        return version

    def _without_shm(self, e: Exception) -> bool:
        """A reader whose open failed because SQLite could not make ``runs.db-shm`` (a full disk, issue 45): when
        no write-ahead log holds data the file alone is the whole store, so it is read as an immutable file (no
        -shm needed; docs/USAGE.md: readers need no write) and True is returned, with a warning; else False."""
        shm, wal = Path(f"{self.path}-shm"), Path(f"{self.path}-wal")
        if self.read_only or (shm.exists() and shm.stat().st_size >= 32768):  # a failed attempt leaves a stub
            return False
        if wal.exists() and wal.stat().st_size > 0:
            return False  # committed rows live in the log: the file alone would be stale
        self.read_only = True
        self.warnings.append(f"{self.path}: read as an immutable file (SQLite could not create {DB_NAME}-shm: {e}; "
                             "a full disk?); nothing is written")
        return True

    def _migrate(self, version: int) -> None:
        """Bring an older store up to ``SCHEMA_VERSION`` (one transaction per step)."""
        for v in range(version, SCHEMA_VERSION):
            with self._tx() as con:
                for stmt in _MIGRATIONS[v]:
                    try:
                        con.execute(stmt)
                    except sqlite3.OperationalError as e:  # a column a partly upgraded store already has
                        if "duplicate column" not in str(e):
                            raise
                con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(v + 1),))

    @property
    def con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None or getattr(self._local, "pid", None) != os.getpid():
            if self.read_only:  # a store on read-only media: read as an immutable file (no -wal / -shm needed)
                con = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro&immutable=1", uri=True, timeout=30.0,
                                      isolation_level=None, check_same_thread=False)
            else:
                con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
                for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=30000", "foreign_keys=ON"):
                    con.execute(f"PRAGMA {pragma}")
            con.row_factory = sqlite3.Row
            self._local.con, self._local.pid = con, os.getpid()
            self._local.depth = 0  # no transaction open on a fresh connection (a forked child's included)
        return con

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    class _Tx:
        """One write transaction; nested ones (``transaction()`` around writes that open their own) join the
        outermost, which commits or rolls back all of them."""

        def __init__(self, con: sqlite3.Connection, local):
            self.con, self.local = con, local

        def __enter__(self) -> sqlite3.Connection:
            depth = getattr(self.local, "depth", 0)
            if depth == 0:
                self.con.execute("BEGIN IMMEDIATE")
            self.local.depth = depth + 1
            return self.con

        def __exit__(self, exc_type, exc, tb) -> None:
            self.local.depth -= 1
            if self.local.depth:
                return
            if exc_type is None:
                self.con.execute("COMMIT")
            else:
                self.con.execute("ROLLBACK")

    def _tx(self) -> "StoreFile._Tx":
        return StoreFile._Tx(self.con, self._local)

    def transaction(self) -> "StoreFile._Tx":
        """Group this thread's writes inside into one transaction (a stack's evaluation: training/runlog.py)."""
        return self._tx()
