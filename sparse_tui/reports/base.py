"""The reports wing's base: a report (``Report``, ``make_report``), the figure writer every figure is
(``figure_writer``: matplotlib loaded lazily, the house style, an atomic write) and the small helpers the reports
share. A figure's module imports this, never the 1,000-line files.

No torch, no textual, no matplotlib at import."""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from sparse_tui.atlas import Entry
from sparse_tui.base.files import WriteError, problem, write_file

FORMATS = (".png", ".svg", ".pdf")


INSTALL_HINT = 'figures need matplotlib: pip install "sparse-tui[plot]"'


class FigureError(ValueError):
    """A figure cannot be made; the message is one line."""


def require_matplotlib() -> None:
    """Raise ``FigureError(INSTALL_HINT)`` when matplotlib cannot be imported."""
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError:
        raise FigureError(INSTALL_HINT) from None


def check_path(path: str | Path, flag: str = "--plot") -> Path:
    """The output path, if its suffix is a known format and the one writer can write it (files.problem: its folder
    exists and is writable, it is no device, FIFO or directory); else ``FigureError``. Checked before any work."""
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise FigureError(f"{flag} {p}: the file name must end in {', '.join(FORMATS)}")
    why = problem(p)
    if why is not None:
        raise FigureError(f"{flag} {p}: {why}")
    return p


# The house style of every figure (matplotlib rcParams).
_STYLE = {
    "font.size": 8.5,
    "axes.titlesize": 9,
    "figure.titlesize": 8.5,
    "axes.labelsize": 8.5,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 7.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.3,
    "svg.fonttype": "none",
    "savefig.bbox": "tight",
    "savefig.dpi": 200,
}


def figure_writer(flag: str = "--plot") -> Callable[[Callable[..., Any]], Callable[..., Path]]:
    """Make ``draw(*args, **kw) -> Figure`` the writer ``fn(*args, path, **kw) -> Path`` that every figure here is:
    matplotlib installed and ``path`` valid (``flag`` names it in the message) before anything is read, drawn in the
    house style, written atomically. Raises ``FigureError``."""
    def wrap(draw: Callable[..., Any]) -> Callable[..., Path]:
        @functools.wraps(draw)
        def write(*args: Any, **kw: Any) -> Path:
            args, path = (args, kw.pop("path")) if "path" in kw else (args[:-1], args[-1])
            require_matplotlib()
            path = check_path(path, flag)
            import matplotlib as mpl

            with mpl.rc_context(_STYLE):
                fig = draw(*args, **kw)
                fmt = path.suffix.lower().lstrip(".")
                try:  # files.py: the one writer (a device, a FIFO or a symlink is never replaced)
                    write_file(path, lambda fh: fig.savefig(fh, format=fmt), binary=True, flag=flag)
                except WriteError as e:
                    raise FigureError(str(e)) from None
            return path

        return write

    return wrap


def _fig(n: int, width: float = 3.3, height: float = 2.8) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * n, height), layout="constrained")
    return fig, fig.subplots(1, n, squeeze=False)[0]


def _colours(n: int) -> list[Any]:
    import matplotlib as mpl

    cmap = mpl.colormaps["viridis"]
    return [cmap(0.05 + 0.8 * i / max(1, n - 1)) for i in range(n)]


# Associative recall "proper" (ours; the reports of Figs. 4 left and 17): the first test accuracy >= this. Copying
# any value of the context already scores 1/N_pairs, above App. D.1's 5%.
RECALL_LEVEL = 0.6


