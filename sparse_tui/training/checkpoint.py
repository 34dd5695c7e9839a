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

The file is written under a temporary name (``.<host>.<pid>.tmp``) and renamed (atomic on POSIX), then the older
checkpoints of the stack are removed: a kill at any moment leaves the previous checkpoint, the new one, or both
(the newest step wins), never half of one. The step is part of the name, so what ``sparse-tui show`` reports is
the step of the file a resume loads. Temporaries of a process that was killed are removed when a batch is next
coordinated (``remove_stale_temporaries``). A run resumed from a checkpoint repeats the steps after it with the same
data and the same arithmetic, so on a CPU its metrics are bit-identical to a run that was never interrupted
(tests/test_resume.py). Checkpoints belong to the stack that wrote them (the same runs in the same order); a run
resumed in another company starts from step 0. A checkpoint is removed when every run of its stack ended for good
(finished, diverged, cancelled); failed and interrupted runs keep theirs.

A checkpoint is data, never code: it is read with ``torch.load(..., weights_only=True)`` (tensors, numbers,
strings, lists, tuples and dicts only), so a file planted in a shared runs folder cannot run anything as whoever
resumes (``check`` is what ``sparse-tui resume`` asks before it trains).

Where a checkpoint is kept is the run store's business, not the loop's: ``checkpoint_files(store, run_ids)`` asks
the records' sink (training/runlog.py) for its ``checkpoint_files`` and falls back to ``CheckpointFiles``, the
files in RUNS_DIR/checkpoints. A Ray worker's sink (executors/channel.py) keeps nothing on its node: it sends each
checkpoint to the coordinator, which writes it with ``CheckpointFiles`` into the head's store, and it starts from
the checkpoint bytes the coordinator read there (docs/CLUSTER.md).
"""

from __future__ import annotations

import io
import os
import pickle
import re
import socket
import sys
import time
import warnings
from pathlib import Path

from sparse_tui.store import pid_alive

CHECKPOINT_SECONDS = 300.0  # also save at least this often (5 minutes of training), whatever checkpoint_every says
FORMAT = 2  # 1: before the stack was an nn.Module (still resumed: _from_format_1)


class CheckpointError(Exception):
    """A checkpoint file that is not a sparse-tui checkpoint (damaged, or not data: ``check``)."""


def checkpoint_dir(runs_dir: Path) -> Path:
    return Path(runs_dir) / "checkpoints"


def _versions(runs_dir: Path, first_run: str) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint file of the stack whose first run is ``first_run``, oldest step first.
    A ``<run>.pt`` of the earlier layout (its step in a ``<run>.step`` file beside it) is found too (step -1 when
    that header is gone), so checkpoints written before an upgrade are resumed."""
    folder = checkpoint_dir(runs_dir)
    pattern = re.compile(re.escape(first_run) + r"\.(\d+)\.pt")
    out = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        m = pattern.fullmatch(name)
        if m:
            out.append((int(m.group(1)), folder / name))
        elif name == f"{first_run}.pt":  # the layout before the step was in the name
            try:
                step = int((folder / f"{first_run}.step").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                step = -1
            out.append((step, folder / name))
    return sorted(out, key=lambda v: v[0])


def has_checkpoint(runs_dir: Path, run_id: str) -> int | None:
    """The step of ``run_id``'s checkpoint when it was trained alone or first in its stack, else None (cheap: the
    step is in the file name)."""
    found = _versions(runs_dir, run_id)
    return max(found[-1][0], 0) if found else None


def _load(source, device):
    """``torch.load`` of data only (never code): tensors, numbers, strings and containers."""
    import torch

    with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": the refusal below says what matters
        warnings.simplefilter("ignore")
        return torch.load(source, map_location=device, weights_only=True)


def _why(e: Exception) -> str:
    """A short reason a file did not load as a checkpoint (never torch's advice to load it with code)."""
    if isinstance(e, pickle.UnpicklingError):
        m = re.search(r"WeightsUnpickler error:\s*(.+?)(?:\n\n|$)", str(e), re.S)
        detail = " ".join(m.group(1).split()) if m else ""
        return "it holds more than tensors and plain data" + (f": {detail[:160]}" if detail else "")
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return f"{type(e).__name__}: {first.split('. ')[0][:160]}"


def check(runs_dir: Path, run_id: str) -> None:
    """Raise ``CheckpointError`` (one line, naming the file) when ``run_id`` has a checkpoint that cannot be read
    as data (a planted pickle that would run code, a damaged or foreign file); nothing in it runs."""
    found = _versions(runs_dir, run_id)
    if not found:
        return
    path = found[-1][1]
    try:
        state = _load(path, "cpu")
    except Exception as e:  # noqa: BLE001 - whatever the unpickler says, it is one line
        raise CheckpointError(f"{path}: not a sparse-tui checkpoint, refused to load it ({_why(e)}); remove it"
                              " to train the run from step 0") from None
    if not isinstance(state, dict) or state.get("format") not in (1, FORMAT):
        raise CheckpointError(f"{path}: not a sparse-tui checkpoint (format {FORMAT}); remove it to train the run"
                              " from step 0")


def _temporary(path: Path) -> Path:
    return path.with_name(f"{path.name}.{socket.gethostname()}.{os.getpid()}.tmp")


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

    @property
    def path(self) -> Path | None:
        """The latest checkpoint file, None when there is none."""
        found = _versions(self.runs_dir, self.run_ids[0])
        return found[-1][1] if found else None

    def write(self, state, step: int) -> None:
        """Save ``state`` (a dict, or the bytes of a ``torch.save`` of one: what a Ray worker sends) as the
        checkpoint of ``step``. Raises OSError (a full disk: ENOSPC) with the temporary file removed and the
        previous checkpoint intact."""
        import torch

        older = _versions(self.runs_dir, self.run_ids[0])
        path = checkpoint_dir(self.runs_dir) / f"{self.run_ids[0]}.{int(step)}.pt"
        tmp = _temporary(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as fh:
                if isinstance(state, (bytes, bytearray)):
                    fh.write(state)
                else:
                    torch.save(state, fh)
            os.replace(tmp, path)  # atomic: the previous checkpoint or this one, never half
        except BaseException as e:
            _unlink(tmp)
            cause = _os_error(e)  # torch's zip writer reports the file's ENOSPC as a RuntimeError of its own
            if cause is not None and cause is not e:
                raise cause from None
            raise
        for _, old in older:
            if old != path:
                _unlink(old)
        _unlink(checkpoint_dir(self.runs_dir) / f"{self.run_ids[0]}.step")  # the older layout's header

    def read_bytes(self) -> bytes | None:
        """The latest checkpoint file's bytes (what the Ray coordinator hands a worker), None when there is none."""
        path = self.path
        try:
            return path.read_bytes() if path is not None else None
        except OSError:
            return None

    def load(self, device):
        """The saved state, None when there is none; raises whatever ``torch.load`` raises on a damaged file or
        one that is not data only."""
        path = self.path
        return None if path is None else _load(path, device)

    def remove(self) -> None:
        for _, p in _versions(self.runs_dir, self.run_ids[0]):
            _unlink(p)
        _unlink(checkpoint_dir(self.runs_dir) / f"{self.run_ids[0]}.step")

    def __str__(self) -> str:
        return str(self.path or checkpoint_dir(self.runs_dir) / f"{self.run_ids[0]}.<step>.pt")


def load_bytes(data: bytes, device):
    """A checkpoint's state from its bytes (a Ray worker; data only, as ``CheckpointFiles.load``)."""
    return _load(io.BytesIO(data), device)


def _os_error(e: BaseException) -> OSError | None:
    """The OSError behind ``e`` (``e`` itself, or what it was raised from or while handling), if any."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, OSError):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


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

    def __init__(self, files, run_ids: list[str], every: int):
        self.files, self.run_ids, self.every = files, list(run_ids), every
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
        return cls(checkpoint_files(next(iter(stores)), run_ids), run_ids, every)

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
            "step": step,
            "model": {k: v.clone() for k, v in prep.stack.state_dict().items()},  # models/stack.py: an nn.Module
            "opt": prep.opt.state_dict(),
            "loss_sum": prep.loss_sum.detach().clone(),
            "rng_cpu": torch.get_rng_state(),
            "rng_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "live": [mb.slot for mb in live],  # places in this stack (loop.Prepared: it may have shrunk)
            "members": [mb.state_dict() for mb in prep.members],  # loop.Tracker: streams, detector, metrics
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
        except Exception as e:  # noqa: BLE001 - a damaged checkpoint, or not data: start over, say so
            print(f"sparse-tui: ignoring damaged checkpoint {self.files}: {_why(e)}", file=sys.stderr, flush=True)
            return 0, list(prep.members)
        if not isinstance(state, dict) or state.get("format") not in (1, FORMAT):
            return 0, list(prep.members)
        if state.get("run_ids") != self.run_ids:
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
