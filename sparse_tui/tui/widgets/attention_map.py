"""The Attention panel: one run's attention map at a snapshot step, layer, head and example, as a colour heatmap.

Keys step through the training snapshots; the map is loaded and rendered in a thread worker (``AttentionData``).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.messages import AttentionData, AttentionRequested
from sparse_tui.tui.widgets.panel import ConsolePanel, StoreView
from sparse_tui.tui.widgets.shallow_focus import ShallowFocus


class AttentionPanel(ConsolePanel, ShallowFocus, Guarded, Vertical, can_focus=True):
    BINDINGS = [
        Binding("left,comma", "step(-1)", "Prev step"),
        Binding("right,full_stop", "step(1)", "Next step"),
        Binding("home", "goto(0)", "First", show=False),
        Binding("end", "goto(-1)", "Last", show=False),
        Binding("l", "layer", "Layer"),
        Binding("h", "head", "Head"),
        Binding("x", "example", "Example"),
        Binding("up", "scroll('up')", "Scroll up", show=False),
        Binding("down", "scroll('down')", "Scroll down", show=False),
        Binding("pageup", "scroll('page_up')", "Page up", show=False),
        Binding("pagedown", "scroll('page_down')", "Page down", show=False),
    ]

    DEFAULT_CSS = """
    AttentionPanel #attn-info { height: auto; color: $text-muted; }
    AttentionPanel VerticalScroll { height: 1fr; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.run_id: str | None = None
        self.steps: list[int] = []
        self.step: int | None = None  # None = latest
        self.layer_idx = 0
        self.layer_names: list[str] = []
        self.head = 0
        self.heads = 1
        self.example = 0
        self.examples = 1

    def compose(self) -> ComposeResult:
        yield Static("Pick a run in the Runs panel (t opens its attention).", id="attn-info")
        with VerticalScroll():
            yield Static("", id="attn-map")

    def on_mount(self) -> None:
        self.border_title = "Attention"
        self.border_subtitle = "←/→ step · l layer · h head · x example"

    def panel_shown(self, view: StoreView) -> None:
        """The run under the Runs table's cursor (a new run starts at its newest step, first layer, head, example)."""
        if view.current != self.run_id:
            self.run_id = view.current
            self.step = None
            self.layer_idx = self.head = self.example = 0
        self.request()

    def store_changed(self, view: StoreView) -> None:
        """Follow the newest snapshot of a running run shown at its newest step."""
        if self.run_id is not None and self.step is not None and self.steps and self.step == self.steps[-1]:
            rec = next((r for r in view.records if r.run_id == self.run_id), None)
            if rec is not None and rec.status == "running":
                self.step = None
                self.request()

    def request(self) -> None:
        if self.run_id is None:
            return
        known = self.layer_names and self.layer_idx < len(self.layer_names)
        layer = self.layer_names[self.layer_idx] if known else None
        width = max(30, (self.size.width or 78) - 2)
        self.post_message(AttentionRequested(self.run_id, self.step, layer, self.head, self.example, width))

    def update_data(self, d: AttentionData) -> None:
        """A rendered snapshot of the run shown, or (no snapshots yet) what the worker said instead."""
        if not d.steps:
            self.border_title = "Attention"
            self.query_one("#attn-info", Static).update(d.info)
            self.query_one("#attn-map", Static).update("")
            return
        if d.run_id != self.run_id:
            return
        self.steps, self.step, self.layer_names = d.steps, d.step, d.layers
        self.heads, self.examples = d.heads, d.examples
        pos = self.steps.index(d.step) + 1 if d.step in self.steps else 0
        self.border_title = f"Attention · {d.run_id} · step {d.step} ({pos}/{len(self.steps)})"
        self.query_one("#attn-info", Static).update(d.info)
        self.query_one("#attn-map", Static).update(d.body)

    def action_scroll(self, how: str) -> None:
        """Scroll the map (65 rows do not fit 80x24) while the panel keeps the focus for the step/layer keys."""
        box = self.query_one(VerticalScroll)
        getattr(box, f"scroll_{how}")(animate=False)

    def action_step(self, delta: int) -> None:
        if not self.steps:
            return
        i = self.steps.index(self.step) if self.step in self.steps else len(self.steps) - 1
        i = max(0, min(len(self.steps) - 1, i + delta))
        self.step = self.steps[i]
        self.request()

    def action_goto(self, i: int) -> None:
        """Home / End: the first / the last snapshot."""
        if self.steps:
            self.step = self.steps[i]
            self.request()

    def action_layer(self) -> None:
        if self.layer_names:
            self.layer_idx = (self.layer_idx + 1) % len(self.layer_names)
            self.request()

    def action_head(self) -> None:
        self.head = (self.head + 1) % max(1, self.heads)
        self.request()

    def action_example(self) -> None:
        self.example = (self.example + 1) % max(1, self.examples)
        self.request()
