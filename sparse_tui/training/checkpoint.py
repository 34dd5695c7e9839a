"""Checkpoints (torch is imported only when one is saved or loaded): everything a stack of runs needs to continue
exactly where it stopped (``sparse-tui resume``).

Every ``train.checkpoint_every`` steps, and at least every ``CHECKPOINT_SECONDS`` of training, the training loop
(training/loop.py) saves its state to ``RUNS_DIR/checkpoints/<first run id>.<step>.pt``:

* the step, the stack's ``state_dict()`` (models/stack.py: the runs' parameter names, each ``[M, ...]``) and the
  optimiser's (training/optim.py: moments, momentum buffers, step counts, under torch.optim's names);
* the random streams: torch's global CPU and CUDA generators and every member task's own generators
  (tasks/_common.py: the training data stream is the "data position");
* each run's bookkeeping: the plateau detector, the last and best metrics, the training-loss sum since the last
  evaluation and its count, and the wall time trained so far.

The file is written by the one file writer (files.py: an unnamed ``O_TMPFILE``, else ``.<name>.<host>.<pid>.tmp``,
then renamed: atomic on POSIX), then the older checkpoints of the stack are removed: a kill at any moment leaves the
previous checkpoint, the new one, or both
(the newest step wins), never half of one. The step is part of the name, so what ``sparse-tui show`` reports is
the step of the file a resume loads. Temporaries of a process that was killed are removed when a batch is next
coordinated (``remove_stale_temporaries``). A run resumed from a checkpoint repeats the steps after it with the same
data and the same arithmetic, so on a CPU its metrics are bit-identical to a run that was never interrupted
(tests/test_resume.py). Checkpoints belong to the stack that wrote them (the same runs in the same order); a run
resumed in another company starts from step 0. A checkpoint is removed when every run of its stack ended for good
(finished, diverged, cancelled); failed and interrupted runs keep theirs.

A checkpoint is data, never code: it is read with ``torch.load(..., weights_only=True)`` (tensors, numbers,
strings, lists, tuples and dicts only), so a file planted in a shared runs folder cannot run anything as whoever
resumes. And only a run's own checkpoint is loaded (issue 30): ``check`` (what ``resume`` asks before it trains and
what ``show`` reports) refuses in one line a FIFO or device (opened without waiting), an unreadable folder, an
absurd step in a name, a step in the name that the content disagrees with, and another run's file: the first run id
inside, and the ``fingerprint`` of each run (its id, task, model and seed) saved with it. The training loop's restore
applies the same ``verify`` and compares the saved shapes with the model's before loading; what it refuses is one
line on stderr and the run starts from step 0.

Where a checkpoint is kept is the run store's business, not the loop's: ``checkpoint_files(store, run_ids)`` asks
the records' sink (training/runlog.py) for its ``checkpoint_files`` and falls back to ``CheckpointFiles``, the
files in RUNS_DIR/checkpoints. A Ray worker's sink (executors/channel.py) keeps nothing on its node: it sends each
checkpoint to the coordinator, which writes it with ``CheckpointFiles`` into the head's store, and it starts from
the checkpoint bytes the coordinator read there (docs/CLUSTER.md).
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import pickle
import re
import socket
import sys
import time
import warnings
from pathlib import Path

from sparse_tui.base.files import ReadError, open_regular, read_regular, write_file
from sparse_tui.store import pid_alive

CHECKPOINT_SECONDS = 300.0  # also save at least this often (5 minutes of training), whatever checkpoint_every says
FORMAT = 2  # 1: before the stack was an nn.Module (still resumed: _from_format_1)


class CheckpointError(Exception):
    """A checkpoint file that is not a sparse-tui checkpoint (damaged, or not data: ``check``)."""


def checkpoint_dir(runs_dir: Path) -> Path:
    return Path(runs_dir) / "checkpoints"


MAX_STEP = 10**12  # a step in a checkpoint's name above this is not a step (RUN.99999999999999999999.pt)


def fingerprint(run_id: str, cfg) -> str:
    """What a checkpoint says it belongs to: the run id and what fixes its shapes and data (the task, the model,
    the seed), hashed. A file copied under another run's name, or relabelled inside, does not carry it."""
    data = cfg.model_dump(mode="json") if hasattr(cfg, "model_dump") else dict(cfg)
    key = {k: data.get(k) for k in ("task", "model", "seed")}
    return hashlib.sha256(f"{run_id}\n{json.dumps(key, sort_keys=True)}".encode()).hexdigest()[:16]


