"""The one writer of every file sparse-tui writes outside its run store (issue 30): ``export -o``, figures
(``--plot``), the bridges' files, checkpoints and the console's preset drafts. Nothing else in the package calls
``os.replace`` (tests/test_files.py greps for it).

``write_file(path, write)`` writes ``path`` all or nothing: ``write(fh)`` fills a file that has no name until it is
complete (Linux ``O_TMPFILE``: even ``kill -9`` leaves nothing behind; elsewhere ``.<name>.<host>.<pid>.tmp``,
removed on every error), which then atomically replaces ``path``. What it would replace keeps what it was:

* an existing regular file keeps its permissions (a 0600 file stays 0600) and, where allowed, its owner;
* a symlink stays a symlink: the file it points to is written (and judged by these rules);
* a character device or a FIFO is never replaced by a regular file: it is refused (one line), or, with
  ``through=True`` (``export -o /dev/stdout``, a named pipe), written through as a shell's ``>`` would;
* a block device, a socket or a directory is refused.

Every error is ``WriteError`` (an ``OSError`` with the errno), one line that names ``path``, never the temporary
file. Layer 0: imports nothing of the package.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as _errno
import os
import socket
import stat
from pathlib import Path
from typing import IO, Callable, Iterator, TypeVar

T = TypeVar("T")

_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


class WriteError(OSError):
    """A file that could not be written: one line naming it (``flag`` first when a flag gave it)."""

    def __init__(self, path: Path | str, reason: str, errno: int | None = None, flag: str | None = None):
        super().__init__(errno, reason)
        self.path, self.reason, self.flag = Path(path), reason, flag
        self.line = f"{flag + ' ' if flag else ''}{path}: {reason}"

    def __str__(self) -> str:
        return self.line

    @property
    def disk_full(self) -> bool:
        return self.errno in (_errno.ENOSPC, _errno.EDQUOT)


def problem(path: Path | str, *, through: bool = False, mkdir: bool = False) -> str | None:
    """Why ``path`` cannot be written by ``write_file`` (a reason, without the path), None when it can: the check
    every command makes before any work."""
    path = Path(path)
    try:
        st = os.stat(path)  # follows a symlink: its target is what gets written
    except FileNotFoundError:
        st = None
    except OSError as e:
        return e.strerror or str(e)
    if st is not None and not stat.S_ISREG(st.st_mode):
        if through and (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            return None
        if stat.S_ISDIR(st.st_mode):
            return "is a directory"
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        return f"is {kind}, not a file to write; refused"
    if st is not None and not writable_by_mode(st):
        return (f"is read-only (mode {stat.S_IMODE(st.st_mode):04o}); not replaced (make it writable, or write "
                "another file)")
    real = Path(os.path.realpath(path))
    parent = real.parent
    while mkdir and not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"directory {real.parent} does not exist"
    if not os.access(parent, os.W_OK):
        return f"directory {parent} is not writable"
    return None


def writable_by_mode(st: os.stat_result) -> bool:
    """Whether the file's mode lets this process write it, by the write bit of the class it falls in (owner,
    group, others): the shell's rule for ``>``. Root, whom the kernel lets through anything, is held to the mode
    too: it may replace a file that someone may write, never one with no write bit at all (a 0444 file; issue 45).
    A rename would replace the file whatever its mode, so the writer asks this first."""
    if os.geteuid() == 0:
        return bool(st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    if st.st_uid == os.geteuid():
        return bool(st.st_mode & stat.S_IWUSR)
    if st.st_gid == os.getegid() or st.st_gid in os.getgroups():
        return bool(st.st_mode & stat.S_IWGRP)
    return bool(st.st_mode & stat.S_IWOTH)


def write_file(path: Path | str, write: Callable[[IO], T], *, binary: bool = False, through: bool = False,
               mkdir: bool = False, flag: str | None = None) -> T:
    """Write ``path`` with ``write(fh)`` all or nothing (see the module docstring); returns what ``write``
    returns. ``mkdir``: create missing parent folders. Raises ``WriteError``; an exception of ``write`` that is
    not an OSError (nor caused by one) propagates, with nothing left behind."""
    path = Path(path)
    why = problem(path, through=through, mkdir=mkdir)
    if why is not None:
        raise WriteError(path, why, _errno.EINVAL, flag)
    st = _stat(path, flag)
    if st is not None and not stat.S_ISREG(st.st_mode):  # through: a character device or a FIFO
        return _write_through(path, write, binary, flag)
    target = Path(os.path.realpath(path))
    if mkdir:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise _error(path, e, flag) from None
    tmp_name = target.with_name(f".{target.name}.{socket.gethostname()}.{os.getpid()}.tmp")
    fd = None
    try:
        fd = os.open(target.parent, os.O_TMPFILE | os.O_WRONLY, 0o666) if hasattr(os, "O_TMPFILE") else None
    except OSError:
        fd = None
    named = fd is None
    try:
        if named:
            fd = os.open(tmp_name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        if st is not None:  # the replaced file's permissions and owner, not the umask's
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
            try:
                os.fchown(fd, st.st_uid, st.st_gid)
            except PermissionError:
                pass
        with open(fd, "wb" if binary else "w", newline=None if binary else "", closefd=True) as fh:
            fd = None
            n = write(fh)
            fh.flush()
            os.fsync(fh.fileno())
            if not named:  # give the finished file a (temporary) name, then move it over the target
                _link_fd(fh.fileno(), tmp_name)
        os.replace(tmp_name, target)
        return n
    except BaseException as e:
        cause = os_error(e)  # e.g. torch's zip writer reports the file's ENOSPC as a RuntimeError of its own
        if cause is not None:
            raise _error(path, cause, flag) from None
        raise
    finally:
        if fd is not None:
            os.close(fd)
        try:
            os.unlink(tmp_name)
        except OSError:
            pass


def _stat(path: Path, flag: str | None) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise _error(path, e, flag) from None


def _write_through(path: Path, write: Callable[[IO], T], binary: bool, flag: str | None) -> T:
    """Write into a character device or a FIFO as a shell's ``>`` would (nothing is replaced)."""
    try:
        with open(path, "wb" if binary else "w", newline=None if binary else "") as fh:
            n = write(fh)
            fh.flush()
        return n
    except OSError as e:
        raise _error(path, e, flag) from None


