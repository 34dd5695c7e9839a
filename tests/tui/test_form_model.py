"""The preset form's model: CLI-identical messages per field, comment-preserving save, diff, schema fields."""

from pathlib import Path

from sparse_tui.tui.form_model import PresetDraft, section_fields

from .conftest import tiny_text


def test_fields_come_from_the_schema():
    lr = next(f for f in section_fields("train") if f.key == "train.lr")
    assert lr.type == "float" and lr.default == 1e-3 and "learning rate" in lr.help.lower()
    kind = next(f for f in section_fields("task", "linreg") if f.key == "task.kind")
    assert kind.choices == ["linreg", "recall", "nearest"]
    assert any(f.key == "task.d" for f in section_fields("task", "linreg"))


def test_invalid_value_flagged_at_its_field_with_the_cli_message(presets_dir: Path):
    d = PresetDraft(presets_dir / "tiny.toml")
    assert d.validate().ok
    d.set("train.lr", "-1")
    v = d.validate()
    assert v.field_errors == {"train.lr": "must be > 0"}
    d.set("train.lr", "abc")
    assert d.validate().field_errors["train.lr"] == "must be a number"
    d.set("train.lr", "5e-3")
    d.set("task.n_pairs", "40")
    assert "n_pairs" in d.validate().field_errors.get("task.n_pairs", "") or d.validate().field_errors


def test_save_keeps_comments_order_and_number_format(presets_dir: Path):
    p = presets_dir / "tiny.toml"
    d = PresetDraft(p)
    d.set("train.lr", "5e-3")
    d.set("sweep.model.d_model", "[16, 32]")
    assert "-lr = 1e-2" in d.diff() and "+lr = 5e-3" in d.diff()
    d.save()
    text = p.read_text()
    assert "lr = 5e-3         # learning rate" in text
    assert "# Keep this comment: the form must preserve it on save." in text
    assert text.index("[task]") < text.index("[model]") < text.index("[train]")
    assert '"model.d_model" = [16, 32]' in text
    assert text.replace("lr = 5e-3", "lr = 1e-2").split("\n[sweep]")[0] == tiny_text()
    assert not PresetDraft(p).dirty


def test_overrides_preload_edits(presets_dir: Path):
    d = PresetDraft(presets_dir / "tiny.toml", ["train.lr=3e-3"])
    assert d.values["train.lr"] == "3e-3" and d.dirty
    assert d.validate().loaded.preset.train.lr == 3e-3


def test_tags_are_a_form_field_and_launched_runs_carry_them(tmp_path: Path):
    """Tags come from the preset (``tags = [...]``): the form edits them, validates them like the CLI, saves them
    before the first table, and the runs recorded from the form's preset carry them (``runs --tag``, the filter)."""
    from sparse_tui.presets.loading import expand
    from sparse_tui.store import RunStore
    from sparse_tui.tui.render.runs import run_tags

    f = tmp_path / "tiny.toml"
    f.write_text(tiny_text(), encoding="utf-8")
    d = PresetDraft(f)
    assert "tags" in [s.key for s in d.fields()]
    d.set("tags", '["bad tag"]')
    assert "no spaces" in d.validate().field_errors["tags"]
    d.set("tags", '["probe", "lr:high"]')
    v = d.validate()
    assert v.ok, v.field_errors
    text = d.render()
    assert text.index('tags = ["probe", "lr:high"]') < text.index("[task]")
    store = RunStore(tmp_path / "runs")
    _, ids = store.create_runs(expand(v.loaded))
    assert run_tags(store.get(ids[0])) == ["probe", "lr:high"]
    store.close()
    d.save()
    assert PresetDraft(f).original["tags"] == '["probe", "lr:high"]'
