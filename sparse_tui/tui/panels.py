"""The console's panels, in the order of their keys (1-6) and tabs: (id, title, widget class)."""

from __future__ import annotations

from sparse_tui.tui.widgets.attention_map import AttentionPanel
from sparse_tui.tui.widgets.curves import CurvesPanel
from sparse_tui.tui.widgets.fit_panel import FitPanel
from sparse_tui.tui.widgets.phase_diagram import PhasePanel
from sparse_tui.tui.widgets.presets_panel import PresetsPanel
from sparse_tui.tui.widgets.run_table import RunsPanel

PANELS = (
    ("presets", "Presets", PresetsPanel),
    ("runs", "Runs", RunsPanel),
    ("curves", "Curves", CurvesPanel),
    ("attention", "Attention", AttentionPanel),
    ("fit", "Fit", FitPanel),
    ("phase", "Phase", PhasePanel),
)
LAZY = {"curves", "attention", "fit", "phase"}  # mounted after the first frame (they are not shown at start)