def _versions(runs_dir: Path, first_run: str, strict: bool = False) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint file of the stack whose first run is ``first_run``, oldest step first.
    A ``<run>.pt`` of the earlier layout (its step in a ``<run>.step`` file beside it) is found too (step -1 when
    that header is gone), so checkpoints written before an upgrade are resumed. ``strict``: an unreadable folder
    or an absurd step in a name is a ``CheckpointError`` (else: no checkpoint, that name skipped)."""
    folder = checkpoint_dir(runs_dir)
    pattern = re.compile(re.escape(first_run) + r"\.(\d+)\.pt")
    out = []
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    except OSError as e:
        if strict:
            raise CheckpointError(f"{folder}: cannot read the checkpoints folder ({e.strerror or e}); fix its"
                                  " permissions, or move it away to train from step 0") from None
        return []
    for name in names:
        m = pattern.fullmatch(name)
        if m:
            step = int(m.group(1))
            if step > MAX_STEP:
                if strict:
                    raise CheckpointError(f"{folder / name}: step {m.group(1)[:24]} in the name is not a step;"
                                          " remove it to train the run from step 0")
                continue
            out.append((step, folder / name))
        elif name == f"{first_run}.pt":  # the layout before the step was in the name
            try:
                step = int(read_regular(folder / f"{first_run}.step", 64, "a step header").split()[0])
            except (OSError, ValueError, IndexError):
                step = -1
            out.append((step if 0 <= step <= MAX_STEP else -1, folder / name))
    return sorted(out, key=lambda v: v[0])


def has_checkpoint(runs_dir: Path, run_id: str) -> int | None:
    """The step in the name of ``run_id``'s checkpoint when it was trained alone or first in its stack, else None
    (cheap: nothing is read; what ``show`` reports goes through ``check``)."""
    found = _versions(runs_dir, run_id)
    return max(found[-1][0], 0) if found else None


def _open(path: Path):
    """``path`` opened for reading if it is a regular file: a FIFO (opened without waiting for a writer), a device
    or a socket is a ``CheckpointError``."""
    try:
        return open_regular(path, "a checkpoint file")  # base/files.py: the one reader of users' files
    except ReadError as e:
        if e.errno in (errno.EINVAL, errno.EISDIR):
            raise CheckpointError(f"{e}; refused (remove it to train the run from step 0)") from None
        raise CheckpointError(f"{path}: cannot read the checkpoint ({e.reason.removeprefix('cannot read: ')})") \
            from None


def _load(source, device):
    """``torch.load`` of data only (never code): tensors, numbers, strings and containers. ``source``: a path
    (opened by ``_open``) or a file object."""
    import torch

    fh = _open(source) if isinstance(source, (str, Path)) else source
    try:
        with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": the refusal below says what matters
            warnings.simplefilter("ignore")
            return torch.load(fh, map_location=device, weights_only=True)
    finally:
        if fh is not source:
            fh.close()


def _why(e: Exception) -> str:
    """A short reason a file did not load as a checkpoint (never torch's advice to load it with code)."""
    if isinstance(e, CheckpointError):
        return str(e)
    if isinstance(e, pickle.UnpicklingError):
        m = re.search(r"WeightsUnpickler error:\s*(.+?)(?:\n\n|$)", str(e), re.S)
        detail = " ".join(m.group(1).split()) if m else ""
        return "it holds more than tensors and plain data" + (f": {detail[:160]}" if detail else "")
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return f"{type(e).__name__}: {first.split('. ')[0][:160]}"


_REMOVE = "remove it to train the run from step 0"


def verify(state, where, run_id: str, name_step: int | None = None, expected: str | None = None) -> int:
    """The step of a loaded checkpoint ``state`` if it is ``run_id``'s own (``where`` names it in the message):
    a sparse-tui checkpoint, written for a stack whose first run is ``run_id``, carrying ``expected`` (its
    ``fingerprint``) when both know one, and of the step its name says. Else ``CheckpointError`` (one line)."""
    if not isinstance(state, dict) or state.get("format") not in (1, FORMAT):
        raise CheckpointError(f"{where}: not a sparse-tui checkpoint (format {FORMAT}); {_REMOVE}")
    ids = state.get("run_ids")
    if not isinstance(ids, list) or not ids or ids[0] != run_id:
        owner = ids[0] if isinstance(ids, list) and ids else "unknown"
        raise CheckpointError(f"{where}: the checkpoint of run {str(owner)[:40]}, not of run {run_id}; {_REMOVE}")
    prints = state.get("fingerprints")
    if expected is not None and isinstance(prints, list) and prints and prints[0] != expected:
        raise CheckpointError(f"{where}: written for another run (its fingerprint is not run {run_id}'s"
                              f" configuration); {_REMOVE}")
    step = state.get("step")
    if not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        raise CheckpointError(f"{where}: no valid step inside; {_REMOVE}")
    if name_step is not None and name_step >= 0 and step != name_step:
        raise CheckpointError(f"{where}: the name says step {name_step}, the content step {step}; {_REMOVE}")
    return step


def check(runs_dir: Path, run_id: str, expected: str | None = None) -> int | None:
    """The step ``resume`` would continue ``run_id`` from (None: no checkpoint). Raises ``CheckpointError`` (one
    line, naming the file) for anything it would not load: an unreadable folder, a name whose step is absurd, a
    FIFO or device (never opened for a wait), a file that is not data (a planted pickle: nothing in it runs), or
    one that ``verify`` says is not this run's. ``resume`` asks it before anything is written, ``show`` to say
    what it reports, the training loop's restore through ``verify``."""
    found = _versions(runs_dir, run_id, strict=True)
    if not found:
        return None
    name_step, path = found[-1]
    try:
        state = _load(path, "cpu")
    except CheckpointError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the unpickler says, it is one line
        raise CheckpointError(f"{path}: not a sparse-tui checkpoint, refused to load it ({_why(e)}); remove it"
                              " to train the run from step 0") from None
    return verify(state, path, run_id, name_step, expected)


def remove_stale_temporaries(runs_dir: Path) -> list[Path]:
    """Remove the checkpoint temporaries of processes of this host that are gone (``kill -9`` during a save).
    Those of live processes, and of other hosts sharing the runs folder, stay. Returns the paths removed."""
    host = socket.gethostname()
    tmp = re.compile(r".*\.pt\.(?:(?P<host>.+)\.)?(?P<pid>\d+)\.tmp")  # the host is absent in older names
    gone = []
    try:
        names = os.listdir(checkpoint_dir(runs_dir))
    except OSError:
        return gone
    for name in names:
        m = tmp.fullmatch(name)
        if m and m.group("host") in (None, host) and not pid_alive(int(m.group("pid"))):
            path = checkpoint_dir(runs_dir) / name
            try:
                path.unlink()
                gone.append(path)
            except OSError:
                pass
    return gone


class CheckpointFiles:
    """The checkpoint of one stack (``run_ids``, in order) in ``RUNS_DIR/checkpoints``: the latest only (see the
    module docstring for how a save stays atomic)."""

    def __init__(self, runs_dir: Path, run_ids: list[str]):
        self.runs_dir, self.run_ids = Path(runs_dir), list(run_ids)
        self.step: int | None = None  # the step in the name of the file ``load`` read

    @property
    def path(self) -> Path | None:
        """The latest checkpoint file, None when there is none."""
        found = _versions(self.runs_dir, self.run_ids[0])
        return found[-1][1] if found else None

    def write(self, state, step: int) -> None:
        """Save ``state`` (a dict, or the bytes of a ``torch.save`` of one: what a Ray worker sends) as the
        checkpoint of ``step``. Raises ``files.WriteError`` (an OSError; a full disk: ENOSPC) with nothing
        left behind and the previous checkpoint intact."""
        import torch

        path = checkpoint_dir(self.runs_dir) / f"{self.run_ids[0]}.{int(step)}.pt"

        def fill(fh) -> None:
            if isinstance(state, (bytes, bytearray)):
                fh.write(state)
            else:
                torch.save(state, fh)

        write_file(path, fill, binary=True, mkdir=True)  # files.py: atomic, the previous checkpoint or this one
        self.remove(keep=path)

    def read_bytes(self) -> bytes | None:
        """The latest checkpoint file's bytes (what the Ray coordinator hands a worker), None when there is none."""
        path = self.path
        try:
            return read_regular(path, None, "a checkpoint file") if path is not None else None
        except OSError:
            return None

    def load(self, device):
        """The saved state, None when there is none (``step``: the step its name says); raises
        ``CheckpointError`` (an unreadable folder, an absurd name, a FIFO or device) or whatever ``torch.load``
        raises on a damaged file or one that is not data only."""
        found = _versions(self.runs_dir, self.run_ids[0], strict=True)
        if not found:
            return None
        self.step = found[-1][0]
        return _load(found[-1][1], device)

    def remove(self, keep: Path | None = None) -> None:
        """Remove the stack's checkpoint files (but ``keep``) and the older layout's step header."""
        for _, p in _versions(self.runs_dir, self.run_ids[0]):
            if p != keep:
                _unlink(p)
        _unlink(checkpoint_dir(self.runs_dir) / f"{self.run_ids[0]}.step")

    def __str__(self) -> str:
        return str(self.path or checkpoint_dir(self.runs_dir) / f"{self.run_ids[0]}.<step>.pt")


def load_bytes(data: bytes, device):
    """A checkpoint's state from its bytes (a Ray worker; data only, as ``CheckpointFiles.load``)."""
    return _load(io.BytesIO(data), device)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def checkpoint_files(store, run_ids: list[str]):
    """Where the checkpoint of the stack ``run_ids`` lives for records going to ``store`` (a ``RunStore`` or a
    sink with its own ``checkpoint_files``: executors/channel.py)."""
    own = getattr(store, "checkpoint_files", None)
    return own(run_ids) if own is not None else CheckpointFiles(store.runs_dir, run_ids)


class Checkpointer:
    """Saves and restores the state of one stack (``loop.Prepared``) for the runs ``run_ids`` in ``files``
    (``CheckpointFiles`` or a Ray worker's channel to the head)."""

    def __init__(self, files, run_ids: list[str], every: int, fingerprints: list[str] | None = None):
        self.files, self.run_ids, self.every = files, list(run_ids), every
        self.fingerprints = list(fingerprints or [])  # ``fingerprint`` of each run, saved in and checked on load
        self.last_save = self.started = time.monotonic()
        self.wall_before = 0.0  # seconds trained before this process resumed the runs
        self.warned = False

    @classmethod
    def for_stack(cls, members) -> "Checkpointer | None":
        """A checkpointer when every member logs to one run store and checkpoints are on, else None."""
        stores = {getattr(mb.logger, "store", None) for mb in members}
        every = min(mb.cfg.train.checkpoint_every for mb in members)
        if len(stores) != 1 or None in stores or every <= 0:
            return None
        run_ids = [mb.logger.run_id for mb in members]
        prints = [fingerprint(rid, mb.cfg) for rid, mb in zip(run_ids, members)]
        return cls(checkpoint_files(next(iter(stores)), run_ids), run_ids, every, prints)

    # -- saving ------------------------------------------------------------------------------------------------
    def maybe_save(self, step: int, prep, live, now: bool = False) -> None:
        """Save at every ``every``-th step, when ``CHECKPOINT_SECONDS`` passed since the last save, and ``now``
        (the run is being stopped: Ctrl-C / SIGTERM)."""
        if now or step % self.every == 0 or time.monotonic() - self.last_save >= CHECKPOINT_SECONDS:
            self.save(step, prep, live)

    def handover(self, step: int, prep, live) -> "Checkpointer":
        """The checkpointer of the smaller stack ``prep`` rebuilt from ``live`` (``loop.Prepared.restack``), its
        checkpoint saved at once; it replaces this one's (other runs, other shapes)."""
        new = Checkpointer.for_stack(live)
        new.started, new.wall_before = self.started, self.wall_before
        new.save(step, prep, live)
        if self.run_ids[0] != new.run_ids[0]:  # else the new file replaced it
            self.files.remove()
        return new

    def save(self, step: int, prep, live) -> None:
        import torch

        for mb in prep.members:  # the train/loss points buffered since the last evaluation are stored first, so
            mb.flush()  # a checkpoint never gets ahead of the records it continues from (resumed from S: logs S + 1)
        state = {
            "format": FORMAT,
            "run_ids": self.run_ids,
            "fingerprints": self.fingerprints,
            "step": step,
            "model": {k: v.clone() for k, v in prep.stack.state_dict().items()},  # models/stack.py: an nn.Module
            "opt": prep.opt.state_dict(),
            "loss_sum": prep.loss_sum.detach().clone(),
            "rng_cpu": torch.get_rng_state(),
            "rng_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "live": [mb.slot for mb in live],  # places in this stack (loop.Prepared: it may have shrunk)
            "members": [mb.state_dict() for mb in prep.members],  # tracker.Tracker: streams, detector, metrics
            "wall": self.wall_before + time.monotonic() - self.started,
        }
        try:
            self.files.write(state, step)
            self.last_save = time.monotonic()
        except OSError as e:  # a full disk: training goes on (the store records the reason when it fails too)
            if not self.warned:
                self.warned = True
                print(f"sparse-tui: cannot write the checkpoint of step {step} ({e.strerror or e}); the latest"
                      f" stays: {self.files}", file=sys.stderr, flush=True)

    # -- restoring ---------------------------------------------------------------------------------------------
    def restore(self, prep) -> tuple[int, list]:
        """Load this stack's checkpoint into ``prep`` (members, stack, optimiser, random streams). Returns (step,
        live members); (0, all members) when there is none, or it belongs to other runs or another format."""
        import torch

        try:
            state = self.files.load(prep.device)
            if state is None:
                return 0, list(prep.members)
            if isinstance(state, dict) and state.get("run_ids") not in (None, self.run_ids) \
                    and (state.get("run_ids") or [None])[0] == self.run_ids[0]:
                return 0, list(prep.members)  # this run's checkpoint, of a stack of other company: from step 0
            verify(state, self.files, self.run_ids[0], getattr(self.files, "step", None),
                   self.fingerprints[0] if self.fingerprints else None)
            if state["format"] != 1:
                _check_shapes(state["model"], prep.stack.state_dict(), self.files)
        except CheckpointError as e:  # not this run's, or not a file: start over, say so (one line, naming it)
            why = str(e).removesuffix(f"; {_REMOVE}")
            print(f"sparse-tui: {why}; ignored, the run starts from step 0", file=sys.stderr, flush=True)
            return 0, list(prep.members)
        except Exception as e:  # noqa: BLE001 - a damaged checkpoint, or not data: start over, say so
            print(f"sparse-tui: ignoring damaged checkpoint {self.files}: {_why(e)}", file=sys.stderr, flush=True)
            return 0, list(prep.members)
        if state["format"] == 1:
            state = _from_format_1(state, prep)
        with torch.no_grad():
            prep.stack.load_state_dict(state["model"])
            prep.opt.load_state_dict(state["opt"])
            prep.loss_sum.copy_(state["loss_sum"])
        torch.set_rng_state(state["rng_cpu"])
        if state["rng_cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng_cuda"])
        for mb, saved in zip(prep.members, state["members"], strict=True):
            mb.load_state_dict(saved)
        self.wall_before = float(state.get("wall", 0.0))
        return int(state["step"]), [prep.members[i] for i in state["live"]]

    def finished(self, members) -> None:
        """Remove the checkpoint once every run of the stack ended for good (nothing left to resume)."""
        if all(mb.result is not None and mb.result.status in ("finished", "diverged", "cancelled") for mb in members):
            self.files.remove()


