"""The console's messages, in two directions (after toolong / harlequin: widgets stay thin).

* Workers → screen: the store poller (``tui/poller.py``) and the thread workers of ``tui/actions.py`` never touch
  widgets; they post ``RunsUpdated``, ``CurvesData``, ``AttentionData``, ``TheoryData``, ``FitDone``, ``Done`` and
  ``Problem`` to the main screen (``tui/screens/main.py``), which applies them on the UI thread (a ``Problem`` goes on
  to the app, which reports it); the app's own workers post ``GpuInfo`` and ``ExecutorChecked``. The poller's
  messages coalesce (``can_replace``): when the UI thread falls behind, only the newest run table and the newest
  curves are drawn.
* Widgets → screen: a panel never calls a domain method. It posts what the user asked for (``LaunchRequested``,
  ``CancelRequested``, ``FitRequested`` ...) or what changed (``RunHighlighted``, ``SelectionChanged``); the main screen
  decides, runs the work in a thread worker, and hands the result back to the panel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from sparse_tui.lifecycle.runner import ExecutorOptions
from sparse_tui.store import RunRecord


# -- from the store poller and the workers ---------------------------------------------------------------------------
class ForScreen(Message):
    """A message for the main screen, which applies it: it does not bubble on to the app."""

    bubble = False


@dataclass
class RunsUpdated(ForScreen):
    """A fresh read of the run table (posted by the store poller when the store changed)."""

    records: list[RunRecord]
    last: dict[str, dict[str, float]]  # latest metrics of running runs
    forecasts: dict[str, dict | None]  # each run's emergence forecast (forecast.py), fitted in the poller's thread

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RunsUpdated)  # a newer read of the whole table supersedes this one


@dataclass
class CurvesData(ForScreen):
    """Metric series of the watched runs: {run_id: {name: (steps, values)}}, plateau steps."""

    run_ids: list[str]
    series: dict[str, dict[str, tuple[list[float], list[float]]]]
    plateau: dict[str, float | None] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    params: dict[str, dict] = field(default_factory=dict)  # each run's parameters (legends: the keys that differ)

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CurvesData)  # the newest read of the newest watched runs wins


@dataclass
class AttentionData(ForScreen):
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
class TheoryData(ForScreen):
    """The theory (ODE) overlay of runs: {run_id: (steps, test loss)}, None where a run has none
    (``models.ode.recorded_curve``)."""

    curves: dict[str, tuple[list[float], list[float]] | None]


@dataclass
class FitDone(ForScreen):
    body: Any  # rich renderable with the table (None: the fit failed, ``info`` says why)
    plot: dict  # {"x": forecast, "y": plateau, "fit": law at each run, "cx"/"cy": censored, "curve": fit is f(x)}
    info: str
    report: Any = None  # the fitreport.FitReport (what `sparse-tui fit --json` prints, as an object)
    request: Any = None  # the render.fit.FitRequest: `sparse-tui fit ` + request.argv() gives the same numbers


@dataclass
class GpuInfo(Message):
    """Resource use for the header: the GPUs (NVML; None: no GPU) and this machine's CPU and RAM."""

    text: str | None
    host: str = ""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, GpuInfo)


@dataclass
class ExecutorChecked(Message):
    """The answer to "train the next launches on ``executor``" (the palette's Executor command): ``problem`` is the
    one line that refuses it (Ray missing, no cluster answering), or None."""

    executor: ExecutorOptions
    problem: str | None


@dataclass
class Problem(Message):
    """Something went wrong (a worker, a panel's handler, a render): the app shows it (a notification; errors also
    a red line in the panel on screen and an entry in RUNS_DIR/logs/console.log). ``error`` keeps the exception for
    the log's traceback."""

    text: str
    severity: str = "error"
    error: BaseException | None = None


@dataclass
class Done(ForScreen):
    """A worker action finished (launch, cancel, delete, export): shown as a notification."""

    text: str
    switch_to: str | None = None
    run_ids: list[str] = field(default_factory=list)  # runs a launch created: the Runs panel shows them
    pids: list[int] = field(default_factory=list)  # processes it started (the app reaps them when they end)
    severity: str = "information"  # "warning": something the user asked could not be done (not a console error)


@dataclass
class AtlasData(ForScreen):
    """The atlas screen's answer: every entry's stored runs (``status``: key -> what its list line says), or one
    entry's description and report (``key``, ``detail``)."""

    status: dict[str, str] | None = None
    key: str | None = None
    detail: str = ""


