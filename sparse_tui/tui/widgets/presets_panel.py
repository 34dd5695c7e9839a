"""The Presets panel: the preset files (the user's own first, then the bundled ones in the groups of
``sparse-tui presets``), the form of the selected one, its validation, save / save as / diff / launch."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.suggester import Suggester
from textual.widgets import Input, Label, ListItem, ListView, Static

from sparse_tui.presets.catalog import is_bundled
from sparse_tui.presets.loading import expand
from sparse_tui.presets.timing import timing
from sparse_tui.tui.form_model import PresetDraft, list_presets
from sparse_tui.tui.guard import Guarded
from sparse_tui.tui.messages import LaunchRequested
from sparse_tui.tui.screens.diff import DiffScreen
from sparse_tui.tui.screens.prompt import PromptScreen
from sparse_tui.tui.screens.unsaved import UnsavedScreen
from sparse_tui.tui.widgets.field_row import FieldRow
from sparse_tui.tui.widgets.panel import ConsolePanel
from sparse_tui.tui.widgets.preset_form import PresetForm


def field_named(name: str, keys: list[str]) -> str | None:
    """The form field a typed name means: the key itself, else the one key it ends (``steps`` -> ``train.steps``),
    else the first key that holds it."""
    name = name.strip()
    if name in keys:
        return name
    return (next((k for k in keys if k.endswith("." + name)), None)
            or next((k for k in keys if name and name in k), None))


class FieldSuggester(Suggester):
    """Completes a field's name: a dotted key, or a key's last part."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.keys = keys

    async def get_suggestion(self, value: str) -> str | None:
        if not value:
            return None
        hit = next((k for k in self.keys if k.startswith(value)), None)
        return hit or next((k.rsplit(".", 1)[-1] for k in self.keys if k.rsplit(".", 1)[-1].startswith(value)), None)


class PresetList(ListView):
    """The preset files: Home / End / PgUp / PgDn move the cursor (a ListView only scrolls on them, so Enter then
    opened the preset the cursor had left off screen), never onto a group's heading."""

    BINDINGS = [
        Binding("home", "jump('first')", "First", show=False),
        Binding("end", "jump('last')", "Last", show=False),
        Binding("pageup", "jump('up')", "Page up", show=False),
        Binding("pagedown", "jump('down')", "Page down", show=False),
    ]

    def action_jump(self, where: str) -> None:
        items = list(self.children)
        usable = [i for i, item in enumerate(items) if not item.disabled]
        if not usable:
            return
        page = max(1, self.scrollable_content_region.height - 1)
        cur = self.index if self.index is not None else usable[0]
        want = {"first": usable[0], "last": usable[-1], "up": cur - page, "down": cur + page}[where]
        if where in ("first", "up"):  # the nearest usable item at or after (up: at or before) the target
            pick = max((i for i in usable if i <= want), default=usable[0])
        else:
            pick = min((i for i in usable if i >= want), default=usable[-1])
        self.index = pick