def _error(path: Path, e: OSError, flag: str | None) -> WriteError:
    if isinstance(e, WriteError):
        return e
    return WriteError(path, f"cannot write: {e.strerror or type(e).__name__}", e.errno, flag)


def causes(e: BaseException | None) -> Iterator[BaseException]:
    """``e`` and what it was raised from or while handling, in turn (each once)."""
    seen = set()
    while e is not None and id(e) not in seen:
        yield e
        seen.add(id(e))
        e = e.__cause__ or e.__context__


def os_error(e: BaseException | None) -> OSError | None:
    """The OSError behind ``e`` (``e`` itself, or what it was raised from or while handling), if any."""
    return next((c for c in causes(e) if isinstance(c, OSError)), None)


def first_line(e: BaseException, limit: int | None = 200) -> str:
    """The first line of an error's message (its type's name when it has none), at most ``limit`` characters
    (None: all)."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:limit]


def _link_fd(fd: int, name: Path) -> None:
    """Give the unnamed (``O_TMPFILE``) file ``fd`` the name ``name``: ``linkat`` following /proc/self/fd/N."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    AT_FDCWD, AT_SYMLINK_FOLLOW = -100, 0x400
    if libc.linkat(AT_FDCWD, f"/proc/self/fd/{fd}".encode(), AT_FDCWD, os.fsencode(name), AT_SYMLINK_FOLLOW) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(name))


# ---------------------------------------------------------------------------------------------------------------
# The one reader of files a user names or drops in a folder (issue 45): presets, their copies and headers,
# checkpoints and their step headers. A regular file only (a FIFO is opened without waiting for a writer and then
# refused; a device, a socket or a directory is refused), at most ``limit`` bytes.
# ---------------------------------------------------------------------------------------------------------------


class ReadError(OSError):
    """A file that could not be read as a regular file of at most its limit: one line naming it."""

    def __init__(self, path: Path | str, reason: str, errno: int | None = None):
        super().__init__(errno, reason)
        self.path, self.reason = Path(path), reason
        self.line = f"{path}: {reason}"

    def __str__(self) -> str:
        return self.line


def open_regular(path: Path | str, what: str = "a file to read") -> IO[bytes]:
    """``path`` opened for binary reading if it is a regular file (following links: a link to /dev/zero is
    /dev/zero); ``ReadError`` otherwise. Never blocks: a FIFO opens at once (``O_NONBLOCK``) and is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise ReadError(path, "file not found" if not os.path.islink(path) else "a link to nothing (dangling)",
                        _errno.ENOENT) from None
    except OSError as e:
        raise ReadError(path, f"cannot read: {e.strerror or e}", e.errno) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ReadError(path, f"is a directory, not {what}", _errno.EISDIR)
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) \
                else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
            raise ReadError(path, f"{kind}, not {what}", _errno.EINVAL)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return fh


def read_regular(path: Path | str, limit: int | None, what: str = "a file to read") -> bytes:
    """The bytes of ``path`` (``open_regular``), refused with ``ReadError`` when it holds more than ``limit``
    bytes (None: no limit) or cannot be read."""
    with open_regular(path, what) as fh:
        try:
            data = fh.read() if limit is None else fh.read(limit + 1)
        except OSError as e:
            raise ReadError(path, f"cannot read: {e.strerror or e}", e.errno) from None
    if limit is not None and len(data) > limit:
        size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"
        raise ReadError(path, f"more than {size}; not {what}", _errno.EFBIG)
    return data
