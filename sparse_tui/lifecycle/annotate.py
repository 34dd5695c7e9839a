"""What a researcher adds to runs after launch: notes, tags, archiving, and the deletion rule. One place for the
command line (``sparse-tui note / tag / archive / delete``) and the console (n, T, A, d in Runs).

Tags follow the preset's rule (``presets.tag_problem``: one word each, at most ``MAX_TAGS``); a note is one line of
printable text. Only ended runs can be deleted (a queued or running run is cancelled first), and deleting asks
first, naming the runs. Nothing here imports torch or Textual.
"""

from __future__ import annotations

from typing import Iterable

from sparse_tui.store import RunRecord

MAX_NOTE = 2000


class AnnotateError(ValueError):
    """A note or tag change that is refused (one line)."""


def check_note(text: str) -> str | None:
    """The note to store (None: no note). Raises ``AnnotateError`` for a note that is too long or has control
    characters (a note is shown on one line, in tables and the console)."""
    text = (text or "").strip()
    if len(text) > MAX_NOTE:
        raise AnnotateError(f"note: at most {MAX_NOTE} characters, got {len(text)}")
    bad = next((c for c in text if not c.isprintable()), None)
    if bad is not None:
        raise AnnotateError(f"note: one line of printable text (found {bad!r})")
    return text or None


def edit_tags(old: list[str], add: Iterable[str] = (), remove: Iterable[str] = ()) -> list[str]:
    """``old`` with ``add`` appended (not repeated) and ``remove`` taken out, checked like a preset's tags."""
    from sparse_tui.presets.schema import MAX_TAGS, tag_problem

    add, remove = list(add), set(remove)
    for t in add:
        problem = tag_problem(t)
        if problem:
            raise AnnotateError(problem)
    out = [t for t in old if t not in remove] + [t for t in dict.fromkeys(add) if t not in old and t not in remove]
    if len(out) > MAX_TAGS:
        raise AnnotateError(f"at most {MAX_TAGS} tags per run, got {len(out)}")
    return out


def parse_tags(text: str) -> list[str]:
    """Tags typed in one line (the console's T): separated by spaces or commas."""
    return edit_tags([], [t for t in text.replace(",", " ").split() if t])


def undeletable(records: Iterable[RunRecord]) -> list[RunRecord]:
    """The runs that cannot be deleted now: queued or running ones (cancel them first)."""
    return [r for r in records if r.status in ("queued", "running")]


def delete_question(records: list[RunRecord], shown: int = 5) -> str:
    """The confirmation of a deletion, naming the runs (the first ``shown``, then how many more)."""
    names = [f"{r.run_id} {(r.preset + ' ' + (r.label or '')).strip()} ({r.status})" for r in records[:shown]]
    more = f"\n… and {len(records) - shown} more" if len(records) > shown else ""
    what = "this run" if len(records) == 1 else f"these {len(records)} runs"
    return f"Delete {what} with their metrics and attention maps?\n" + "\n".join(names) + more
