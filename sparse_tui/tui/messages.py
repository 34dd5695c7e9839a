"""Messages that thread workers post to the app (workers never touch widgets; the UI thread applies these)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from sparse_tui.store import RunRecord


@dataclass
class RunsUpdated(Message):
    """A fresh read of the run table (posted by the store poller when the store changed)."""

    records: list[RunRecord]
    last: dict[str, dict[str, float]]  # latest metrics of running runs


@dataclass
class CurvesData(Message):
    """Metric series of the watched runs: {run_id: {name: (steps, values)}}, theory curves, plateau steps."""

    run_ids: list[str]
    series: dict[str, dict[str, tuple[list[float], list[float]]]]
    theory: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)
    plateau: dict[str, float | None] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class AttentionData(Message):
    """A rendered attention snapshot (Rich text) with what it shows."""

    run_id: str
    steps: list[int]
    step: int
    layers: list[str]
    heads: int
    examples: int
    body: Any  # rich Text
    info: str


@dataclass
class FitDone(Message):
    body: Any  # rich renderable with the table (None: the fit failed, ``info`` says why)
    plot: dict  # {"x": forecast, "y": plateau, "fit": law at x, "cx"/"cy": censored}
    info: str
    report: Any = None  # the fitreport.FitReport (what `sparse-tui fit --json` prints, as an object)
    request: Any = None  # the render.FitRequest: `sparse-tui fit ` + request.argv() gives the same numbers


@dataclass
class GpuInfo(Message):
    text: str | None


@dataclass
class Problem(Message):
    """Something went wrong in a worker: shown as a notification."""

    text: str
    severity: str = "error"


@dataclass
class Done(Message):
    """A worker action finished (launch, cancel, delete, export): shown as a notification."""

    text: str
    switch_to: str | None = None
    run_ids: list[str] = field(default_factory=list)  # runs a launch created: the Runs panel shows them
