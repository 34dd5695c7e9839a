"""Every bad input is a usage error: exit 2, exactly one line on stderr naming the file and the key or flag, no
traceback, and the run store's bytes unchanged (or no store created). Table-driven, across presets, flags and
stores (issue 11). The cases run in-process through the CLI app (typer's CliRunner); a few also run as real
subprocesses (``python -m sparse_tui``) to check the console script's behaviour end to end."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TINY_PRESET
from typer.testing import CliRunner

from sparse_tui.cli import app
from sparse_tui.store import SCHEMA_VERSION, RunStore

# ------------------------------------------------------------------------------------------------------------------
# Presets: (case id, old text, new text or None to replace the whole file, expected fragment of the one line)
# ------------------------------------------------------------------------------------------------------------------

PRESET_CASES = [
    ("lr-negative", "lr = 1e-2", "lr = -1.0", "train.lr: must be > 0"),
    ("lr-inf", "lr = 1e-2", "lr = inf", "train.lr: must be a finite number"),
    ("lr-nan", "lr = 1e-2", "lr = nan", "train.lr: must be a finite number"),
    ("lr-bool", "lr = 1e-2", "lr = true", "train.lr: must be a number, got true"),
    ("lr-string", "lr = 1e-2", 'lr = "fast"', "train.lr: must be a number"),
    ("steps-bool", "steps = 20", "steps = true", "train.steps: must be an integer, got true"),
    ("steps-float", "steps = 20", "steps = 2.5", "train.steps: must be an integer, got 2.5"),
    ("steps-integral-float", "steps = 20", "steps = 20.0", "train.steps: must be an integer"),
    ("steps-string", "steps = 20", 'steps = "many"', "train.steps: must be an integer"),
    ("steps-zero", "steps = 20", "steps = 0", "train.steps: must be >= 1"),
    ("steps-1e12", "steps = 20", "steps = 1000000000000", "eval.every: 200000000001 evaluations"),
    ("steps-2^63", "steps = 20", "steps = 9223372036854775808", "train.steps: must be an integer below 2^63"),
    ("steps-1e10-few-evals", None,
     TINY_PRESET.replace("steps = 20", "steps = 10000000000").replace("every = 5", "every = 100000000"),
     "learning-rate table"),
    ("batch-1e7", "batch_size = 16", "batch_size = 10000000", "a run needs about"),
    ("batch-zero", "batch_size = 16", "batch_size = 0", "train.batch_size: must be >= 1"),
    ("test-size-1e9", "test_size = 32", "test_size = 1000000000", "a run needs about"),
    ("layers-1e6", "n_layers = 2", "n_layers = 1000000", "a run needs about"),
    ("d-model-1e6", "d_model = 16", "d_model = 1048576", "a run needs about"),
    ("init-std-inf", "d_model = 16", "d_model = 16\ninit_std = inf", "model.init_std: must be a finite number"),
    ("init-std-zero", "d_model = 16", "d_model = 16\ninit_std = 0.0", "model.init_std: must be > 0"),
    ("plateau-nan", "value = 0.5", "value = nan", "plateau.value: must be a finite number"),
    ("plateau-metric-bogus", 'metric = "test/acc"', 'metric = "bogus"', "plateau.metric: 'bogus' is not logged"),
    ("plateau-metric-layer3", 'metric = "test/acc"', 'metric = "attn/L3/select"', "plateau.metric: 'attn/L3/select'"),
    ("plateau-metric-linreg-name", 'metric = "test/acc"', 'metric = "attn/L1/relevant"', "plateau.metric"),
    ("plateau-acc-above-1", "value = 0.5", "value = 1.5", "plateau.value: test/acc takes values in [0, 1]"),
    ("plateau-acc-negative", "value = 0.5", "value = -0.1", "plateau.value: test/acc takes values in [0, 1]"),
    ("plateau-fraction-zero", 'mode = "above"\nvalue = 0.5', 'mode = "fraction"\nvalue = 0.0', "plateau.value"),
    ("plateau-mode-bogus", 'mode = "above"', 'mode = "sideways"', "plateau.mode: must be one of"),
    ("seeds-2^63", "seeds = [0]", "seeds = [9223372036854775808]", "seeds: must be integers in [0, 2^63)"),
    ("seeds-duplicate", "seeds = [0]", "seeds = [3, 1, 3]", "seeds: seed 3 appears twice"),
    ("seeds-negative", "seeds = [0]", "seeds = [-1]", "seeds: must be integers in [0, 2^63)"),
    ("seeds-empty", "seeds = [0]", "seeds = []", "seeds"),
    ("seeds-bool", "seeds = [0]", "seeds = [true]", "seeds: must be a list of integers, got true"),
    ("seeds-float", "seeds = [0]", "seeds = [1.5]", "seeds: must be a list of integers, got 1.5"),
    ("seeds-not-list", "seeds = [0]", "seeds = 4", "seeds: must be a list"),
    ("empty-file", None, "", "empty preset"),
    ("comment-only", None, "# nothing here\n\n# at all\n", "empty preset"),
    ("toml-syntax", "lr = 1e-2", "lr = = 1e-2", "TOML syntax error"),
    ("toml-deep", None, "v = " + "[" * 3000 + "]" * 3000 + "\n", "tiny.toml"),
    ("unknown-key", "lr = 1e-2", "lr = 1e-2\nlearning_rate = 3", "train.learning_rate: unknown key"),
    ("unknown-section", "[eval]", "[evaluation]\nx = 1\n[eval]", "evaluation: unknown key"),
    ("task-kind-bogus", 'kind = "recall"', 'kind = "copy"', "task: must be one of"),
    ("toy-on-recall", '[model]\nkind = "transformer"\nn_layers = 2\nn_heads = 1\nd_model = 16', '[model]\nkind = "toy"',
     "model.kind: 'toy' needs task.kind = 'linreg'"),
    ("heads-not-dividing", "n_heads = 1", "n_heads = 3", "model.d_model: must be divisible by n_heads"),
    ("pairs-over-tokens", "n_pairs = 3", "n_pairs = 30", "task.n_pairs: must be <= n_tokens"),
    ("recall-B-over-pairs", "n_pairs = 3", "n_pairs = 3\nB = 5.0", "task.B: must be <= n_pairs"),
    ("recall-p-above-1", "n_pairs = 3", "n_pairs = 3\np = 1.5", "task.p: must be <= 1"),
    ("device-tpu", 'device = "cpu"', 'device = "tpu"', "train.device: must be one of"),
    ("eval-every-zero", "every = 5", "every = 0", "eval.every: must be >= 1"),
    ("eval-every-1-huge-steps", "steps = 20", "steps = 10000000", "eval.every: 2000001 evaluations"),
    ("snapshots-too-many", None,
     TINY_PRESET.replace("steps = 20", "steps = 100000").replace("every = 5", "every = 5\nsnapshot_every = 5"),
     "eval.snapshot_every: 20001 attention snapshots is more than 10000"),
    ("snapshot-examples", "every = 5", "every = 5\nsnapshot_examples = 100", "eval.snapshot_examples: must be <= 16"),
    ("beta1-one", "lr = 1e-2", "lr = 1e-2\nbeta1 = 1.0", "train.beta1: must be < 1"),
    ("grad-clip-negative", "lr = 1e-2", "lr = 1e-2\ngrad_clip = -1.0", "train.grad_clip: must be >= 0"),
    ("warmup-float", "lr = 1e-2", "lr = 1e-2\nwarmup_steps = 1.5", "train.warmup_steps: must be an integer"),
    ("momentum-bool", "lr = 1e-2", "lr = 1e-2\nmomentum = true", "train.momentum: must be a number, got true"),
    ("schedule-bogus", "lr = 1e-2", 'lr = 1e-2\nschedule = "zigzag"', "train.schedule: must be one of"),
    ("pos-enc-bogus", "d_model = 16", 'd_model = 16\npos_enc = "rope"', "model.pos_enc: must be one of"),
    ("d-qk-zero", "d_model = 16", "d_model = 16\nd_qk = 0", "model.d_qk: must be >= 1"),
    ("input-linear-on-recall", "d_model = 16", 'd_model = 16\ninput = "linear"', "model.input: 'linear' needs"),
    ("sweep-no-such-key", "[eval]", '[sweep]\n"train.nope" = [1, 2]\n[eval]', "sweep.train.nope: no such key"),
    ("sweep-bad-value", "[eval]", '[sweep]\n"train.lr" = [1e-3, -1.0]\n[eval]', "sweep.train.lr[1]: must be > 0"),
    ("sweep-empty-list", "[eval]", '[sweep]\n"train.lr" = []\n[eval]', "sweep.train.lr: must have at least 1 value"),
    ("sweep-not-list", "[eval]", '[sweep]\n"train.lr" = 0.1\n[eval]', "sweep.train.lr: must be a list"),
    ("sweep-seed", "[eval]", '[sweep]\n"seed" = [1, 2]\n[eval]', "sweep.seed: use the top-level 'seeds' list"),
    ("sweep-bool-steps", "[eval]", '[sweep]\n"train.steps" = [10, true]\n[eval]', "sweep.train.steps[1]"),
    ("sweep-too-many-runs", "[eval]",
     '[sweep]\n"train.lr" = [' + ", ".join(f"{1e-3 + i * 1e-6:.6g}" for i in range(1000)) + "]\n"
     '"train.batch_size" = [' + ", ".join(str(i) for i in range(1, 1001)) + "]\n"
     '"train.warmup_steps" = [0, 1, 2]\n[eval]', "sweep: 3000000 runs (1000 x 1000 x 3"),
    ("control-chars-in-key", "lr = 1e-2", 'lr = 1e-2\n"\\u001b[31mevil" = 1', "\\x1b[31mevil: unknown key"),
    # issue 19
    ("sweep-duplicate-values", "[eval]", '[sweep]\n"train.lr" = [0.01, 0.01]\n[eval]',
     "sweep.train.lr: value 0.01 appears twice (two identical runs)"),
    ("sweep-duplicate-spellings", "[eval]", '[sweep]\n"train.steps" = [10, 20, 10]\n[eval]',
     "sweep.train.steps: value 10 appears twice"),
    ("sweep-duplicate-float-int", "[eval]", '[sweep]\n"train.lr" = [1e-2, 0.01]\n[eval]', "value 0.01 appears twice"),
    ("name-1MB", 'name = "tiny"', 'name = "' + "x" * 1_000_000 + '"', "name: must be at most 100 characters"),
    ("description-long", 'name = "tiny"', 'name = "tiny"\ndescription = "' + "d" * 501 + '"',
     "description: must be at most 500 characters"),
    ("file-over-1MiB", None, TINY_PRESET + "# " + "x" * (1 << 20) + "\n", "more than 1 MiB"),
]


def _preset_text(old, new) -> str:
    if old is None:
        return new
    assert old in TINY_PRESET, old
    return TINY_PRESET.replace(old, new, 1)


# ------------------------------------------------------------------------------------------------------------------
# Flags: (case id, argv after the command name with {preset}/{store}/{tmp} placeholders, expected fragment)
# ------------------------------------------------------------------------------------------------------------------

FLAG_CASES = [
    ("set-no-equals", ["run", "{preset}", "--headless", "--set", "train.lr"], "--set train.lr: expected key=value"),
    ("set-empty-key", ["run", "{preset}", "--headless", "--set", "=3"], "--set =3: expected key=value"),
    ("set-empty-part", ["run", "{preset}", "--headless", "--set", "train..lr=3"], "expected key=value"),
    ("set-deep-value", ["run", "{preset}", "--headless", "--set", "train.lr=" + "[" * 3000 + "]" * 3000],
     "--set train.lr: value is nested too deeply"),
    ("set-steps-bool", ["run", "{preset}", "--headless", "--set", "train.steps=true"],
     "train.steps: must be an integer"),
    ("set-unknown", ["run", "{preset}", "--headless", "--set", "train.nope=1"], "train.nope: unknown key"),
    ("set-sweep-scalar", ["run", "{preset}", "--headless", "--set", "sweep.train.lr=1e-3"],
     "sweep.train.lr: must be a list"),
    ("set-sweep-unknown", ["run", "{preset}", "--headless", "--set", "sweep.train.nope=[1,2]"],
     "sweep.train.nope: no such key"),
    ("set-sweep-bad-value", ["run", "{preset}", "--headless", "--set", "sweep.train.lr=[1e-3,-1]"],
     "sweep.train.lr[1]: must be > 0"),
    ("set-seeds-dup", ["run", "{preset}", "--headless", "--set", "seeds=[1,1]"], "seeds: seed 1 appears twice"),
    ("set-lr-inf", ["run", "{preset}", "--headless", "--set", "train.lr=inf"], "train.lr: must be a finite number"),
    ("workers-zero", ["run", "{preset}", "--headless", "--workers", "0"], "--workers: must be a positive integer"),
    ("workers-negative", ["run", "{preset}", "--headless", "--workers", "-3"], "--workers: must be a positive integer"),
    ("workers-word", ["run", "{preset}", "--headless", "--workers", "zero"], "--workers: must be a positive integer"),
    ("workers-huge", ["run", "{preset}", "--headless", "--workers", "100000"], "--workers: must be a positive integer"),
    ("schedule-bogus", ["run", "{preset}", "--headless", "--schedule", "fast"], "--schedule: must be one of"),
    ("device-tpu", ["run", "{preset}", "--headless", "--device", "tpu"], "train.device: must be one of"),
    ("device-cuda-missing", ["run", "{preset}", "--headless", "--device", "cuda"],
     "--device: cuda requested but CUDA is not available"),
    ("device-cuda7-missing", ["run", "{preset}", "--headless", "--device", "cuda:7"], "--device: cuda:7 requested"),
    ("preset-missing", ["run", "{tmp}/missing.toml", "--headless"], "missing.toml: file not found"),
    ("preset-is-dir", ["run", "{tmp}", "--headless"], "is a directory, not a preset file"),
    ("runs-limit-negative", ["runs", "--runs-dir", "{store}", "--limit", "-1"], "--limit: must be >= 0"),
    ("runs-status-bogus", ["runs", "--runs-dir", "{store}", "--status", "bogus"], "--status: must be one of"),
    ("show-unknown", ["show", "zzzz", "--runs-dir", "{store}"], "no run 'zzzz'"),
    ("show-like-underscore", ["show", "_", "--runs-dir", "{store}"], "no run '_'"),
    ("show-like-percent", ["show", "%", "--runs-dir", "{store}"], "no run '%'"),
    ("show-empty-id", ["show", "", "--runs-dir", "{store}"], "run id: must not be empty"),
    ("show-width-negative", ["show", "a", "--runs-dir", "{store}", "--width", "-5"], "--width: must be >= 0"),
    ("show-control-chars", ["show", "\x1b[2J", "--runs-dir", "{store}"], "no run '\\x1b[2J'"),
    ("export-status-bogus", ["export", "--runs-dir", "{store}", "--status", "bogus"], "--status: must be one of"),
    ("export-format-bogus", ["export", "--runs-dir", "{store}", "--format", "xlsx"], "--format: must be one of"),
    ("export-no-dir", ["export", "--runs-dir", "{store}", "-o", "/nonexistent/dir/f.csv"],
     "--output /nonexistent/dir/f.csv: directory /nonexistent/dir does not exist"),
    ("export-to-dir", ["export", "--runs-dir", "{store}", "-o", "{tmp}"], "is a directory"),
    ("export-unknown-run", ["export", "nope", "--runs-dir", "{store}"], "no run 'nope'"),
    ("resume-unknown", ["resume", "nope", "--runs-dir", "{store}"], "no run or batch 'nope'"),
    ("resume-finished", ["resume", "{run}", "--runs-dir", "{store}"], "nothing to resume in run"),
    ("resume-workers-zero", ["resume", "{run}", "--runs-dir", "{store}", "--workers", "0"], "--workers"),
    ("resume-schedule-bogus", ["resume", "{run}", "--runs-dir", "{store}", "--schedule", "x"], "--schedule"),
    ("resume-device-bogus", ["resume", "{run}", "--runs-dir", "{store}", "--device", "tpu"], "--device"),
    ("runs-no-store", ["runs", "--runs-dir", "{tmp}/none"], "no run store here"),
    ("show-no-store", ["show", "abc", "--runs-dir", "{tmp}/none"], "no run store here"),
    ("export-no-store", ["export", "--runs-dir", "{tmp}/none"], "no run store here"),
    ("fit-no-store", ["fit", "--runs-dir", "{tmp}/none"], "no run store here"),
    ("resume-no-store", ["resume", "abc", "--runs-dir", "{tmp}/none"], "no run store here"),
    # issue 19
    ("set-newline", ["run", "{preset}", "--headless", "--set", "train.lr=0.05\ntrain.steps=3"],
     "--set train.lr: the value has a line break"),
    ("set-sweep-duplicate", ["run", "{preset}", "--headless", "--set", "sweep.train.lr=[0.01,1e-2]"],
     "sweep.train.lr: value 0.01 appears twice"),
    ("set-name-too-long", ["run", "{preset}", "--headless", "--set", "name=" + '"' + "n" * 101 + '"'],
     "name: must be at most 100 characters"),
    ("preset-dev-zero", ["run", "/dev/zero", "--headless"], "/dev/zero: a device, not a preset file"),
    ("runs-dir-empty-run", ["run", "{preset}", "--headless", "--runs-dir", ""], "--runs-dir: must not be empty"),
    ("runs-dir-empty-runs", ["runs", "--runs-dir", ""], "--runs-dir: must not be empty"),
    ("runs-dir-empty-resume", ["resume", "{run}", "--runs-dir", ""], "--runs-dir: must not be empty"),
    ("theory-d-nan", ["theory", "--d", "nan", "--T", "4"], "--d: must be a positive integer, got nan"),
    ("theory-T-inf", ["theory", "--d", "4", "--T", "inf"], "--T: must be a positive integer, got inf"),
    ("theory-grid-nan", ["theory", "--grid", "d=nan", "T=4"], "--grid: grid item 'd=nan': values must be numbers"),
    ("export-block-device", ["export", "--runs-dir", "{store}", "-o", "{blockdev}"], "a block device, not a file"),
]


# ------------------------------------------------------------------------------------------------------------------
# Damaged, foreign and misplaced stores: (case id, how to damage RUNS_DIR, argv, expected fragment)
# ------------------------------------------------------------------------------------------------------------------


def _garbage(d: Path) -> None:
    d.mkdir()
    (d / "runs.db").write_bytes(b"this is not a database at all\n" * 200)


def _foreign(d: Path) -> None:
    d.mkdir()
    con = sqlite3.connect(d / "runs.db")
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO customers VALUES (1, 'ada')")
    con.commit()
    con.close()


def _newer(d: Path) -> None:
    RunStore(d).close()
    con = sqlite3.connect(d / "runs.db")
    con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()


def _bad_version(d: Path) -> None:
    RunStore(d).close()
    con = sqlite3.connect(d / "runs.db")
    con.execute("UPDATE meta SET value='two' WHERE key='schema_version'")
    con.commit()
    con.close()


def _truncated(d: Path) -> None:
    src = d.parent / "full"
    RunStore(src).close()
    d.mkdir()
    (d / "runs.db").write_bytes((src / "runs.db").read_bytes()[:100])


def _empty_file(d: Path) -> None:
    d.mkdir()
    (d / "runs.db").write_bytes(b"")


def _a_file(d: Path) -> None:
    d.write_text("I am a file, not a directory\n")


def _db_is_dir(d: Path) -> None:
    (d / "runs.db").mkdir(parents=True)


STORE_CASES = [
    ("garbage-runs", _garbage, ["runs"], "not a sparse-tui run store"),
    ("garbage-show", _garbage, ["show", "abc"], "not a sparse-tui run store"),
    ("garbage-export", _garbage, ["export"], "not a sparse-tui run store"),
    ("garbage-run", _garbage, ["run", "{preset}", "--headless"], "not a sparse-tui run store"),
    ("garbage-fit", _garbage, ["fit"], "not a sparse-tui run store"),
    ("foreign-runs", _foreign, ["runs"], "not a sparse-tui run store (an SQLite database with tables customers)"),
    ("foreign-show", _foreign, ["show", "abc"], "not a sparse-tui run store"),
    ("foreign-run", _foreign, ["run", "{preset}", "--headless"], "not a sparse-tui run store"),
    ("foreign-resume", _foreign, ["resume", "abc"], "not a sparse-tui run store"),
    ("newer-runs", _newer, ["runs"], f"store schema {SCHEMA_VERSION + 1}; this version reads up to"),
    ("newer-export", _newer, ["export"], "upgrade sparse-tui"),
    ("newer-run", _newer, ["run", "{preset}", "--headless"], "upgrade sparse-tui"),
    ("bad-version-runs", _bad_version, ["runs"], "schema_version 'two' is not a number"),
    ("truncated-runs", _truncated, ["runs"], "runs.db"),
    ("empty-file-runs", _empty_file, ["runs"], "empty file, not a run store"),
    ("runs-dir-is-file-run", _a_file, ["run", "{preset}", "--headless"], "not a directory"),
    ("runs-dir-is-file-runs", _a_file, ["runs"], "not a directory"),
    ("db-is-dir-runs", _db_is_dir, ["runs"], "runs.db: not a file"),
]


# ------------------------------------------------------------------------------------------------------------------


def _fingerprint(root: Path) -> dict[str, str]:
    """Names and content hashes of everything under ``root``, or {} when ``root`` does not exist. SQLite's
    shared-memory index and an empty write-ahead log (which any reader of a WAL database opens) are left out."""
    if not root.exists():
        return {}
    if root.is_file():
        return {root.name: hashlib.sha256(root.read_bytes()).hexdigest()}
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.name.endswith("-shm") and not (p.name.endswith("-wal") and p.stat().st_size == 0):
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif p.is_dir():
            out[str(p.relative_to(root)) + "/"] = "dir"
    return out


@pytest.fixture
def store_with_a_run(tmp_path: Path) -> tuple[Path, str]:
    """A store holding one finished run (written through the store API, closed so that its WAL is folded in)."""
    from sparse_tui.presets.loading import expand, load_preset

    preset = tmp_path / "seed.toml"
    preset.write_text(TINY_PRESET)
    runs = tmp_path / "store"
    store = RunStore(runs)
    batch, (rid,) = store.create_runs(expand(load_preset(preset)))
    store.claim_runs([rid], device="cpu", versions={})
    store.log_metrics(rid, 0, {"test/loss": 2.0})
    store.finish(rid, "finished", summary={"final": {"test/loss": 2.0}})
    store.close()
    return runs, rid


def _invoke(args: list[str]):
    return CliRunner().invoke(app, args, catch_exceptions=True)


def _assert_usage_error(res, expected: str) -> None:
    out = (res.stdout or "") + (res.stderr or "")
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in out, out
    assert res.exit_code == 2, (res.exit_code, out)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert expected in lines[0], (expected, lines[0])
    assert "\x1b" not in res.stderr, "control characters reach the terminal raw"


@pytest.mark.parametrize("case,old,new,expected", PRESET_CASES, ids=[c[0] for c in PRESET_CASES])
def test_bad_preset(case, old, new, expected, tmp_path, store_with_a_run):
    store, _ = store_with_a_run
    preset = tmp_path / "tiny.toml"
    preset.write_text(_preset_text(old, new))
    before = _fingerprint(store)
    res = _invoke(["run", str(preset), "--headless", "--runs-dir", str(store)])
    _assert_usage_error(res, expected)
    assert "tiny.toml" in res.stderr, "the line names the file"
    assert _fingerprint(store) == before


def test_non_utf8_and_binary_presets(tmp_path, store_with_a_run):
    store, _ = store_with_a_run
    before = _fingerprint(store)
    for name, data, expected in [
        ("latin1.toml", TINY_PRESET.replace("tiny", "caf\xe9").encode("latin-1"), "not a UTF-8 text file"),
        ("binary.toml", bytes(range(256)) * 4, "not a UTF-8 text file"),
        ("nul.toml", b"name = \"x\"\x00\x00\n", "TOML syntax error"),
    ]:
        p = tmp_path / name
        p.write_bytes(data)
        res = _invoke(["run", str(p), "--headless", "--runs-dir", str(store)])
        _assert_usage_error(res, expected)
        assert name in res.stderr
    assert _fingerprint(store) == before


@pytest.mark.parametrize("case,argv,expected", FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_bad_flag(case, argv, expected, tmp_path, store_with_a_run):
    if case.startswith("device-cuda"):
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    store, rid = store_with_a_run
    preset = tmp_path / "tiny.toml"
    preset.write_text(TINY_PRESET)
    if "{blockdev}" in argv and not _block_device():
        pytest.skip("no block device here")
    subs = {"{preset}": str(preset), "{store}": str(store), "{tmp}": str(tmp_path), "{run}": rid,
            "{blockdev}": str(_block_device())}
    args = []
    for a in argv:
        for k, v in subs.items():
            a = a.replace(k, v)
        args.append(a)
    before = _fingerprint(store)
    res = _invoke(args)
    _assert_usage_error(res, expected)
    assert _fingerprint(store) == before
    assert not (tmp_path / "none").exists(), "a read-only command created a store"
    assert not list(tmp_path.glob("**/*.part")) and not list(tmp_path.glob("**/.*.part"))


def _block_device() -> Path | None:
    """A block device node of this machine (none in some containers)."""
    import stat

    for p in sorted(Path("/dev").glob("*"))[:400]:
        try:
            if stat.S_ISBLK(p.stat().st_mode):
                return p
        except OSError:
            pass
    return None


@pytest.mark.parametrize("case,damage,argv,expected", STORE_CASES, ids=[c[0] for c in STORE_CASES])
def test_damaged_store(case, damage, argv, expected, tmp_path):
    runs = tmp_path / "runs"
    damage(runs)
    preset = tmp_path / "tiny.toml"
    preset.write_text(TINY_PRESET)
    before = _fingerprint(runs)
    res = _invoke([a.replace("{preset}", str(preset)) for a in argv] + ["--runs-dir", str(runs)])
    _assert_usage_error(res, expected)
    assert _fingerprint(runs) == before, "a damaged or foreign store was written"


def test_foreign_database_gets_no_tables(tmp_path):
    runs = tmp_path / "runs"
    _foreign(runs)
    for argv in (["runs"], ["export"], ["show", "x"]):
        assert _invoke(argv + ["--runs-dir", str(runs)]).exit_code == 2
    con = sqlite3.connect(runs / "runs.db")
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["customers"]
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete", "the foreign file was switched to WAL"


def test_cases_are_many():
    n = len(PRESET_CASES) + len(FLAG_CASES) + len(STORE_CASES) + 3  # + the non-UTF-8 / binary / NUL presets
    assert n >= 80, n


ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["run", "{preset}", "--headless", "--set", "train.steps=true"], "train.steps: must be an integer"),
        (["runs", "--runs-dir", "{garbage}"], "not a sparse-tui run store"),
        (["run", "{preset}", "--headless", "--device", "cuda"], "CUDA is not available"),
    ],
    ids=["preset", "store", "device"],
)
def test_bad_input_as_a_real_process(argv, expected, tmp_path):
    """The console script behaves like the in-process app: exit 2, one line, nothing written."""
    if "cuda" in argv:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    preset = tmp_path / "tiny.toml"
    preset.write_text(TINY_PRESET)
    garbage = tmp_path / "garbage"
    _garbage(garbage)
    before = _fingerprint(garbage)
    runs = tmp_path / "runs"
    args = [a.replace("{preset}", str(preset)).replace("{garbage}", str(garbage)) for a in argv]
    if "--runs-dir" not in args:
        args += ["--runs-dir", str(runs)]
    r = subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True, env=ENV,
                       timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], lines
    assert not runs.exists() and _fingerprint(garbage) == before


# ------------------------------------------------------------------------------------------------------------------
# Issue 19: files that are not what they seem, and problems by the thousand
# ------------------------------------------------------------------------------------------------------------------


def test_thousands_of_problems_show_the_first_twenty(tmp_path):
    """50,000 unknown keys printed 50,000 lines: the first 20, then one line counting the rest (exit 2)."""
    preset = tmp_path / "many.toml"
    preset.write_text(TINY_PRESET.replace("[train]", "[train]\n" + "".join(f"k{i} = 1\n" for i in range(50_000))))
    res = _invoke(["run", str(preset), "--headless", "--runs-dir", str(tmp_path / "runs")])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 21, len(lines)
    assert lines[0] == "many.toml: train.k0: unknown key" and lines[-1] == "many.toml: 49980 more problem(s) not shown"
    assert not (tmp_path / "runs").exists()


def test_a_fifo_preset_is_refused_without_waiting_for_a_writer(tmp_path):
    """A FIFO nobody writes blocked ``run`` for ever: it is refused at once (a real process, with a timeout)."""
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "run", str(fifo), "--headless", "--runs-dir",
                        str(tmp_path / "runs")], capture_output=True, text=True, env=ENV, timeout=60)
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert f"{fifo}: a FIFO, not a preset file" in line


def test_a_preset_whose_file_name_is_not_utf8(tmp_path):
    """A non-UTF-8 file name ended in a UnicodeEncodeError traceback when the runs were stored."""
    name = os.fsdecode(b"caf\xe9.toml")
    (tmp_path / name).write_text(TINY_PRESET)
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "run", name, "--headless", "--runs-dir", "runs"],
                       capture_output=True, text=True, env=ENV, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "caf\\udce9.toml: the file name is not valid UTF-8" in line, line
    assert not (tmp_path / "runs").exists()


def test_export_output_keeps_what_it_replaces(tmp_path, store_with_a_run):
    """``export -o``: an existing file keeps its permissions (a 0600 file became 0644); a symlink stays a symlink
    and its target is written; a FIFO is written through, never replaced by a regular file."""
    import stat
    import threading

    store, _ = store_with_a_run
    private = tmp_path / "private.csv"
    private.write_text("old\n")
    os.chmod(private, 0o600)
    res = _invoke(["export", "--runs-dir", str(store), "-o", str(private)])
    assert res.exit_code == 0, res.output
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and private.read_text().startswith("run_id,")

    link = tmp_path / "latest.csv"
    link.symlink_to(private)
    res = _invoke(["export", "--runs-dir", str(store), "-o", str(link), "--format", "jsonl"])
    assert res.exit_code == 0, res.output
    assert link.is_symlink() and private.read_text().startswith("{") and stat.S_IMODE(private.stat().st_mode) == 0o600

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    res = _invoke(["export", "--runs-dir", str(store), "-o", str(fifo)])
    reader.join(30)
    assert res.exit_code == 0, res.output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and got and got[0].startswith("run_id,")


def test_export_to_stdout_on_a_full_disk_does_not_advise_resume(tmp_path, store_with_a_run):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    store, _ = store_with_a_run
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "sparse_tui", "export", "--runs-dir", str(store)], stdout=full,
                           stderr=subprocess.PIPE, text=True, env=ENV, timeout=120)
    assert r.returncode == 1
    (line,) = r.stderr.strip().splitlines()
    assert "disk full" in line and "resume" not in line, line


SECTION_TABLES = [
    # (case, --set overrides, (task kind, lr, steps) of each run): a table where a table of the same kind is merges
    # into it (issue 19: it reset every other key, steps 20 -> 1000); a table of another kind replaces it
    ("set-train-table", ["train={lr=0.05}"], [("recall", 0.05, 20)]),
    ("set-train-table-two-keys", ["train={lr=0.05, batch_size=8}"], [("recall", 0.05, 20)]),
    ("sweep-over-train", ["sweep.train=[{lr=0.05, steps=10}, {lr=0.03}]"],
     [("recall", 0.05, 10), ("recall", 0.03, 20)]),
    ("sweep-replaced", ["sweep.train.lr=[0.3, 0.4]", 'sweep={"train.steps"=[7]}'], [("recall", 0.01, 7)]),
    ("switch-task-kind", ['task={kind="linreg", d=4, T=8}', 'plateau.metric="test/loss"'], [("linreg", 0.01, 20)]),
]


@pytest.mark.parametrize("case,sets,want", SECTION_TABLES, ids=[c[0] for c in SECTION_TABLES])
def test_a_table_value_merges_into_its_section(case, sets, want, tmp_path):
    from sparse_tui.presets.loading import expand, load_preset

    preset = tmp_path / "tiny.toml"
    preset.write_text(TINY_PRESET)
    specs = expand(load_preset(preset, sets))
    assert [(s.config.task.kind, s.config.train.lr, s.config.train.steps) for s in specs] == want
    assert all(s.config.train.batch_size == (8 if "batch_size" in sets[0] else 16) for s in specs)
