"""A lock per store and name, for work two processes must not do at once (``reproduce`` of one atlas entry:
issue 45, two ``reproduce fig1c`` started together on an empty store trained every point twice).

The lock is SQLite's own: an exclusive transaction on ``RUNS_DIR/locks/NAME.db``, a small database that holds
nothing. The operating system drops it when its process ends, however it ends (a crash, SIGKILL), so nothing a
crash leaves behind can keep it taken: the file stays, unlocked, and is reused. A store that cannot be written
(read-only media) takes no lock (nothing is trained there). The wait polls (every ``POLL`` seconds), so Ctrl-C ends it.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

LOCKS_DIR = "locks"
POLL = 0.2  # seconds between tries while another process holds the lock


def lock_path(runs_dir: Path, name: str) -> Path:
    """The lock database of ``name`` in ``runs_dir`` (a name made safe as one file name)."""
    return Path(runs_dir) / LOCKS_DIR / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)[:80]}.db"


@contextmanager
def held(runs_dir: Path, name: str, on_wait: Callable[[], None] | None = None) -> Iterator[bool]:
    """Hold the lock ``name`` of the store in ``runs_dir`` for the ``with`` block, waiting while another process
    holds it (``on_wait()`` is called once, when the wait begins). Yields True, or False when the store's folder
    cannot be written (no lock is taken)."""
    path = lock_path(runs_dir, name)
    try:
        path.parent.mkdir(exist_ok=True)
        con = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error):
        yield False
        return
    told, got = False, False
    try:
        while True:
            try:
                con.execute("BEGIN EXCLUSIVE")
                got = True
                break
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e):
                    break  # a folder or file that cannot be written: no lock, nothing is trained there
                if not told and on_wait is not None:
                    on_wait()
                    told = True
                time.sleep(POLL)
        try:
            yield got
        finally:
            if got:
                con.execute("ROLLBACK")
    finally:
        con.close()
