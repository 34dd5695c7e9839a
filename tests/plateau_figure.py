"""A new atlas figure: the plateau step of each run, one bar per run. The worked example of docs/ARCHITECTURE.md
("A new figure"), which shows this file as it is; tests/test_new_figure.py adds its entry to the atlas and runs
``sparse-tui reproduce plateaus --plot FILE``, which trains the preset's runs, prints this report and draws this
figure."""

from __future__ import annotations

from typing import Any, Sequence

from sparse_tui.atlas import Entry
from sparse_tui.reports.figures import figure_writer
from sparse_tui.reports.reproduce import Report, make_report


def plateau_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """One line per run: its label and its plateau step (the preset's threshold), "never" without one."""
    rows = [{"run_id": r.run_id, "label": r.label, "plateau": r.plateau_step} for r in map(store.get, run_ids)]
    lines = [f"  {r['label']}: {'never' if r['plateau'] is None else format(r['plateau'], 'g')}" for r in rows]
    return make_report(entry, run_ids, lines, {"runs": rows})


@figure_writer()
def plateau_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None) -> Any:
    """One bar per run at its plateau step (runs without one are left out)."""
    from matplotlib.figure import Figure

    recs = [r for r in map(store.get, run_ids) if r.plateau_step is not None]
    fig = Figure(figsize=(4, 3), layout="constrained")
    ax = fig.subplots()
    ax.bar([r.label for r in recs], [r.plateau_step for r in recs])
    ax.set_ylabel("plateau step")
    ax.set_title(title or "plateau per run", fontsize=8.5)
    return fig


PLATEAUS = Entry("plateaus", "Plateaus", "arXiv 2505.17863", "App. D.1", "the plateau of each run", "curves",
                 {"cpu": "paper_fig1c_theory"}, report="plateau_figure:plateau_report",
                 plot="plateau_figure:plateau_figure")
