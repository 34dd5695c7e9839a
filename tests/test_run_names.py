"""Run names (issue 12: "each run gets a name: the preset plus the keys that differ from it") and tags (from the
preset's ``tags`` and ``sparse-tui run --tag``), stored with the run and shown by ``runs``."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import TINY_PRESET

from sparse_tui.presets.loading import expand, load_preset, validate_preset_data

ENV = {"OMP_NUM_THREADS": "1", "COLUMNS": "200", "PATH": "/usr/bin:/bin"}


def cli(*args: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True, timeout=240,
                          env={**os.environ, **ENV})


def test_label_names_the_keys_edited_away_from_the_file(tiny_preset):
    assert [s.label() for s in expand(load_preset(tiny_preset))] == ["seed=0"]
    specs = expand(load_preset(tiny_preset, ["train.steps=300", "seeds=[0,1]"]))
    assert [s.label() for s in specs] == ["steps=300 seed=0", "steps=300 seed=1"]
    assert specs[0].edited == {"train.steps": 300}
    # a value equal to the file's (0.01 == 1e-2) is no edit; a swept key shows once, as swept
    assert [s.label() for s in expand(load_preset(tiny_preset, ["train.lr=0.01"]))] == ["seed=0"]
    specs = expand(load_preset(tiny_preset, ["train.lr=0.1", "sweep.train.lr=[0.1, 0.2]"]))
    assert [s.label() for s in specs] == ["lr=0.1 seed=0", "lr=0.2 seed=0"]
    # the console's form validates edited data with the file's path: the edits are read against the file
    raw = load_preset(tiny_preset).raw
    raw["model"]["d_model"] = 32
    loaded = validate_preset_data(raw, tiny_preset.name, path=tiny_preset)
    assert [s.label() for s in expand(loaded)] == ["d_model=32 seed=0"]


def test_tags_from_preset_and_flag_are_stored_shown_and_filtered(tmp_path, runs_dir):
    p = tmp_path / "tagged.toml"
    p.write_text(TINY_PRESET.replace('seeds = [0]', 'seeds = [0]\ntags = ["ablation"]'))
    r = cli("run", str(p), "--headless", "--runs-dir", str(runs_dir), "--set", "train.steps=10", "--tag", "v2")
    assert r.returncode == 0, r.stderr
    r = cli("run", str(p), "--headless", "--runs-dir", str(runs_dir), "--set", "train.steps=10")
    assert r.returncode == 0, r.stderr
    rows = json.loads(cli("runs", "--json", "--runs-dir", str(runs_dir)).stdout)
    assert sorted(tuple(r["tags"]) for r in rows) == [("ablation",), ("ablation", "v2")]
    assert {r["name"] for r in rows} == {"tiny steps=10 seed=0"}
    assert "params.tags" not in rows[0]
    only = json.loads(cli("runs", "--json", "--tag", "v2", "--runs-dir", str(runs_dir)).stdout)
    assert len(only) == 1 and only[0]["tags"] == ["ablation", "v2"]
    table = cli("runs", "--runs-dir", str(runs_dir)).stdout
    assert "steps=10 seed=0" in table


def _one_line_exit_2(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_bad_tags_exit_2_one_line_nothing_written(tmp_path, tiny_preset, runs_dir):
    msg = _one_line_exit_2(cli("run", str(tiny_preset), "--headless", "--runs-dir", str(runs_dir), "--tag", "a b"))
    assert "--tag" in msg and "'a b'" in msg
    msg = _one_line_exit_2(cli("run", str(tiny_preset), "--headless", "--runs-dir", str(runs_dir), "--tag", ""))
    assert "--tag" in msg
    msg = _one_line_exit_2(cli("run", str(tiny_preset), "--headless", "--runs-dir", str(runs_dir),
                               "--tag", "x", "--tag", "x"))
    assert "--tag" in msg and "twice" in msg
    for bad, words in (('tags = "x"', "list"), ('tags = ["x y"]', "'x y'"), ('tags = [1]', "strings"),
                       ('tags = ["a", "a"]', "twice")):
        p = tmp_path / "bad.toml"
        p.write_text(TINY_PRESET.replace('seeds = [0]', f'seeds = [0]\n{bad}'))
        msg = _one_line_exit_2(cli("run", str(p), "--headless", "--runs-dir", str(runs_dir)))
        assert "bad.toml" in msg and "tags" in msg and words in msg, msg
    msg = _one_line_exit_2(cli("run", str(tiny_preset), "--headless", "--runs-dir", str(runs_dir),
                               "--set", 'sweep.tags=[["a"],["b"]]'))
    assert "sweep.tags" in msg
    assert not runs_dir.exists()
