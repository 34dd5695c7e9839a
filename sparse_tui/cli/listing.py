"""``sparse-tui runs`` as the console's Runs panel shows it: its filter expressions (``--filter 'acc>0.9 d=16,32'``,
``render/filters``) and, when the full table would wrap on this terminal, its columns and naming rules
(``render/table.RunTable``: the 8-character id, the name fitted to what the other columns leave with whole
``key=value`` pairs, status, progress and results; one line per run at 80 columns)."""

from __future__ import annotations

import time

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table


def run_table_model(recs: list, last: dict, forecasts: dict, query: str, archived: bool):
    """The console's table over ``recs`` filtered by ``query`` (its errors in ``.filter_errors``)."""
    from sparse_tui.tui.render.table import RunTable

    model = RunTable()
    model.set_store(recs, last, time.time(), forecasts)
    model.query_text = (query + (" is:archived" if archived and "is:archived" not in query.split() else "")).strip()
    model.items()
    return model


def fits(console: Console, table: Table) -> bool:
    """Whether ``table`` prints on ``console`` without wrapping a cell."""
    wide = console.options.update(width=10_000, max_width=10_000)  # its natural width, not clamped to this one
    return Measurement.get(console, wide, table).maximum <= console.width


def compact_table(title: str, model, width: int) -> Table:
    """The console's layout at ``width`` columns: each run on one line (cells never wrap)."""
    cols = [c for c in model.columns(width) if c[0] != "mark"]
    t = Table(title=title, box=None, padding=(0, 1), show_edge=False, title_justify="left")
    for key, title_, w in cols:
        t.add_column("run_id" if key == "run" else title_, width=w, no_wrap=True, overflow="ellipsis")
    for key, row, kind in model.items():
        t.add_row(*model.cells(row, kind, cols))
    return t
