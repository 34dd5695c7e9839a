"""The figure registry (the atlas): one ``Entry`` per figure or panel of the sources sparse-tui reproduces.

An entry says what the figure shows, which presets reproduce it (``presets``: a CPU-sized one measured on a 2-core
machine, a GPU-sized one where the paper's grid needs it), the variables to fit (``fit_vars``), the paper's law
(``law``: a key of ``theory.PAPER_FITS``, the one place that holds the paper's numbers), the plateau threshold the
paper uses (``threshold``, App. D.1 of arXiv 2505.17863), where we depart from the paper (``notes``) and the record
in docs/REPRODUCTION.md. ``sparse-tui reproduce --list`` prints the atlas, ``sparse-tui reproduce KEY`` trains what is
missing, fits and draws (``sparse_tui.reports.reproduce``), and ``sparse-tui fit`` takes the law of a run's preset from
here.

Adding an entry is one ``Entry(...)`` in one of the modules below; adding a module of entries is one line in
``MODULES``. Each module defines ``ENTRIES``, a list of entries. An entry names its claim (``claim``: "module:NAME"
of a ``reports.base.Claim`` in the figure's module under ``reports/entries/``, imported when used, as
``presets.TaskKind`` names its task): the source's claim, the check that decides its verdict, and the report and
figure where they are not its kind's. A fitted law takes its kind's (``CLAIMS``); docs/ARCHITECTURE.md, "A new
figure".

This module imports neither torch nor textual (``sparse-tui reproduce --list`` stays light).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

# One line per module of entries, in the order --list prints them.
MODULES = (
    "sparse_tui.atlas.paper_linreg",  # arXiv 2505.17863 §2, App. A, App. B (issue 18)
    "sparse_tui.atlas.paper_recall",  # arXiv 2505.17863 §3, App. C (issue 22)
    "sparse_tui.atlas.blogs",  # Ziming Liu's blogs 3 and 6 and their two proposals (issue 22)
    "sparse_tui.atlas.proposals",  # the paper's own proposal, §4: repetition schedules (issue 33)
    "sparse_tui.atlas.paper_claims",  # the paper's claims no figure entry tested (issue 42)
)

KINDS = ("law", "table", "curves", "theory")
SIZES = ("cpu", "gpu")
ENTRIES_PKG = "sparse_tui.reports.entries."  # where the figures' modules live (``claim=ENTRIES_PKG + "fig16:LEFT"``)
# What an entry of a kind reports, draws and checks unless its claim names its own (reports.library). A report is
# called (store, entry, run_ids); a figure (store, run_ids, path, title=), except a law entry's (its fit) and a table
# entry's (the report's data).
CLAIMS = {"law": "sparse_tui.reports.library:LAW", "curves": "sparse_tui.reports.library:CURVES"}


@dataclass(frozen=True)
class Threshold:
    """The plateau threshold of App. D.1, as a preset's ``[plateau]`` table writes it."""

    metric: str = "test/loss"
    mode: str = "below"
    value: float = 0.1

    def text(self) -> str:
        if self.mode == "fraction":
            return f"{self.metric} <= {self.value:g} × its initial value"
        return f"{self.metric} {'>=' if self.mode == 'above' else '<='} {self.value:g}"