@dataclass
class Report:
    """What ``reproduce`` prints for one entry (``text``), its numbers (``data``: the report's own small dataclass),
    the fit of a law entry (``fit``: fitreport.FitReport) and its verdict (``verdict.Verdict``, set by
    ``library.report``)."""

    entry: Entry
    text: str
    data: Any
    fit: Any = None
    run_ids: tuple[str, ...] = ()
    verdict: Any = None
    elsewhere: tuple[str, ...] = ()  # its points' runs still training in another process (reproduce.py)
    firmness: Any = None  # firmness.Firmness: a seed bootstrap of the verdict (issue 42), set by ``library.report``
    environment: dict[str, Any] | None = None  # what produced the runs (firmness.environment), set with it

    def to_dict(self) -> dict[str, Any]:
        """``reproduce --json``: the entry's key, the data's fields (a field named for a Python keyword ends in _,
        its key does not), the verdict (null while points still train elsewhere, with their runs), its firmness and
        the runs' environment."""
        data = dataclasses.asdict(self.data)
        out = {"entry": self.entry.key, **{k.removesuffix("_"): v for k, v in data.items()}}
        if self.verdict is not None:
            out.update(verdict=self.verdict.word, verdict_detail=self.verdict.to_dict())
        if self.elsewhere:
            out.update(training_elsewhere=list(self.elsewhere))
            out.setdefault("verdict", None)
        if self.firmness is not None:
            out.update(firmness=self.firmness.to_dict(), environment=self.environment)
        return out


def make_report(entry: Entry, run_ids: Sequence[str], lines: list[str], data: Any, fit: Any = None) -> Report:
    """The report of ``entry`` every report function returns: its head line, then ``lines``; ``data`` a dataclass."""
    return Report(entry, "\n".join([f"{entry.key} — {entry.figure}: {entry.shows}", *lines]), data, fit=fit,
                  run_ids=tuple(run_ids))


@dataclass
class Runs:
    """The data of a report that is one row per run."""

    runs: list[dict[str, Any]]


@dataclass(frozen=True)
class Claim:
    """What an atlas entry claims and how its verdict is decided (``Entry.claim`` names it, "module:NAME"): the
    source's claim in words, with the thresholds that make it decidable (ours) named in it; ``check(store,
    report) -> (word of verdict.WORDS, the numbers that decide it)``; the entry's report and figure where they are
    not its kind's (``reports.library``: ``LAW``, ``CURVES``)."""

    text: str
    check: Callable[[Any, Report], tuple[str, str]] | None = None
    report: Callable[..., Report] | None = None
    figure: Callable[..., Any] | None = None


def _gmean(xs: Iterable[float | None]) -> float | None:
    """The geometric mean of the values that are set (not None, not 0); None when none is."""
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _loglog_slope(pts: Sequence[tuple[float, float]]) -> float | None:
    """The least-squares slope of log y against log x over points with x, y > 0; None with fewer than two x."""
    logs = [(math.log(x), math.log(y)) for x, y in pts]
    if len({x for x, _ in logs}) < 2:
        return None
    mx, my = sum(x for x, _ in logs) / len(logs), sum(y for _, y in logs) / len(logs)
    return sum((x - mx) * (y - my) for x, y in logs) / sum((x - mx) ** 2 for x, _ in logs)


def _num(x: Any, spec: str = "+.3f") -> str:
    if x is None:
        width = "".join(c for c in spec.split(".")[0] if c.isdigit())
        return "—".rjust(int(width or 0))
    return format(x, spec)


def _crossing(curve: tuple[Sequence[Any], Sequence[Any]], level: float, above: bool = True) -> float | None:
    """The first logged step (of a curve: steps, values) at which the value is at or above ``level`` (at or below:
    ``above`` False); None when it never is."""
    return next((float(s) for s, v in zip(*curve) if v is not None and (v >= level if above else v <= level)), None)


def _first(t: Any, cond: Any) -> float | None:
    idx = np.flatnonzero(cond)
    return float(t[idx[0]]) if idx.size else None


def _fmt(xs: Sequence[Any], spec: str = ".2f") -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "—"
    lo, hi = min(xs), max(xs)
    return format(lo, spec) if format(lo, spec) == format(hi, spec) else f"{lo:{spec}}-{hi:{spec}}"


def run_config(rec: Any) -> Any:
    """A stored run's typed config (``RunRecord.run_config``), read by field; ``ValueError`` naming the run when its
    stored config no longer validates."""
    cfg = rec.run_config
    if cfg is None:
        raise ValueError(f"run {rec.run_id}: its stored config no longer validates (sparse-tui show {rec.run_id})")
    return cfg
