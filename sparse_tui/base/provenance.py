"""Where a number came from: the commit of the code that made it (issue 42: a record states torch and numpy
versions, threads, stacked or not, device and commit, so that a number that moves on another machine can be traced).

``commit()`` reads the checkout's git metadata directly (no subprocess, no git needed): the HEAD's commit, with
``+dirty`` never guessed (a clean/dirty check would need git); ``None`` from an installed wheel, where the package
version (``sparse_tui.__version__``) says what ran.

Imports neither torch nor textual.
"""

from __future__ import annotations

import functools
from pathlib import Path


def _git_dir(start: Path) -> Path | None:
    for d in (start, *start.parents):
        g = d / ".git"
        if g.is_dir():
            return g
        if g.is_file():  # a worktree or submodule: "gitdir: PATH"
            text = g.read_text(encoding="utf-8", errors="replace").strip()
            if text.startswith("gitdir:"):
                return _beside(d, text[7:])
    return None


@functools.lru_cache(maxsize=1)
def commit() -> str | None:
    """The commit of the checkout sparse-tui runs from (40 hex digits), or None (an installed wheel, no git)."""
    try:
        g = _git_dir(Path(__file__).resolve().parent)
        if g is None:
            return None
        head = (g / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref:"):
            return head or None
        ref = head[4:].strip()
        for base in (g, _common_dir(g)):
            f = base / ref
            if f.is_file():
                return f.read_text(encoding="utf-8").strip() or None
            packed = base / "packed-refs"
            if packed.is_file():
                for line in packed.read_text(encoding="utf-8").splitlines():
                    parts = line.split()
                    if len(parts) == 2 and parts[1] == ref:
                        return parts[0]
    except OSError:
        return None
    return None


def _common_dir(g: Path) -> Path:
    """A worktree's shared git folder (``commondir``), where its branches' refs live."""
    f = g / "commondir"
    return _beside(g, f.read_text(encoding="utf-8")) if f.is_file() else g


def _beside(folder: Path, text: str) -> Path:
    """The path a git file names (``text``), relative to ``folder`` unless absolute."""
    p = Path(text.strip())
    return p if p.is_absolute() else (folder / p).resolve()
