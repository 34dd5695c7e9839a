"""The bridges as careful as the store (issue 30 items 2-4, 7) and round-tripping (issue 34 item 6), read back with
TensorBoard's ``EventAccumulator`` and ``MlflowClient``. Each case failed on 3452e68: MLflow hung for minutes on a
server that does not answer and on read-only targets, wrote its tables into the run store, read a plain path as a
run id and created ``/nonexistent/dir``; TensorBoard printed a writer thread's traceback; a re-export doubled every
curve, the seed was missing when runs were exported together, tags and note were not exported and every point had
the run's start as its wall time; MLflow could not bring a later tag to a run exported before."""

from __future__ import annotations

import contextlib
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tui.conftest import fill_store

from sparse_tui.store import RunStore

pytest.importorskip("tensorboard", reason="the tensorboard extra (in dev)")
pytest.importorskip("mlflow", reason="the mlflow extra (in dev)")

RUN, FAILED = "0000000c", "0000000d"  # fill_store's recall runs (attention snapshots) and its failed one


def _cli(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    if "mlflow" in args and "--timeout" not in args:  # an upper bound on a busy machine, not a timing
        args = (*args, "--timeout", "240")
    return subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", **env})


def _error(r: subprocess.CompletedProcess) -> str:
    """The one error line of a refused export (exit 2, no traceback); MLflow's 'loading' line may precede it."""
    assert r.returncode == 2 and "Traceback" not in r.stderr and "Exception in thread" not in r.stderr, r.stderr
    lines = [x for x in r.stderr.strip().splitlines() if not x.startswith("MLflow: loading")]
    (line,) = lines
    assert line.startswith("error: ")
    return line


def _tables(db: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(db)) as con:
        return sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'"))


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    s = fill_store(d)
    s.set_tags(RUN, ["baseline", "v2"])
    s.set_note(RUN, "copy head forms at step 140")
    s.close()
    return d


@contextlib.contextmanager
def _mount(where: Path, *opts: str):
    where.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(opts), "tmpfs", str(where)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a file system here")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True)


# -- MLflow: time limits, the store itself, paths, folders ----------------------------------------------------------


def test_a_server_that_never_answers_is_one_line_after_the_time_limit(store_dir):
    """A listener that accepts and never answers (MLflow retried for minutes): the call is given up after
    --timeout seconds, one line names what failed and the URI, exit 2. MLflow's own HTTP timeout is set longer
    here, so the limit is ours."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        uri = f"http://127.0.0.1:{srv.getsockname()[1]}"
        r = _cli("export", "--to", "mlflow", uri, RUN, "--timeout", "3", "--runs-dir", str(store_dir),
                 MLFLOW_HTTP_REQUEST_TIMEOUT="600", MLFLOW_HTTP_REQUEST_MAX_RETRIES="5")
    line = _error(r)
    assert line.startswith(f"error: --to mlflow {uri}: ") and "did not answer within 3 s (--timeout" in line, line
    assert r.stderr.startswith("MLflow: loading the library")  # its slow first use is said first


def test_a_refused_connection_is_one_line(store_dir):
    line = _error(_cli("export", "--to", "mlflow", "http://127.0.0.1:9", RUN, "--timeout", "20", "--runs-dir",
                       str(store_dir)))
    assert line.startswith("error: --to mlflow http://127.0.0.1:9: MLflow's ") and "failed" in line, line


def test_the_run_store_itself_is_refused_before_anything_is_written(store_dir, tmp_path):
    before = _tables(store_dir / "runs.db")
    link = tmp_path / "alias"
    link.symlink_to(store_dir)
    for uri in (f"sqlite:///{store_dir / 'runs.db'}", f"sqlite:///{link / 'runs.db'}", str(link / "runs.db")):
        line = _error(_cli("export", "--to", "mlflow", uri, RUN, "--runs-dir", str(store_dir)))
        assert "that is the run store itself" in line and str(store_dir / "runs.db") in line, line
    assert _tables(store_dir / "runs.db") == before  # no alembic_version, experiments, params...


def test_a_missing_folder_is_refused_unless_mkdir_and_nonexistent_is_never_created(store_dir, tmp_path):
    """The issue's ``sqlite:////nonexistent/dir/x.db``, under the test's own folder (a run of the old code creates
    the folders it names)."""
    gone = tmp_path / "nonexistent"
    uri = f"sqlite:///{gone}/dir/x.db"
    line = _error(_cli("export", "--to", "mlflow", uri, RUN, "--runs-dir", str(store_dir)))
    assert line == f"error: --to mlflow {uri}: directory {gone}/dir does not exist (--mkdir creates it)", line
    assert not gone.exists()
    deep = tmp_path / "a" / "b" / "ml.db"
    r = _cli("export", "--to", "mlflow", str(deep), RUN, "--mkdir", "--runs-dir", str(store_dir))
    assert r.returncode == 0 and deep.is_file(), r.stderr


def test_a_plain_path_is_a_path_not_a_run_id(store_dir, tmp_path):
    """``--to mlflow out`` (no scheme, no .db) is a folder for mlflow.db; ``x.db`` the SQLite file itself."""
    from mlflow import MlflowClient

    (tmp_path / "out").mkdir()
    r = _cli("export", "--to", "mlflow", "out", RUN, "--runs-dir", str(store_dir), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    uri = f"sqlite:///{tmp_path / 'out' / 'mlflow.db'}"
    assert f"logged 1 run(s) to MLflow at {uri}" in r.stderr
    assert "the UI needs the full package: pip install mlflow" in r.stderr  # mlflow-skinny has no `mlflow ui`
    (found,) = MlflowClient(tracking_uri=uri).search_runs(
        [MlflowClient(tracking_uri=uri).get_experiment_by_name("recall-lr").experiment_id])
    assert found.data.tags["sparse_tui.run_id"] == RUN


def test_read_only_targets_are_refused_at_once(store_dir, tmp_path):
    """A read-only sqlite path, and the default URI beside a read-only store (MLflow retried for minutes)."""
    with _mount(tmp_path / "ro", "ro", "size=64k") as ro:
        line = _error(_cli("export", "--to", "mlflow", f"sqlite:///{ro}/ml.db", RUN, "--runs-dir", str(store_dir)))
        assert line == f"error: --to mlflow sqlite:///{ro}/ml.db: directory {ro} is not writable", line
    ro_store = tmp_path / "ro_store"
    ro_store.mkdir()
    if subprocess.run(["mount", "--bind", str(store_dir), str(ro_store)], capture_output=True).returncode:
        pytest.skip("cannot bind-mount here")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(ro_store)], check=True)
        line = _error(_cli("export", "--to", "mlflow", RUN, "--runs-dir", str(ro_store)))
        assert line.endswith(f"directory {ro_store} is not writable") and "mlflow.db" in line, line
    finally:
        subprocess.run(["umount", str(ro_store)])


# -- TensorBoard: one-line errors ---------------------------------------------------------------------------------


def test_tensorboard_into_an_unwritable_or_full_folder_is_one_line(store_dir, tmp_path):
    with _mount(tmp_path / "ro", "ro", "size=64k") as ro:
        line = _error(_cli("export", "--to", "tensorboard", str(ro), RUN, "--runs-dir", str(store_dir)))
        assert line == f"error: --to tensorboard {ro}: directory is not writable", line
    with _mount(tmp_path / "full", "size=8k") as full:  # a full disk is exit 1 (docs/USAGE.md; issue 45)
        r = _cli("export", "--to", "tensorboard", str(full), RUN, "--runs-dir", str(store_dir))
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        (line,) = r.stderr.strip().splitlines()
        assert line.startswith(f"error: --to tensorboard {full}/") and line.endswith(
            "cannot write: No space left on device"), line
        assert ".tmp" not in line
    line = _error(_cli("export", "--to", "tensorboard", str(tmp_path / "no" / "tb"), RUN, "--runs-dir",
                       str(store_dir)))
    assert line.endswith(f"directory {tmp_path / 'no'} does not exist (--mkdir creates it)"), line


# -- Round trips ---------------------------------------------------------------------------------------------------


def _read(folder: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(folder), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    ea.Reload()
    return ea


def test_tensorboard_reexport_holds_each_point_once_with_seed_tags_note_and_wall_times(store_dir, tmp_path):
    from tensorboard.plugins.hparams import metadata

    out = tmp_path / "tb"
    alone = _cli("export", "--to", "tensorboard", str(out), RUN, "--runs-dir", str(store_dir))
    assert alone.returncode == 0, alone.stderr
    store = RunStore(store_dir)
    run_dir = next(p for p in out.iterdir() if p.name.endswith(RUN))
    start_alone = _read(run_dir).PluginTagToContent(metadata.PLUGIN_NAME)[metadata.SESSION_START_INFO_TAG]
    for _ in range(2):  # every run, twice (all at seed 0): the seed stays, nothing doubles
        r = _cli("export", "--to", "tensorboard", str(out), "--runs-dir", str(store_dir))
        assert r.returncode == 0, r.stderr
    ea = _read(run_dir)
    steps, vals = store.metrics(RUN)["test/loss"]
    assert [e.step for e in ea.Scalars("test/loss")] == steps  # each point once
    start = metadata.parse_session_start_info_plugin_data(
        ea.PluginTagToContent(metadata.PLUGIN_NAME)[metadata.SESSION_START_INFO_TAG])
    assert start.hparams["seed"].number_value == 0 and start.hparams["train.lr"].number_value == pytest.approx(0.01)
    assert start == metadata.parse_session_start_info_plugin_data(start_alone)  # the same alone or together
    text = {t: ea.Tensors(t)[0].tensor_proto.string_val[0].decode() for t in ("sparse_tui/note", "sparse_tui/tags")}
    assert text == {"sparse_tui/note": "copy head forms at step 140", "sparse_tui/tags": "baseline v2"}
    rec = store.get(RUN)
    walls = [e.wall_time for e in ea.Scalars("test/loss")]
    assert walls == sorted(walls) and walls[0] == pytest.approx(rec.started_at) and walls[-1] > walls[0]
    assert walls[-1] <= rec.ended_at + 1e-6
    assert len(list(run_dir.iterdir())) == 1 and len([p for p in out.iterdir() if p.is_file()]) == 1


def test_mlflow_update_brings_a_later_tag_note_and_points(store_dir, tmp_path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'ml.db'}"
    r = _cli("export", "--to", "mlflow", uri, RUN, "--runs-dir", str(store_dir))
    assert r.returncode == 0, r.stderr
    store = RunStore(store_dir)
    store.set_tags(RUN, ["v2", "later"])  # baseline removed, later added
    store.set_note(RUN, "re-read at 0.1")
    last = store.get(RUN).step
    store.log_metrics(RUN, last + 10, {"test/loss": 0.123})
    store.close()
    skipped = _cli("export", "--to", "mlflow", uri, RUN, "--runs-dir", str(store_dir))
    assert "1 exported before, skipped (--update brings their changes)" in skipped.stderr, skipped.stderr
    r = _cli("export", "--to", "mlflow", uri, RUN, "--update", "--runs-dir", str(store_dir))
    assert r.returncode == 0 and "1 exported before, updated" in r.stderr, r.stderr
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("recall-lr").experiment_id])
    assert run.data.tags["later"] == "true" and "baseline" not in run.data.tags and run.data.tags["v2"] == "true"
    assert run.data.tags["mlflow.note.content"] == "re-read at 0.1"
    hist = sorted(client.get_metric_history(run.info.run_id, "test/loss"), key=lambda m: m.step)
    steps = RunStore(store_dir).metrics(RUN)["test/loss"][0]
    assert [m.step for m in hist] == steps and hist[-1].value == pytest.approx(0.123)  # once each, the new one too