class PresetsPanel(ConsolePanel, Guarded, Horizontal):
    BINDINGS = [
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("ctrl+n", "save_as", "Save as", priority=True),
        Binding("ctrl+d", "diff", "Diff", priority=True),
        Binding("ctrl+l", "launch", "Launch", priority=True),
        Binding("ctrl+r", "revert", "Revert", priority=True),
        Binding("ctrl+g", "go_to_field", "Go to field", priority=True, show=False),
        # Digits are typed into a text field: Esc leaves the field for the form, where the digits switch panels again.
        Binding("escape", "leave_form", "Leave field", show=False),
    ]

    DEFAULT_CSS = """
    PresetsPanel #preset-list { width: 22; }
    PresetsPanel #preset-list > ListItem.group { color: $text-muted; text-style: bold; }
    PresetsPanel #form-box { width: 1fr; }
    PresetsPanel #field-help { height: 2; color: $text-muted; padding: 0 1; }
    PresetsPanel #form-status { height: auto; max-height: 4; padding: 0 1; }
    """

    def __init__(self, presets_dir: Path, preset: Path | None = None, overrides: list[str] | None = None, **kw):
        super().__init__(**kw)
        self.presets_dir = Path(presets_dir)
        self.initial = Path(preset) if preset else None
        self.overrides = list(overrides or [])
        self.files: list[Path] = []  # the preset files, in list order
        self.rows: list[Path | None] = []  # the list's items: a file, or None for a group's heading
        self.draft: PresetDraft | None = None
        self._validate_timer = None
        self.errors: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        lv = PresetList(id="preset-list", classes="panel")
        lv.border_title = "Presets"
        yield lv
        with Vertical(id="form-box", classes="panel"):
            yield PresetForm(id="preset-form")
            yield Static("", id="form-status")
            yield Static("", id="field-help")

    async def on_mount(self) -> None:
        await self.refresh_files(select=self.initial)
        if self.initial is not None:
            self.focus_form()  # sparse-tui run PRESET: the preset is selected, ready to launch (ctrl+l)
        else:
            self.screen.set_focus(self.query_one("#preset-list", ListView))

    # -- files ---------------------------------------------------------------------------------------------------
    async def refresh_files(self, select: Path | None = None) -> None:
        groups = list_presets(self.presets_dir, select)
        self.rows = [r for group, files in groups for r in [None, *files]]
        self.files = [r for r in self.rows if r is not None]
        items = []
        for group, files in groups:  # a heading (skipped by the cursor), then the names without .toml: they fit
            title = "your own" if group == "yours" else group  # ./presets (--presets-dir)
            items.append(ListItem(Label(f"─ {title}", markup=False), disabled=True, classes="group"))
            items += [ListItem(Label(p.stem, markup=False)) for p in files]
        lv = self.query_one("#preset-list", ListView)
        await lv.clear()
        await lv.extend(items)
        if not self.files:
            self.query_one("#form-status", Static).update(
                f"No preset files in {self.presets_dir}/. Copy one there or pass --presets-dir."
            )
            return
        want = Path(select).resolve() if select is not None else None
        path = next((p for p in self.files if p.resolve() == want), self.files[0])
        lv.index = self.rows.index(path)
        await self.open(path, self.overrides if select is not None and select == self.initial else None)

    @on(ListView.Selected, "#preset-list")
    async def _picked(self, event: ListView.Selected) -> None:
        idx = event.list_view.index
        if idx is None or idx >= len(self.rows) or self.rows[idx] is None:
            return

        def stay() -> None:  # cancelled: the list's cursor goes back to the preset still open
            if self.draft is not None and self.draft.path in self.rows:
                event.list_view.index = self.rows.index(self.draft.path)

        await self.open_path(self.rows[idx], stay)

    def settle(self, then: str, go, stay=None) -> None:
        """Before ``then`` (quit, open another preset) drops the form's unsaved edits: ask Save / Discard / Cancel
        (``screens/unsaved``); ``go`` (a function, maybe async) runs once the edits are saved or discarded, at once
        when there are none; ``stay`` when the answer is Cancel or the save failed (an invalid value)."""
        async def answered(choice: str | None) -> None:
            if choice == "save":
                await self.action_save()
                if self.draft is not None and self.draft.dirty:  # not saved: said, and nothing is dropped
                    choice = None
            if choice is None:
                if stay is not None:
                    stay()
                return
            result = go()
            if hasattr(result, "__await__"):
                await result

        if self.draft is None or not self.draft.dirty:
            self.call_later(answered, "discard")
            return
        self.app.push_screen(UnsavedScreen(self.draft.path.name, then), answered)

    async def open_path(self, path: Path, stay=None) -> None:
        """Open ``path`` (the preset list's Enter, the command palette's "Preset: NAME"): select it in the list and
        show its form; over unsaved edits, ask first (``settle``; ``stay`` on Cancel)."""
        async def go() -> None:
            if path in self.rows:
                self.query_one("#preset-list", ListView).index = self.rows.index(path)
            if self.draft is None or self.draft.path != path:
                await self.open(path)
            self.focus_form()

        if self.draft is None or not self.draft.dirty or self.draft.path == path:
            await go()
        else:
            self.settle("open another preset", go, stay)

    async def open(self, path: Path, overrides: list[str] | None = None) -> None:
        try:
            self.draft = PresetDraft(path, overrides)
        except OSError as e:
            self.app.notify(f"{path}: {e.strerror or e}", severity="error")
            return
        await self.query_one(PresetForm).load(self.draft)
        self.query_one("#field-help", Static).update("")  # the previous preset's field help is not this one's
        self.validate_now()

    def on_resize(self) -> None:
        """The file list is as wide as its longest name (22 to 40 columns) when the screen has room for it."""
        longest = max((len(p.stem) for p in self.files), default=0)
        want = 22 if self.size.width < 120 else min(40, max(22, longest + 4))
        if want != getattr(self, "_list_width", 22):
            self._list_width = want
            self.query_one("#preset-list", ListView).styles.width = want

    @classmethod
    def create(cls, app, pid: str) -> PresetsPanel:
        return cls(app.presets_dir, app.preset, app.overrides, id=pid)

    def focus_panel(self) -> None:
        """The file list (Enter opens the form), not a field: digits still switch panels."""
        self.screen.set_focus(self.query_one("#preset-list", ListView))

    def focus_form(self, first_field: bool = False) -> None:
        """Focus the form (not one of its text fields: digits still switch panels; ↓/Tab enter the fields), or
        its first field."""
        form = self.query_one(PresetForm)
        rows = form.rows()
        if first_field and rows:
            rows[0].editor.focus()
        else:
            form.focus()

    # -- editing and validation ------------------------------------------------------------------------------------
    @on(PresetForm.Edited)
    async def _edited(self, event: PresetForm.Edited) -> None:
        if event.kind_changed:
            await self.query_one(PresetForm).rebuild()
            self.validate_now()
            return
        if self._validate_timer is not None:
            self._validate_timer.stop()
        self._validate_timer = self.set_timer(0.15, self.validate_now)

    def validate_now(self):
        """Validate the draft with the CLI's validator and flag each invalid field. Returns the Validation."""
        d = self.draft
        if d is None:
            return None
        v = d.validate()
        self.errors = dict(v.field_errors)
        form = self.query_one(PresetForm)
        for row in form.rows():
            row.set_error(v.field_errors.get(row.spec.key))
            row.set_changed(d.values.get(row.spec.key, "").strip() != d.original.get(row.spec.key, "").strip())
        box = self.query_one("#form-box")
        box.border_title = f"{d.path.name}{' *' if d.dirty else ''}"
        status = self.query_one("#form-status", Static)
        if v.ok:
            try:
                n = len(expand(v.loaded))
            except Exception:  # noqa: BLE001 - shown, never raised
                n = 0
            took = timing(d.path)  # the header's measured time, as sparse-tui presets lists it (presets/timing.py)
            took = f" · took {escape(took.text())}" if took.duration != "-" else ""
            status.update(f"[green]✓ valid[/] · {n} run(s){took}{' · unsaved changes (ctrl+s)' if d.dirty else ''}")
        else:
            n = len(v.field_errors) + len(v.general)
            lines = [f"[red]✗ {n} problem(s)[/]"] + [f"[red]{g}[/]" for g in v.general[:2]]
            if v.field_errors and not v.general:
                k, m = next(iter(v.field_errors.items()))
                lines[0] += f": {k}: {m}"
            status.update("\n".join(lines))
        box.border_subtitle = "ctrl+s save · ctrl+l launch"
        return v

    def on_descendant_focus(self, event) -> None:
        # The panel highlight is the app's (-active, set only when focus crosses panels): nothing here may restyle
        # or re-layout the whole form, this runs on every Tab.
        w = event.widget if hasattr(event, "widget") else None
        row = next((a for a in getattr(w, "ancestors", []) if isinstance(a, FieldRow)), None)
        helpw = self.query_one("#field-help", Static)
        if row is not None:
            row.scroll_visible(animate=False)  # keep the focused field on screen (80x24 shows a third of the form)
            err = self.errors.get(row.spec.key)
            text = f"[b]{row.spec.key}[/] ({row.spec.type}): {row.spec.help}" + (f"\n[red]{err}[/]" if err else "")
            helpw.update(text, layout=False)  # fixed height 2: no layout pass of the screen
        elif isinstance(w, Input) and w.id == "add-sweep":
            helpw.update("Add a sweep: KEY = [values], Enter. Runs = product of all sweep lists × seeds.", layout=False)

    # -- actions ---------------------------------------------------------------------------------------------------
    def _checked(self):
        if self.draft is None:
            self.app.notify("no preset selected", severity="warning")
            return None
        v = self.validate_now()
        if not v.ok:
            first = next(iter(v.field_errors.items()), None)
            where = f" (first: {first[0]}: {first[1]})" if first else (f" ({v.general[0]})" if v.general else "")
            self.app.notify(f"{self.draft.path.name}: fix the invalid values first{where}", severity="error")
            return None
        return v

    async def action_save(self) -> None:
        if self._checked() is None:
            return
        if not self.draft.dirty:
            self.app.notify("nothing to save")
            return
        target = self._own_copy()
        if target is not None and target.exists():
            self.app.notify(f"{target} exists (your own copy, listed first): edit that one, or save as (ctrl+n)",
                            severity="error")
            return
        try:
            if target is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
            path = self.draft.save(target)
        except OSError as e:
            self.app.notify(f"not saved: {e}", severity="error")
            return
        if target is not None:
            self.app.notify(f"saved your copy {path} (the bundled preset is not changed)")
            await self.refresh_files(select=path)
            return
        self.app.notify(f"saved {path}")
        await self.query_one(PresetForm).load(self.draft)
        self.validate_now()

    def _own_copy(self) -> Path | None:
        """Where ctrl+s writes a bundled preset of an installed sparse-tui: the user's own folder (the package's
        files are never edited); None: in place (the user's own file, or a checkout's presets/)."""
        path = self.draft.path
        if is_bundled(path) and not is_bundled(self.presets_dir / path.name):
            return self.presets_dir / path.name
        return None

    def action_save_as(self) -> None:
        if self._checked() is None:
            return

        suggestion = str(self.draft.path.with_name(self.draft.path.stem + "-copy.toml"))

        async def done(value: str | None) -> None:
            if not value:
                return
            target = Path(value)
            if target.suffix != ".toml":
                target = target.with_suffix(".toml")
            if target.exists() and target.resolve() != self.draft.path.resolve():
                self.app.notify(f"{target} exists; choose another name", severity="error")
                return
            try:
                self.draft.save(target)
            except OSError as e:
                self.app.notify(f"not saved: {e}", severity="error")
                return
            self.app.notify(f"saved {target}")
            await self.refresh_files(select=target)

        self.app.push_screen(PromptScreen("Save preset as", suggestion), done)

    def action_diff(self) -> None:
        if self.draft is None:
            return

        self.app.push_screen(DiffScreen(self.draft.path.name, self.draft.diff()))

    def action_go_to_field(self) -> None:
        """ctrl+g (or / in the form): type a field's name (``steps``, ``train.lr``; → completes), Enter focuses it
        (from ``seeds`` to ``train.steps`` took ~30 Tabs)."""
        rows = self.query_one(PresetForm).rows()
        if not rows:
            return
        keys = [r.spec.key for r in rows]

        def done(name: str | None) -> None:
            row = next((r for r in rows if r.spec.key == field_named(name or "", keys)), None) if name else None
            if row is None:
                if name:
                    self.app.notify(f"no field named {name!r} in this preset", severity="warning", markup=False)
                return
            row.editor.focus()
            row.scroll_visible(animate=False)

        self.app.push_screen(PromptScreen("Go to field (→ completes)", suggester=FieldSuggester(keys)), done)

    def action_leave_form(self) -> None:
        """Esc leaves editing: from a field to the form (digits switch panels again, ↓/Tab go back into the
        fields), from the form to the preset list. An open drop-down closes itself first: its overlay handles Esc
        before this panel sees it."""
        form = self.query_one(PresetForm)
        focused = self.app.focused
        if focused is form:
            self.screen.set_focus(self.query_one("#preset-list", ListView))
        elif focused is not None and form in focused.ancestors:
            form.focus()
        elif focused is not None and self.query_one("#form-box") in focused.ancestors:
            self.screen.set_focus(self.query_one("#preset-list", ListView))

    async def action_revert(self) -> None:
        if self.draft is None:
            return
        if not self.draft.dirty:
            self.app.notify("nothing to revert")  # no rebuild of the whole form (~340 widgets) for nothing
            return
        await self.open(self.draft.path)
        self.app.notify("edits dropped")

    def action_launch(self) -> None:
        v = self._checked()
        if v is None:
            return
        self.post_message(LaunchRequested(v.loaded))
