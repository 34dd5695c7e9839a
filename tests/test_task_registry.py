"""The task registry (issue 23 item 1): a task kind is its own module plus one registry entry. The toy "copy" task of
tests/copy_task.py, registered here and nowhere in the package, goes through every place a task kind reaches: the
preset schema (``--set`` and sweep keys, one-line errors), ``make_task``, the resource estimate, the console's preset
form, the evaluation's probes, and training through the runner into a store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from copy_task import COPY, CopyTask
from typer.testing import CliRunner

from sparse_tui.cli import app
from sparse_tui.models import build_model
from sparse_tui.presets import resources
from sparse_tui.presets.errors import PresetError
from sparse_tui.presets.loading import config_from_json, expand, load_preset
from sparse_tui.presets.schema import RunConfig, logged_metrics, register_task, unregister_task
from sparse_tui.presets.tasks import TASKS
from sparse_tui.store import RunStore
from sparse_tui.tasks import make_task
from sparse_tui.tui.form_model import PresetDraft

ROOT = Path(__file__).resolve().parent.parent

COPY_PRESET = """\
name = "copy-toy"
seeds = [0, 1]

[task]
kind = "copy"
vocab = 6
T = 5
lag = 2

[model]
kind = "transformer"
n_layers = 1
d_model = 16

[train]
steps = 12
batch_size = 16
lr = 1e-2
device = "cpu"

[eval]
every = 6
test_size = 32
"""


@pytest.fixture
def copy_kind():
    register_task(COPY)
    yield COPY
    unregister_task("copy")


@pytest.fixture
def copy_preset(tmp_path: Path) -> Path:
    path = tmp_path / "copy.toml"
    path.write_text(COPY_PRESET)
    return path


def test_a_preset_of_a_registered_kind_validates_with_its_keys_and_errors(copy_kind, copy_preset):
    loaded = load_preset(copy_preset, ["sweep.task.lag=[1, 3]"])
    specs = expand(loaded)
    assert [(s.config.task.lag, s.seed) for s in specs] == [(1, 0), (1, 1), (3, 0), (3, 1)]
    assert type(specs[0].config.task).__name__ == "CopyConfig"
    assert specs[0].params["task.vocab"] == 6
    # the config survives the store's JSON round trip (a worker rebuilds it from there)
    assert config_from_json(specs[0].config.model_dump(mode="json")) == specs[0].config
    with pytest.raises(PresetError) as e:  # the kind's own check, named by its key (no "copy" in the path)
        load_preset(copy_preset, ["task.lag=5"])
    assert e.value.lines == ["copy.toml: task.lag: must be <= T - 1"]
    with pytest.raises(PresetError) as e:
        load_preset(copy_preset, ["sweep.task.n_pairs=[1, 2]"])
    assert e.value.lines == ["copy.toml: sweep.task.n_pairs: no such key"]
    # the kind's logged metrics: a token task (accuracy) with the readout probe "relevant"
    names = logged_metrics(specs[0].config)
    assert {"test/acc", "test/ppl", "attn/L1/relevant", "attn/L1/H0/relevant"} <= set(names)
    assert not any(n.endswith(("/select", "/copy")) for n in names)


def test_an_unregistered_kind_is_refused_everywhere(copy_kind, copy_preset):
    cfg = expand(load_preset(copy_preset))[0].config
    unregister_task("copy")
    with pytest.raises(PresetError) as e:
        load_preset(copy_preset)
    assert e.value.lines == ["copy.toml: task: must be one of 'linreg', 'recall', 'nearest'"]
    with pytest.raises(ValueError, match="unknown task kind 'copy'; registered: linreg, recall, nearest"):
        resources.dims(cfg)  # not read as linreg (the if-chain's fall-through before the registry)
    with pytest.raises(ValueError, match="unknown task kind 'copy'"):
        make_task(cfg)


def test_make_task_builds_it_and_resources_size_it(copy_kind, copy_preset):
    cfg = expand(load_preset(copy_preset))[0].config
    task = make_task(cfg, "cpu")
    assert isinstance(task, CopyTask)
    assert resources.dims(cfg) == {"seq_len": 5, "vocab": 6, "in_dim": None, "out_dim": 6}
    b = task.test_batch(4)
    assert b.x.shape == (4, 5) and (b.y == b.x[:, 2]).all() and b.relevant[:, 2].all() and b.relevant.sum() == 4
    est = resources.estimate(cfg)
    # the Transformer's parameters for a vocabulary of 6, 5 positions, width 16, one layer, 6 classes: those of the
    # model built for the task (the estimate counts them exactly, resources.n_params)
    assert est.params == sum(p.numel() for p in build_model(cfg, task).parameters()) == 1350
    assert est.largest_name == "attention scores of a batch" and est.largest_tensor == 16 * 5 * 5


def test_every_registered_kind_builds_the_dims_its_entry_declares(copy_kind):
    """``TaskKind.dims`` (what the estimate and the scheduler read, without building a task) is what the task that
    ``make_task`` builds produces, for every kind of the registry: its batches' shapes and token ranges."""
    for name, kind in TASKS.items():
        cfg = RunConfig.model_validate({"task": {"kind": name}, "model": {"kind": "transformer"}})
        d = kind.dims(cfg.task)
        task = make_task(cfg, "cpu")
        assert (task.kind, task.seq_len, task.vocab_size, task.in_dim, task.out_dim) == (
            name, d["seq_len"], d["vocab"], d["in_dim"], d["out_dim"])
        for b in (task.train_batch(64), task.test_batch(64)):
            assert b.x.shape[:2] == b.relevant.shape == (64, d["seq_len"]), name
            if kind.tokens(cfg.task):
                assert task.classification and b.x.dtype == b.y.dtype == torch.long and b.y.shape == (64,), name
                assert 0 <= int(b.x.min()) and int(b.x.max()) < d["vocab"] and int(b.y.max()) < d["out_dim"], name
            else:
                assert not task.classification and b.x.shape[2] == d["in_dim"], name
                assert b.y.shape == (64, d["out_dim"]), name


