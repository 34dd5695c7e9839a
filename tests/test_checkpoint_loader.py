"""Issue 30 item 6: the checkpoint loader refuses, in one line each, what is not this run's own checkpoint, and
``show`` reports only a checkpoint that ``resume`` would load (one shared check). Each case failed on 3452e68: a FIFO
hung ``resume``; another run's checkpoint under this run's name was ignored without a word while ``show`` reported
its step; the same file relabelled passed the pre-check and failed the run with a 24-line size mismatch; an
unreadable checkpoints/ folder restarted the run silently; an absurd step in a name was shown as a step."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import StopAfter

from sparse_tui.lifecycle import runner
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.store import RunStore

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}


def _interrupted(store: RunStore, preset: Path, *sets: str) -> str:
    """A run trained to step 8 and interrupted there, with its checkpoint of step 8."""
    batch, (rid,) = store.create_runs(expand(load_preset(preset, ["train.checkpoint_every=4", *sets])))
    runner.work(store, batch, should_stop=StopAfter(8))
    assert store.get(rid).status == "interrupted"
    return rid


@pytest.fixture
def two(tiny_preset, tmp_path):
    """Two interrupted runs of the same shapes (seeds 1 and 2), each first in its own stack, and a third of other
    shapes (d_model 32)."""
    store = RunStore(tmp_path / "runs")
    a = _interrupted(store, tiny_preset, "seeds=[1]")
    b = _interrupted(store, tiny_preset, "seeds=[2]")
    c = _interrupted(store, tiny_preset, "seeds=[3]", "model.d_model=32")
    return store, a, b, c


def _ckpt(store: RunStore, rid: str) -> Path:
    (path,) = sorted((store.runs_dir / "checkpoints").glob(f"{rid}.*.pt"))
    return path


def _cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True, env=ENV,
                          timeout=timeout)


def _refused(store: RunStore, rid: str, expected: str) -> None:
    """``resume`` refuses in one line (exit 2, nothing re-queued) and ``show`` reports no usable checkpoint."""
    r = _cli("resume", rid, "--runs-dir", str(store.runs_dir))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert expected in line, line
    assert store.get(rid).status == "interrupted"
    s = _cli("show", rid, "--runs-dir", str(store.runs_dir))
    assert s.returncode == 0, s.stderr
    row = " ".join(" ".join(x.replace("│", " ").split()) for x in s.stdout.splitlines()
                   if x.startswith("│ checkpoint "))
    assert row.startswith("checkpoint none usable ("), s.stdout


def test_a_fifo_named_like_a_checkpoint_is_refused_without_a_wait(two):
    store, a, _, _ = two
    path = _ckpt(store, a)
    path.unlink()
    os.mkfifo(path)
    _refused(store, a, f"{path}: a FIFO, not a checkpoint file; refused")


def test_another_runs_checkpoint_under_this_runs_name_is_refused(two):
    store, a, b, _ = two
    mine = _ckpt(store, b)
    mine.unlink()
    shutil.copy(_ckpt(store, a), mine)
    _refused(store, b, f"{mine}: the checkpoint of run {a}, not of run {b}")


def test_another_runs_checkpoint_relabelled_inside_is_refused_by_its_fingerprint(two):
    import torch

    store, a, b, _ = two
    state = torch.load(_ckpt(store, a), weights_only=True)
    state["run_ids"] = [b]
    mine = _ckpt(store, b)
    torch.save(state, mine)
    _refused(store, b, f"{mine}: written for another run")


def test_a_checkpoint_of_other_shapes_without_a_fingerprint_is_one_line_and_the_run_starts_over(two, capsys):
    """A checkpoint of before fingerprints (relabelled, other shapes) passes the pre-check: the restore compares the
    shapes before loading and says so in one line; the run trains from step 0 (not a 24-line size mismatch)."""
    import torch

    store, a, _, c = two
    state = torch.load(_ckpt(store, c), weights_only=True)
    state["run_ids"] = [a]
    state.pop("fingerprints")
    mine = _ckpt(store, a)
    torch.save(state, mine)
    store.requeue([a])
    runner.work(store, store.get(a).batch_id)
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "checkpoint" in x]
    assert f"{mine}: its shapes do not match this run's model" in line, line
    assert "(1, 32, 32) in the file, (1, 16, 16) in the model); ignored, the run starts from step 0" in line, line
    rec = store.get(a)
    assert rec.status == "finished" and "size mismatch" not in (rec.reason or "")
    assert store.metrics(a)["test/loss"][0][0] == 0  # trained from step 0 again


def test_a_step_in_the_name_that_disagrees_with_the_content(two):
    store, a, _, _ = two
    path = _ckpt(store, a)
    wrong = path.with_name(f"{a}.6.pt")
    path.rename(wrong)
    _refused(store, a, f"{wrong}: the name says step 6, the content step 8")


def test_an_absurd_step_in_a_name_is_not_shown_as_a_step(two):
    store, a, _, _ = two
    absurd = store.runs_dir / "checkpoints" / f"{a}.99999999999999999999.pt"
    shutil.copy(_ckpt(store, a), absurd)
    _refused(store, a, f"{absurd}: step 99999999999999999999 in the name is not a step")


def test_an_unreadable_checkpoints_folder_is_named(two, monkeypatch, capsys):
    """As root a mode-000 folder is still readable, so the folder is made unreadable where it is listed; a folder
    that is a file is the same case for every user."""
    from sparse_tui.training import checkpoint as ck

    store, a, _, _ = two
    real = os.listdir

    def listdir(path="."):
        if Path(path) == ck.checkpoint_dir(store.runs_dir):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(ck.os, "listdir", listdir)
    with pytest.raises(ck.CheckpointError) as e:
        ck.check(store.runs_dir, a)
    folder = store.runs_dir / "checkpoints"
    assert str(e.value).startswith(f"{folder}: cannot read the checkpoints folder (Permission denied)")
    store.requeue([a])
    runner.work(store, store.get(a).batch_id)  # the training loop's restore: one line naming the folder
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "checkpoint" in x]
    assert f"{folder}: cannot read the checkpoints folder" in line and "<step>" not in line, line
