"""Preset schema, error lines, --set overrides and sweep expansion."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparse_tui.presets.errors import PresetError
from sparse_tui.presets.loading import expand, load_preset, parse_value

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
    # users do not have the reference files: cite the paper as arXiv 2505.17863 and blogs by title
    import re

    assert not re.search(r"\d{3}_[0-9a-f]{16}\.txt", text), "a header cites a reference file by its file name"


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
        ("n_pairs = 3", "n_pairs = 30",
         "tiny.toml: task.n_pairs: must be <= n_tokens (keys in one context are distinct)"),
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


def _header_set_lines(path: Path) -> list[str]:
    """The ``--set`` overrides of the CPU-sized command written in a preset's header (``# sparse-tui run ...`` and
    its continuation lines)."""
    import shlex

    lines = path.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.lstrip("# ").startswith(f"sparse-tui run presets/{path.name}"))
    cmd = [lines[start].lstrip("# ")]
    for ln in lines[start + 1:]:
        body = ln.lstrip("#").strip()
        if not ln.startswith("#") or not body.startswith("--"):
            break
        cmd.append(body)
    args = shlex.split(" ".join(cmd))
    return [args[i + 1] for i, a in enumerate(args) if a == "--set"]


@pytest.mark.parametrize(
    "name,runs,task_kind,grid,paper_steps",
    [
        # Fig. 4 right: 3 N_tokens x 4 N_pairs x 2 seeds; Table 1 recall model; the paper's law at (256, 12) ~ 11.8k
        ("paper_fig4_recall_small", 24, "recall", {"task.n_tokens": [64, 128, 256], "task.n_pairs": [4, 6, 8, 12]},
         0.55 * 256**0.79 * 12**2.25),
        # Fig. 3: 3 d x 3 T x 2 B x 2 seeds; Table 1 regression model; the paper's law at (32, 256, 1) ~ 5.6k
        ("paper_fig3_linreg_small", 36, "linreg", {"task.d": [8, 16, 32], "task.T": [64, 128, 256], "task.B": [1, 2]},
         0.76 * 32**1.29 * 256**0.80),
    ],
)
def test_small_paper_presets_and_their_cpu_variant(name, runs, task_kind, grid, paper_steps):
    path = Path(__file__).parent.parent / "presets" / f"{name}.toml"
    loaded = load_preset(path)
    specs = expand(loaded)
    assert len(specs) == runs and loaded.preset.sweep == grid
    cfg = specs[0].config
    m = cfg.model
    assert cfg.task.kind == task_kind and cfg.train.lr == 1e-4 and cfg.train.batch_size == 32
    assert (m.n_heads, m.d_model, m.d_qk, m.mlp, m.mlp_factor, m.pos_enc) == (4, 256, 64, True, 4, "sinusoidal")
    assert m.n_layers == (4 if task_kind == "recall" else 2)
    assert cfg.train.steps >= 1.2 * paper_steps  # room past the slowest plateau the paper's law predicts
    text = path.read_text()
    assert "estimate, NOT measured" in text and "2-core CPU" in text
    from sparse_tui import atlas

    cpu = [e.preset("cpu") for e in atlas.entries_of_preset(name) if e.preset("cpu")]
    if cpu:  # the atlas names a CPU-sized preset of the same figure (issue 18): smaller; the paper's model, or
        # (recall, issue 22: Table 1's 4-layer model takes 0.3-0.7 s a step here) a smaller one its header names
        small = expand(load_preset(path.parent / f"{cpu[0]}.toml"))
        assert 4 <= len(small) < runs
        sc = small[0].config
        assert sc.train.steps < cfg.train.steps
        if task_kind == "recall":
            assert sc.model.n_layers < m.n_layers and sc.model.d_model < m.d_model
            assert "NOT the paper's model" in (path.parent / f"{cpu[0]}.toml").read_text()
            assert max(s.config.task.n_pairs for s in small) < max(s.config.task.n_pairs for s in specs)
        else:
            assert sc.model == m
            assert max(s.config.task.T for s in small) < max(s.config.task.T for s in specs)
        return
    # else the CPU-sized command in the header is valid and smaller in every way
    assert "CPU-sized command" in text
    sets = _header_set_lines(path)
    assert len(sets) >= 5
    small = expand(load_preset(path, sets))
    assert 4 <= len(small) < runs
    sc = small[0].config
    assert sc.model.d_model < m.d_model and sc.train.steps < cfg.train.steps