@dataclass(frozen=True)
class Entry:
    """One figure or panel. ``key`` is what ``sparse-tui reproduce`` takes (``fig15_adam``); a figure's number alone
    (``fig15``) selects all its panels."""

    key: str
    figure: str  # as the source names it: "Fig. 15 right"
    source: str  # "arXiv 2505.17863", or a blog's title
    section: str  # where the source describes it: "App. B.3, App. D.3"
    shows: str  # one line: what the figure shows
    kind: str  # law: a power law is fitted; table: plateaus tabulated; curves: learning curves; theory: reduced flow
    presets: Mapping[str, str] = field(default_factory=dict)  # size -> preset name (catalog.resolve)
    fit_vars: tuple[str, ...] = ()  # what `sparse-tui fit --vars` gets (law and table entries)
    law: str | None = None  # key of theory.PAPER_FITS: the paper's fitted law
    threshold: Threshold | None = None  # the paper's plateau threshold (App. D.1)
    notes: str = ""  # where the presets depart from the source, and why
    record: str = ""  # the heading of its record in docs/REPRODUCTION.md
    measured: str = ""  # one line: what the record says was measured (date, device), "" = not measured yet
    built: str = ""  # "" = built; otherwise why not (e.g. "not built yet: issue 22")
    targets: Mapping[str, float] = field(default_factory=dict)  # exponent -> tolerance, where the record says why it
    # is not reports.verdict.DEFAULT_TARGET (±0.15)
    verdict: str = ""  # the record's verdict (reports.verdict.WORDS), shown by `reproduce --list` without stored runs
    cpu_minutes: float | None = None  # the record's measured wall minutes of the CPU preset on the shared 2-core CPU
    claim: str = ""  # "module:NAME" of its reports.base.Claim (the check of its verdict); "" = its kind's (CLAIMS)

    @property
    def number(self) -> int:
        m = re.match(r"fig(\d+)", self.key)
        return int(m.group(1)) if m else 0

    def preset(self, size: str) -> str | None:
        return self.presets.get(size)

    def claim_of(self) -> Any:
        """This entry's ``reports.base.Claim`` (``claim``, else its kind's), imported now."""
        name = self.claim or CLAIMS.get(self.kind)
        if not name:
            raise AtlasError(f"{self.key}: no claim for kind {self.kind!r}")
        return pkgutil.resolve_name(name)

    def report_fn(self) -> Callable[..., Any]:
        """The function that reports this entry (its claim's, else its kind's), imported now."""
        return self._named("report")

    def plot_fn(self) -> Callable[..., Any]:
        """The function that draws this entry (its claim's, else its kind's), imported now."""
        return self._named("figure")

    def _named(self, what: str) -> Callable[..., Any]:
        for name in filter(None, (self.claim, CLAIMS.get(self.kind))):  # its claim's, else its kind's
            fn = getattr(pkgutil.resolve_name(name), what)
            if fn is not None:
                return fn
        raise AtlasError(f"{self.key}: no {what} for kind {self.kind!r}")


class AtlasError(ValueError):
    """A name the atlas does not know, or a preset file that is missing (one line)."""


def _load() -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for name in MODULES:
        for e in importlib.import_module(name).ENTRIES:
            if e.key in out:
                raise AtlasError(f"atlas: entry {e.key!r} is defined twice ({name})")
            out[e.key] = e
    return out


ENTRIES: dict[str, Entry] = _load()


def entries() -> list[Entry]:
    """Every entry, in figure order (entries of one figure in registry order), then the entries without a figure
    number (the blogs') in registry order."""
    return sorted(ENTRIES.values(), key=lambda e: (e.number == 0, e.number))


def find(name: str) -> list[Entry]:
    """The entries a name selects: an entry's key (``fig15_adam``), or a figure (``fig15``, ``15``, ``Fig. 15``:
    all its panels). Raises ``AtlasError`` naming the known keys."""
    key = name.strip().lower().replace(" ", "").replace(".", "")
    by_lower = {k.lower(): e for k, e in ENTRIES.items()}  # blog keys keep the blogs' letters (blog3_C)
    if key in by_lower:
        return [by_lower[key]]
    m = re.fullmatch(r"(?:fig(?:ure)?)?(\d+)", key)
    if m:
        hits = [e for e in ENTRIES.values() if e.number == int(m.group(1))]
        if hits:
            return hits
    known = ", ".join(sorted({f"fig{e.number}" for e in ENTRIES.values() if e.number}, key=lambda k: int(k[3:])))
    raise AtlasError(f"unknown figure {name!r}: one of {known}, or a panel key (sparse-tui reproduce --list)")


def entries_of_preset(preset: str) -> list[Entry]:
    """The entries that name ``preset`` (any size)."""
    return [e for e in ENTRIES.values() if preset in e.presets.values()]


def law_of_presets(presets: list[str]) -> tuple[str | None, str]:
    """The paper law to compare runs of ``presets`` with (a key of ``theory.PAPER_FITS``), and why: the law of the
    atlas entry that names every one of them, never a guess from the name or the model. (None, reason) when the
    presets are not in the atlas, belong to entries with different laws, or their entry has no law."""
    if not presets:
        return None, "no preset"
    laws = set()
    for p in presets:
        hits = entries_of_preset(p)
        if not hits:
            return None, f"preset {p} is not in the figure atlas (sparse-tui reproduce --list); --paper KEY compares"
        laws |= {e.law for e in hits}
    if len(laws) > 1:
        return None, (f"the runs' presets ({', '.join(presets)}) belong to figures with different laws; "
                      "--paper KEY picks one")
    law = laws.pop()
    if law is None:
        return None, f"the atlas entry of {', '.join(presets)} has no fitted law in the paper"
    return law, ""
