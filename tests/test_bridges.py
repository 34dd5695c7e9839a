"""The bridges (issue 21): ``export --to tensorboard DIR`` and ``--to mlflow [URI]``, read back with the tools' own
readers (TensorBoard's ``EventAccumulator``, ``MlflowClient``) on the console tests' synthetic store."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from tui.conftest import fill_store

from sparse_tui.store import RunStore

tb = pytest.importorskip("tensorboard", reason="the tensorboard extra (in dev)")
pytest.importorskip("mlflow", reason="the mlflow extra (in dev)")


def _cli(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    if "mlflow" in args and "--timeout" not in args:  # an upper bound on a busy machine, not a timing
        args = (*args, "--timeout", "240")
    return subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", **env})


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    s = fill_store(d)
    s.set_tags("0000000c", ["baseline", "v2"])
    s.set_note("0000000c", "copy head forms at step 140")
    s.close()
    return d


def test_tensorboard_event_files_hold_scalars_hparams_and_attention_images(store_dir: Path, tmp_path: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata, plugin_data_pb2

    out = tmp_path / "tb"
    r = _cli("export", "--to", "tensorboard", str(out), "0000000c", "0000000d", "--runs-dir", str(store_dir))
    assert r.returncode == 0, r.stderr
    assert "wrote 2 run(s) as TensorBoard event files" in r.stderr
    store = RunStore(store_dir)
    rec = store.get("0000000c")
    (run_dir,) = [p for p in out.iterdir() if p.is_dir() and p.name.endswith("0000000c")]
    ea = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    ea.Reload()
    tags = ea.Tags()
    # every logged metric, at its steps, with its values
    series = store.metrics("0000000c")
    for name, (steps, vals) in series.items():
        events = ea.Scalars(name)
        assert [e.step for e in events] == steps
        assert all(math.isclose(e.value, v, rel_tol=1e-6) for e, v in zip(events, vals))
    assert math.isclose(ea.Scalars("final/test/acc")[-1].value, rec.final["test/acc"], rel_tol=1e-6)
    assert ea.Scalars("final/plateau_step")[-1].value == 140.0
    # attention maps as images, one per layer and head at every snapshot step, decodable PNGs
    assert {"attention/L1/head0", "attention/L2/head0"} <= set(tags["images"])
    imgs = ea.Images("attention/L1/head0")
    assert [i.step for i in imgs] == store.attention_steps("0000000c")
    assert imgs[0].encoded_image_string.startswith(b"\x89PNG") and imgs[0].width == 5 * 8
    # hparams: the session's parameter values (those that differ between the two runs)
    content = ea.PluginTagToContent(metadata.PLUGIN_NAME)
    start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
    assert start.hparams["train.lr"].number_value == pytest.approx(0.01)
    top = EventAccumulator(str(out))
    top.Reload()
    exp = metadata.parse_experiment_plugin_data(top.PluginTagToContent(metadata.PLUGIN_NAME)[metadata.EXPERIMENT_TAG])
    assert "train.lr" in [h.name for h in exp.hparam_infos]
    assert "final/test/acc" in [m.name.tag for m in exp.metric_infos]
    assert isinstance(exp, type(plugin_data_pb2.HParamsPluginData().experiment))


def test_mlflow_runs_hold_params_metrics_tags_and_note(store_dir: Path, tmp_path: Path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'ml.db'}"
    r = _cli("export", "--to", "mlflow", uri, "0000000c", "0000000d", "--runs-dir", str(store_dir))
    assert r.returncode == 0, r.stderr
    assert "logged 2 run(s) to MLflow" in r.stderr
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("recall-lr")
    runs = {x.data.tags["sparse_tui.run_id"]: x for x in client.search_runs([exp.experiment_id])}
    assert set(runs) == {"0000000c", "0000000d"}
    store = RunStore(store_dir)
    a = runs["0000000c"]
    assert a.data.params["train.lr"] == "0.01" and a.data.params["preset"] == "recall-lr"
    assert a.data.tags["baseline"] == "true" and a.data.tags["v2"] == "true"
    assert a.data.tags["mlflow.note.content"] == "copy head forms at step 140"
    assert a.info.status == "FINISHED" and runs["0000000d"].info.status == "FAILED"
    hist = client.get_metric_history(a.info.run_id, "test/acc")
    steps, vals = store.metrics("0000000c")["test/acc"]
    assert [m.step for m in sorted(hist, key=lambda m: m.step)] == steps
    assert a.data.metrics["final/plateau_step"] == 140.0
    # exported again: nothing is duplicated
    again = _cli("export", "--to", "mlflow", uri, "0000000c", "--runs-dir", str(store_dir))
    assert again.returncode == 0 and "1 exported before, skipped" in again.stderr
    assert len(client.search_runs([exp.experiment_id])) == 2


def test_bridge_usage_errors_are_one_line(store_dir: Path):
    r = _cli("export", "--to", "wandb", "--runs-dir", str(store_dir))
    assert r.returncode == 2 and r.stderr.strip() == "error: --to: must be one of tensorboard, mlflow, got 'wandb'"
    r = _cli("export", "--to", "tensorboard", "--runs-dir", str(store_dir))
    assert r.returncode == 2 and "give the folder to write" in r.stderr and "Traceback" not in r.stderr


def test_without_the_tensorboard_extra_its_bridge_says_how_to_install_it_and_mlflow_still_exports(
    store_dir: Path, tmp_path: Path
):
    blocker = tmp_path / "no_tb" / "tensorboard"  # a tensorboard that cannot be imported, first on the path
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('No module named tensorboard')\n")
    hide = {"PYTHONPATH": str(blocker.parent)}
    r = _cli("export", "--to", "tensorboard", str(tmp_path / "tb"), "--runs-dir", str(store_dir), **hide)
    assert r.returncode == 2
    assert r.stderr.strip() == 'error: --to tensorboard needs TensorBoard: pip install "sparse-tui[tensorboard]"'
    r = _cli("export", "--to", "mlflow", f"sqlite:///{tmp_path / 'mlflow.db'}", "--runs-dir", str(store_dir), **hide)
    assert r.returncode == 0 and "logged" in r.stderr, r.stderr
