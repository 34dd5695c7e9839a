"""The command palette (ctrl+p) and the help screen's key groups: what the console offers, listed in one place."""

from __future__ import annotations

import importlib.util
from functools import partial
from typing import Any, Iterator

from textual.app import SystemCommand
from textual.binding import Binding
from textual.command import CommandPalette as TextualCommandPalette

from sparse_tui.tui import panels
from sparse_tui.tui.screens.answer_once import AnswersOnce
from sparse_tui.tui.screens.atlas import AtlasScreen, open_atlas
from sparse_tui.tui.screens.chart import ChartScreen
from sparse_tui.tui.screens.unsaved import UnsavedScreen
from sparse_tui.tui.widgets.presets_panel import PresetList, PresetsPanel

# (title, help, panel, action of that panel)
PANEL_ACTIONS = [
    ("Launch the preset in the form", "ctrl+l: record its runs and start them", "presets", "launch"),
    ("Save the preset", "ctrl+s", "presets", "save"),
    ("Diff of the unsaved preset edits", "ctrl+d", "presets", "diff"),
    ("Compare two runs", "x: the two marked runs (or the current one and the next): config diff, then their curves",
     "runs", "compare"),
    ("Export runs", "e: CSV / JSON lines / Parquet, run table or per-step metrics", "runs", "export"),
    ("Cancel runs", "c: the marked (or current) queued / running runs", "runs", "cancel"),
    ("Resume runs", "u: the marked (or current) failed / interrupted / queued runs, from their checkpoint",
     "runs", "resume"),
    ("Fit the plateau law", "enter in the Fit panel", "fit", "fit"),
    ("Guess the fit variables", "g in the Fit panel", "fit", "guess"),
    ("Next phase-diagram value", "m in the Phase panel", "phase", "value"),
    ("Attention of the current run", "t in the Runs panel", "runs", "attention"),
]

FORM_KEYS = [
    Binding("tab, shift+tab", "", "next / previous field"),
    Binding("escape", "", "back to the preset list (then the digits switch panels)"),
    Binding("down, up", "", "next / previous field (also on a closed list)"),
    Binding("enter, space", "", "open a choice list"),
    Binding("enter", "", "add a sweep key (on its line)"),
    Binding("slash, ctrl+g", "", "go to a field: type its name (steps, train.lr; → completes), enter"),
]


def system_commands(app: Any) -> Iterator[SystemCommand]:
    """Every panel, every preset file, the actions of the panels, then help (``app``: the SparseTuiApp)."""
    for i, p in enumerate(panels.PANELS, 1):  # read now: the registry is what it is when the palette opens
        key = f" (key {i})" if i < 10 else ""
        yield SystemCommand(f"Panel: {p.title}", f"switch to the {p.title} panel{key}",
                            partial(app.main.show_panel, p.id))
    presets = app.main.query_one(PresetsPanel)
    for path in presets.files:
        yield SystemCommand(f"Preset: {path.name}", f"open {path} in the form",
                            partial(app.call_later, presets.open_path, path))
    for title, help_, pid, action in PANEL_ACTIONS:
        yield SystemCommand(title, help_, partial(app.main.panel_action, pid, action))

    yield SystemCommand("Atlas: reproduce a figure of the paper", "pick a figure, launch its CPU preset, see the fit "
                        "against the paper's law (sparse-tui reproduce)", partial(open_atlas, app))
    yield from executor_commands(app)
    yield SystemCommand("Help: all keys", "f1 / ?", app.action_help)


def executor_commands(app: Any) -> Iterator[SystemCommand]:
    """Where launches train (docs/CLUSTER.md): the other executor than the current one; Ray only when installed
    (the app checks the cluster answers before it switches)."""
    if app.executor.kind == "ray":
        yield SystemCommand("Executor: this machine", "launches and resumes train here (--executor local)",
                            partial(app.action_executor, "local"))
    elif importlib.util.find_spec("ray") is not None:
        yield SystemCommand("Executor: the Ray cluster",
                            f"launches and resumes train on Ray at {app.executor.get('--ray-address') or 'auto'} "
                            "(--executor ray; "
                            "docs/CLUSTER.md)", partial(app.action_executor, "ray"))


def help_groups(app: Any) -> list[tuple[str, list[Binding]]]:
    """The help screen's tables: the app's keys, each panel's, the preset list's and form's, the full-screen
    chart's, the Atlas's, the unsaved-edits question's, and every command of the palette (ctrl+p)."""
    palette = Binding("ctrl+p", "", "the command palette: every panel, preset and action, the Atlas (listed below)")
    return [("everywhere", panels.panel_bindings() + [b for b in app.BINDINGS if isinstance(b, Binding)] + [palette]),
            *((p.title, list(p.cls.BINDINGS)) for p in panels.PANELS), ("Preset list", list(PresetList.BINDINGS)),
            ("Presets form", FORM_KEYS), ("Full-screen chart (f)", list(ChartScreen.BINDINGS)),
            ("Atlas (palette)", list(AtlasScreen.BINDINGS)), ("Unsaved edits", list(UnsavedScreen.BINDINGS)),
            ("Palette (ctrl+p)", palette_lines(app))]


def palette_lines(app: Any) -> list[Binding]:
    """The palette's commands as help lines (the presets in one line: there is one command per file)."""
    lines, presets = [], 0
    for c in system_commands(app):
        if c.title.startswith("Preset: "):
            presets += 1
            if presets == 1:
                lines.append(Binding("ctrl+p", "", "Preset: NAME — open a preset file in the form (one per file)"))
            continue
        lines.append(Binding("ctrl+p", "", f"{c.title} — {c.help}"))
    return lines


class CommandPalette(AnswersOnce, TextualCommandPalette):
    """Textual's palette (ctrl+p, and its theme picker), made safe against two races the chaos test found in
    Textual 8.2.8: PageUp / PageDown before its result list is laid out indexed the list's lines
    (``OptionList._move_page``) before an unsized list had built any, a ``KeyError`` (such a key has no page to move
    then: it does nothing); and a second Enter before it closed dismissed it twice, popping the last screen
    (``ScreenStackError``; it answers once, like the console's dialogs)."""

    def _action_command_list(self, action: str) -> None:
        try:
            super()._action_command_list(action)
        except KeyError:
            if action not in ("page_up", "page_down"):
                raise