# -- from the panels -------------------------------------------------------------------------------------------------
@dataclass
class RunsMessage(Message):
    """A message about some runs (the subclasses below say which, and what of them)."""

    run_ids: list[str]


@dataclass
class PanelRequested(Message):
    """Switch to a panel (``presets``, ``runs``, ``curves``, ``attention``, ``fit``, ``phase``)."""

    panel: str


@dataclass
class RunHighlighted(Message):
    """The Runs table's cursor moved: the current run (None: the table is empty)."""

    run_id: str | None


@dataclass
class LaunchRequested(Message):
    """ctrl+l in Presets: record the runs of this validated preset (``presets.LoadedPreset``) and start them."""

    loaded: Any


@dataclass
class LaunchAsked(Message):
    """The question ctrl+l asks before it launches (worked out in a thread: it reads the store for an estimate)."""

    loaded: Any
    question: str


class CancelRequested(RunsMessage):
    """c in Runs: cancel these runs (the app keeps the queued / running ones)."""


class ResumeRequested(RunsMessage):
    """u in Runs: resume these runs from their checkpoints (the app keeps the failed / interrupted / queued ones)."""


@dataclass
class CompareRequested(Message):
    """x in Runs: compare two runs or two groups (final metrics side by side, config differences, then their curves
    overlaid). ``run_ids`` holds run ids or group keys; ``groups`` the runs of each group key."""

    run_ids: list[str]
    groups: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class SelectionChanged(Message):
    """The Runs table's selection changed (marks, the filter, the grouping, h): what the main screen needs of it,
    in one message. ``marked``: the marked runs the filter shows (marks on filtered-out runs are kept, not used);
    ``shown``: the runs the filter shows, in table order; ``groups``: the keys the charts group runs by ([]: not
    grouped; the Curves grid and bands follow); ``hidden``: the runs hidden in the charts (Curves draws none)."""

    marked: list[str]
    shown: list[str]
    groups: list[str]
    hidden: list[str]


class SeriesWanted(Message):
    """A panel draws other runs' series now (g, b in Curves): the screen asks the panels again which to read."""


@dataclass
class FigureRequested(Message):
    """p in Curves, Fit, Phase or Scatter: write the panel's figure (``figures``) as ``fmt`` (png / svg); a panel
    that knows what to draw sends it as ``payload``."""

    panel: str
    fmt: str = "png"
    payload: Any = None
    ask: bool = False  # ask for the file name and size first (w)


@dataclass
class AtlasRequested(Message):
    """The atlas screen (palette: "Atlas") asks the main screen for every entry's stored runs (``what="status"``),
    an entry's description and report (``"detail"``) or a launch of its missing runs (``"launch"``), answered with
    ``AtlasData`` to ``screen`` (a launch: ``Done``)."""

    what: str
    screen: Any
    entry: Any = None  # an ``atlas.Entry``


@dataclass
class NoteRequested(Message):
    """n / T in Runs: edit the note (``what="note"``) or the tags (``"tags"``) of a run."""

    run_id: str
    what: str


@dataclass
class ArchiveRequested(Message):
    """A in Runs: archive these runs (``archive`` False: bring them back)."""

    run_ids: list[str]
    archive: bool = True


class DeleteRequested(RunsMessage):
    """d in Runs: delete these finished runs, after a confirmation."""


class ExportRequested(RunsMessage):
    """e in Runs: export these runs (the dialog asks how and where)."""


@dataclass
class AttentionRequested(Message):
    """The Attention panel needs a snapshot drawn: ``step`` / ``layer`` None mean the newest / the first."""

    run_id: str
    step: int | None
    layer: str | None
    head: int
    example: int
    width: int


class TheoryRequested(RunsMessage):
    """The Curves panel shows runs whose theory (ODE) overlay it has not asked for yet."""


@dataclass
class FitRequested(Message):
    """Enter in Fit: fit the runs the ``query`` chooses (empty: marked, else the current run's preset) over
    ``variables`` (None: guess them first) with ``sparse-tui fit`` ``options``."""

    query: str
    variables: list[str] | None
    options: str = ""


@dataclass
class GuessRequested(Message):
    """g in Fit (or a new selection): guess the fit variables of the runs ``query`` chooses."""

    query: str
