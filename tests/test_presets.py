"""Preset schema, error lines, --set overrides and sweep expansion."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparse_tui.presets import PresetError, expand, load_preset, parse_value

PRESETS = sorted((Path(__file__).parent.parent / "presets").glob("*.toml"))


def _errors(path: Path, overrides=None) -> list[str]:
    with pytest.raises(PresetError) as ei:
        load_preset(path, overrides)
    return ei.value.lines


@pytest.mark.parametrize("path", PRESETS, ids=[p.name for p in PRESETS])
def test_shipped_presets_validate_and_have_header(path: Path):
    loaded = load_preset(path)
    specs = expand(loaded)
    assert specs, "a preset has at least one run"
    head = path.read_text().splitlines()[0]
    assert head.startswith("#") and path.name in head, "each preset starts with a header comment naming itself"
    text = path.read_text()
    assert "Time:" in text and "What you should see" in text


def test_sweep_is_product_times_seeds(tiny_preset: Path):
    text = tiny_preset.read_text().replace("seeds = [0]", "seeds = [0, 1, 2]")
    text += '\n[sweep]\n"train.lr" = [1e-2, 1e-3]\n"model.d_model" = [8, 16]\n'
    tiny_preset.write_text(text)
    specs = expand(load_preset(tiny_preset))
    assert len(specs) == 2 * 2 * 3
    combos = {(s.config.train.lr, s.config.model.d_model, s.seed) for s in specs}
    assert len(combos) == 12
    assert specs[0].swept == {"train.lr": 1e-2, "model.d_model": 8, "seed": 0}
    assert specs[0].params["train.lr"] == 1e-2 and specs[0].params["task.n_tokens"] == 8


def test_set_overrides_any_key(tiny_preset: Path):
    loaded = load_preset(tiny_preset, ["train.lr=3e-4", "model.pos_enc=none", "task.n_pairs=2", "seeds=[4,5]"])
    specs = expand(loaded)
    assert [s.seed for s in specs] == [4, 5]
    c = specs[0].config
    assert (c.train.lr, c.model.pos_enc, c.task.n_pairs) == (3e-4, "none", 2)


def test_parse_value():
    assert parse_value("1e-3") == 1e-3 and parse_value("3") == 3 and parse_value("true") is True
    assert parse_value("[1, 2]") == [1, 2] and parse_value("adam") == "adam" and parse_value('"x y"') == "x y"


@pytest.mark.parametrize(
    "old,new,expected",
    [
        ("lr = 1e-2", "lr = -1.0", "tiny.toml: train.lr: must be > 0"),
        ("lr = 1e-2", "lr = 1e-2\nlearning_rate = 3", "tiny.toml: train.learning_rate: unknown key"),
        ("steps = 20", 'steps = "many"', "tiny.toml: train.steps: must be an integer"),
        ("n_heads = 1", "n_heads = 3", "tiny.toml: model.d_model: must be divisible by n_heads"),
        ("n_pairs = 3", "n_pairs = 30", "tiny.toml: task.n_pairs: must be <= n_tokens (keys in one context are distinct)"),
        ('kind = "recall"', 'kind = "copy"', "tiny.toml: task: must be one of 'linreg', 'recall', 'nearest'"),
        ('device = "cpu"', 'device = "tpu"', "tiny.toml: train.device: must be one of auto, cpu, cuda, cuda:N"),
    ],
)
def test_bad_values_name_file_and_key(tiny_preset: Path, old, new, expected):
    tiny_preset.write_text(tiny_preset.read_text().replace(old, new, 1))
    lines = _errors(tiny_preset)
    assert expected in lines, lines


def test_one_line_per_problem(tiny_preset: Path):
    text = tiny_preset.read_text().replace("lr = 1e-2", "lr = 0").replace("steps = 20", "steps = -5")
    tiny_preset.write_text(text)
    lines = _errors(tiny_preset)
    assert lines == ["tiny.toml: train.lr: must be > 0", "tiny.toml: train.steps: must be >= 1"]


def test_toml_syntax_error(tiny_preset: Path):
    tiny_preset.write_text(tiny_preset.read_text() + "\n[train\n")
    (line,) = _errors(tiny_preset)
    assert line.startswith("tiny.toml: TOML syntax error")


def test_sweep_over_missing_key_and_bad_value(tiny_preset: Path):
    tiny_preset.write_text(tiny_preset.read_text() + '\n[sweep]\n"train.rate" = [1]\n"train.lr" = [1e-3, -2]\n')
    lines = _errors(tiny_preset)
    assert "tiny.toml: sweep.train.rate: no such key" in lines
    assert "tiny.toml: sweep.train.lr[1]: must be > 0" in lines


def test_sweep_cross_field_rule_per_point(tiny_preset: Path):
    tiny_preset.write_text(tiny_preset.read_text() + '\n[sweep]\n"model.n_heads" = [1, 3]\n')
    lines = _errors(tiny_preset)
    assert any("model.d_model: must be divisible by n_heads" in ln for ln in lines), lines


def test_bad_set_flag(tiny_preset: Path):
    assert _errors(tiny_preset, ["train.lr"]) == ["--set train.lr: expected key=value"]
    assert _errors(tiny_preset, ["train.lr=-1"]) == ["tiny.toml: train.lr: must be > 0"]


def test_missing_file(tmp_path: Path):
    (line,) = _errors(tmp_path / "nope.toml")
    assert line.endswith("nope.toml: file not found")


def test_toy_model_needs_linreg(tiny_preset: Path):
    text = tiny_preset.read_text()
    start, end = text.index("[model]"), text.index("[train]")
    tiny_preset.write_text(text[:start] + '[model]\nkind = "toy"\n\n' + text[end:])
    lines = _errors(tiny_preset)
    assert any("model.kind" in ln and "linreg" in ln for ln in lines), lines
