"""The console's panels, in the order of their tabs and keys (1-9): one ``PanelSpec`` each. The main screen builds
its tabs, its keys and the calls of each panel's hooks (``widgets/panel.ConsolePanel``) from ``PANELS``; the palette
and the help list them from it too. A new panel is its module plus one line here (docs/ARCHITECTURE.md)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding

from sparse_tui.tui.widgets.attention_map import AttentionPanel
from sparse_tui.tui.widgets.curves import CurvesPanel
from sparse_tui.tui.widgets.fit_panel import FitPanel
from sparse_tui.tui.widgets.phase_diagram import PhasePanel
from sparse_tui.tui.widgets.presets_panel import PresetsPanel
from sparse_tui.tui.widgets.run_table import RunsPanel
from sparse_tui.tui.widgets.scatter import ScatterPanel


@dataclass(frozen=True)
class PanelSpec:
    id: str  # the widget's id (and its tab's: tab-ID)
    title: str  # the tab's title, the palette's "Panel: TITLE"
    cls: type  # a widget class with the ConsolePanel hooks
    lazy: bool = True  # mounted after the first frame (a panel not shown at start)


PANELS = [
    PanelSpec("presets", "Presets", PresetsPanel, lazy=False),
    PanelSpec("runs", "Runs", RunsPanel, lazy=False),
    PanelSpec("curves", "Curves", CurvesPanel),
    PanelSpec("attention", "Attention", AttentionPanel),
    PanelSpec("fit", "Fit", FitPanel),
    PanelSpec("phase", "Phase", PhasePanel),
    PanelSpec("scatter", "Scatter", ScatterPanel),
]


def panel_for_key(key: str) -> str | None:
    """The panel a key switches to (its binding below), or None."""
    return PANELS[int(key) - 1].id if key in {str(i) for i in range(1, min(len(PANELS), 9) + 1)} else None


def panel_bindings() -> list[Binding]:
    """Keys 1-9 switch to the first nine panels (the others are in the palette)."""
    return [Binding(str(i), f"panel('{p.id}')", p.title, show=False) for i, p in enumerate(PANELS[:9], 1)]