def _check_shapes(saved: dict, own: dict, where) -> None:
    """``CheckpointError`` (one line) unless the saved parameters have the names and shapes of this stack's."""
    if not isinstance(saved, dict):
        raise CheckpointError(f"{where}: no model parameters inside; {_REMOVE}")
    for k in sorted(set(saved) | set(own)):
        a, b = getattr(saved.get(k), "shape", None), getattr(own.get(k), "shape", None)
        if a is None or b is None or tuple(a) != tuple(b):
            got = "missing" if a is None else tuple(a)
            want = "none" if b is None else tuple(b)
            raise CheckpointError(f"{where}: its shapes do not match this run's model ({k}: {got} in the file,"
                                  f" {want} in the model); {_REMOVE}")


def _from_format_1(state: dict, prep) -> dict:
    """A checkpoint of format 1 (sparse-tui before the stack was an ``nn.Module``: the parameters as a list in the
    stack's order, the optimiser's state under its attributes' names then) in today's layout, so a run
    interrupted before an upgrade resumes (tests/test_resume.py)."""
    opt, n = state["opt"], len(state["params"])
    if "fused" in opt:  # torch.optim's own state_dict: its names already
        per = [opt["fused"]["state"].get(i, {}) for i in range(n)]
    else:
        names = ("momentum_buffer", None) if prep.opt.kind == "sgd" else ("exp_avg", "exp_avg_sq")
        per = [{"step": opt["t"], **{k: v[i] for k, v in zip(names, (opt["state1"], opt["state2"]))
                                     if k is not None and v is not None}} for i in range(n)]
    model = dict(zip((k for k, _ in prep.stack.named_parameters()), state["params"], strict=True))
    return {**state, "format": FORMAT, "model": model, "opt": {"state": per}}