def test_the_preset_form_shows_its_fields(copy_kind, copy_preset):
    draft = PresetDraft(copy_preset)
    fields = {f.key: f for f in draft.fields()}
    assert {"task.vocab", "task.T", "task.lag"} <= set(fields)
    assert not {"task.n_pairs", "task.d"} & set(fields)
    assert fields["task.kind"].choices == ["linreg", "recall", "nearest", "copy"]
    assert fields["task.lag"].default == 3 and "lag positions before the last" in fields["task.lag"].help
    draft.set("task.lag", "9")
    assert draft.validate().field_errors == {"task.lag": "must be <= T - 1"}
    draft.set("task.lag", "4")
    assert draft.validate().ok
    draft.set("task.kind", '"recall"')  # another kind: the copy keys go, recall's appear
    assert "task.n_pairs" in {f.key for f in draft.fields()} and "lag" not in draft.to_raw()["task"]


@pytest.mark.parametrize("schedule", ["sequential", "stacked"])
def test_a_few_steps_train_through_the_runner_into_the_store(copy_kind, copy_preset, tmp_path, schedule):
    """``run --headless`` (in this process, where the kind is registered), one run at a time and as one stack: two
    seeds train, are recorded finished, with the evaluation's metrics and the probe the entry names."""
    runs_dir = tmp_path / "runs"
    res = CliRunner().invoke(app, ["run", str(copy_preset), "--headless", "--runs-dir", str(runs_dir),
                                   "--workers", "1", "--schedule", schedule], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    store = RunStore(runs_dir)
    runs = store.runs()
    assert sorted(r.seed for r in runs) == [0, 1] and {r.status for r in runs} == {"finished"}
    for r in runs:
        m = store.metrics(r.run_id)
        assert m["test/loss"][0] == [0, 6, 12] and m["train/loss"][0][-1] == 12
        assert all(0.0 <= a <= 1.0 for a in m["test/acc"][1] + m["attn/L1/relevant"][1])
        assert "attn/L1/select" not in m
        assert r.summary.get("stacked_with", 1) == (2 if schedule == "stacked" else 1)
    a, b = (store.metrics(r.run_id)["test/loss"][1] for r in sorted(runs, key=lambda r: r.seed))
    assert a != b  # each seed its own data and initialisation


def test_the_architecture_doc_shows_the_example_as_it_is():
    """docs/ARCHITECTURE.md's "A new task" shows tests/copy_task.py verbatim, so the worked example is tested."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = doc.split("### A new task", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert (ROOT / "tests" / "copy_task.py").read_text() in blocks
