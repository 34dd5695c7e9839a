"""A preset's measured time, read from one place: the ``Time:`` sentence of its own header.

Every time sparse-tui shows for a preset is ``timing``'s reading of that sentence: ``sparse-tui presets``, the
console's preset form (its status line) and the README's time for ``make run`` (blog_n80; tests/test_preset_times.py
holds the README to it). A header states the time of the whole preset (not one run's ``9-17 s each``) with the load,
the machine and the date of the measurement; what a header leaves out is shown as unknown, never guessed.

The load changes the time; ``LOAD_RULE`` says by how much (measured: docs/PERFORMANCE.md, "Load"). Imports neither
torch nor textual."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sparse_tui.base.files import open_regular

HEADER_BYTES = 64 << 10  # timing reads at most this much of a preset's header

# How load scales a recorded time: stated once, shown under `sparse-tui presets` and in the README; measured with
# benchmarks/load_scaling.sh (docs/PERFORMANCE.md, "Load").
LOAD_RULE = ("Load scales a time about in proportion: a run that took t with L0 busy processes at its priority "
             "(itself included, at least 1) takes about t x L / L0 with L of them, within about a third (niced jobs "
             "hardly count). Measured on the shared 2-core CPU, 2026-11-29 (benchmarks/load_scaling.sh): "
             "paper_fig17_cpu 12.5 s alone at load ~1, 28 s beside 2 busy processes (x2.3), 79 s beside 4 (x6.3).")

_DURATION = re.compile(r"(?:about )?\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)? ?(?:h|min|minutes|s|seconds)\b(?: \d+ s\b)?")
_PART = re.compile(r"\s*(?:each|per (?:toy )?run)\b")  # a duration of one run of several, not of the preset
_LOAD = re.compile(r"\bload(?: average)?(?: of)? ~?(\d+(?:\.\d+)?(?:[-–]\d+(?:\.\d+)?)?)")
_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
_MACHINE = re.compile(r"\b(?:(?:quiet|shared|busy) )?\d+-core CPU\b|\b(?:one |an? )?(?:H100|H200|A100|RTX \d+)\b")


@dataclass(frozen=True)
class Timing:
    """What a preset's header says about its time: ``duration`` ("24 min 53 s", "about 4 min"; "-" when it states
    none), the ``load`` it was measured at ("5-8", "quiet"; "" unknown), the ``machine`` ("shared 2-core CPU"; ""
    unknown) and the ``date`` ("2026-11-26"; "" undated)."""

    duration: str = "-"
    load: str = ""
    machine: str = ""
    date: str = ""

    def context(self) -> str:
        """``load 5-8, shared 2-core CPU, 2026-11-26``: what the time was measured at, unknown parts said so."""
        load = "quiet" if self.load == "quiet" else f"load {self.load}" if self.load else "load not stated"
        machine = self.machine or "machine not stated"
        return ", ".join(([] if load == "quiet" and "quiet" in machine else [load]) + [machine, self.date or "undated"])

    def text(self) -> str:
        """``24 min 53 s, load 5-8, shared 2-core CPU, 2026-11-26``; ``-`` when no time is stated."""
        return "-" if self.duration == "-" else f"{self.duration}, {self.context()}"


def timing(path: Path) -> Timing:
    """The measured CPU time a preset's header states after ``Time:``: its first duration of the whole preset
    (``8.4 s``, ``about 4 min``; not one run's ``9-17 s each``), with the load, machine and date said in the same
    measurement (up to the next duration); ``Timing()`` (duration "-") when the header states none (only a GPU
    estimate, "not measured", or no ``Time:``)."""
    lines = []
    try:  # base/files.py: a FIFO or a link to /dev/zero dropped in ./presets is refused, never waited on or read
        with open_regular(path, "a preset file") as fh:
            head = fh.read(HEADER_BYTES)
        for raw in head.decode("utf-8", errors="replace").splitlines():
            if not raw.startswith("#"):
                break
            lines.append(raw.lstrip("#").strip())
    except OSError:
        return Timing()
    m = re.search(r"\bTime:\s*(.*)", " ".join(lines))
    text = m.group(1).split("GPU")[0] if m else ""  # what follows "GPU" is a GPU time or an estimate
    if re.match(r"(?:about )?(?:a )?seconds?\b", text):
        return _said(text.split(" on ")[0], text)
    found = list(_DURATION.finditer(text))
    for i, d in enumerate(found):
        if not _PART.match(text, d.end()) and not text[:d.start()].endswith("half "):
            end = next((e.start() for e in found[i + 1:] if e.start() > d.end()), len(text))
            return _said(d.group(0), text[d.start():end], text)
    return Timing()


def _said(duration: str, part: str, whole: str = "") -> Timing:
    """The duration with the load, machine and date its measurement states (``part``; a machine or date said once
    for the whole sentence, ``whole``, counts too)."""
    def first(rx: re.Pattern, *texts: str) -> str:
        return next((m.group(m.lastindex or 0) for t in texts if (m := rx.search(t))), "")

    load = first(_LOAD, part) or ("quiet" if re.search(r"\bquiet\b", part) else "")
    return Timing(duration, load.replace("–", "-"), first(_MACHINE, part, whole), first(_DATE, part, whole))
