"""Checkpoints (torch is imported only when one is saved or loaded): everything a stack of runs needs to continue exactly where it stopped (``sparse-tui resume``).

Every ``train.checkpoint_every`` steps, and at least every ``CHECKPOINT_SECONDS`` of training, the training loop
(training/loop.py) saves its state to ``RUNS_DIR/checkpoints/<first run id>.pt``:

* the step, the stacked parameters and the optimiser state (moments, step counts, the current learning rates);
* the random streams: torch's global CPU and CUDA generators and every member task's own generators
  (tasks/_common.py: the training data stream is the "data position");
* each run's bookkeeping: the plateau detector, the last and best metrics, the training-loss sum since the last
  evaluation and its count, and the wall time trained so far.

The file is written to a temporary name and renamed (atomic on POSIX), so a kill at any moment leaves either the
previous checkpoint or the new one, never half of one; there is only ever the latest per stack. A run resumed
from it repeats the steps after the checkpoint with the same data and the same arithmetic, so on a CPU its
metrics are bit-identical to a run that was never interrupted (tests/test_resume.py). Checkpoints belong to the
stack that wrote them (the same runs in the same order); a run resumed in another company starts from step 0.
A checkpoint is removed when every run of its stack ended for good (finished, diverged, cancelled); failed and
interrupted runs keep theirs.

Where a checkpoint is kept is the run store's business, not the loop's: ``checkpoint_files(store, run_ids)`` asks
the records' sink (training/runlog.py) for its ``checkpoint_files`` and falls back to ``CheckpointFiles``, the
file in RUNS_DIR/checkpoints. A Ray worker's sink (executors/channel.py) keeps nothing on its node: it sends each
checkpoint to the coordinator, which writes it with ``CheckpointFiles`` into the head's store, and it starts from
the checkpoint bytes the coordinator read there (docs/CLUSTER.md).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable

CHECKPOINT_SECONDS = 300.0  # also save at least this often (5 minutes of training), whatever checkpoint_every says
FORMAT = 1


def checkpoint_dir(runs_dir: Path) -> Path:
    return Path(runs_dir) / "checkpoints"


def checkpoint_path(runs_dir: Path, run_ids: list[str]) -> Path:
    return checkpoint_dir(runs_dir) / f"{run_ids[0]}.pt"


def has_checkpoint(runs_dir: Path, run_id: str) -> int | None:
    """The step of ``run_id``'s checkpoint when it was trained alone or first in its stack, else None (cheap:
    reads the small header file written beside the checkpoint)."""
    head = checkpoint_path(runs_dir, [run_id]).with_suffix(".step")
    try:
        return int(head.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class CheckpointFiles:
    """The checkpoint of one stack (``run_ids``, in order) in ``RUNS_DIR/checkpoints``: the latest only, written to
    a temporary file and renamed, with its step in a small header file beside it (``has_checkpoint``)."""

    def __init__(self, runs_dir: Path, run_ids: list[str]):
        self.runs_dir, self.run_ids = Path(runs_dir), list(run_ids)
        self.path = checkpoint_path(self.runs_dir, self.run_ids)

    def write(self, state, step: int) -> None:
        """Save ``state`` (a dict, or the bytes of a ``torch.save`` of one: what a Ray worker sends). Raises
        OSError (a full disk) with the temporary file removed and the previous checkpoint intact."""
        import torch

        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(state, (bytes, bytearray)):
                tmp.write_bytes(state)
            else:
                torch.save(state, tmp)
            os.replace(tmp, self.path)  # atomic: the previous checkpoint or this one, never half
            self.path.with_suffix(".step").write_text(f"{step}\n")
        except OSError:
            try:
                tmp.unlink()
            except OSError:
                pass
            raise

    def read_bytes(self) -> bytes | None:
        """The checkpoint file's bytes (what the Ray coordinator hands a worker), None when there is none."""
        try:
            return self.path.read_bytes()
        except OSError:
            return None

    def load(self, device):
        """The saved state, None when there is none; raises whatever ``torch.load`` raises on a damaged file."""
        import torch

        if not self.path.exists():
            return None
        return torch.load(self.path, map_location=device, weights_only=False)

    def remove(self) -> None:
        for p in (self.path, self.path.with_suffix(".step")):
            try:
                p.unlink()
            except OSError:
                pass

    def __str__(self) -> str:
        return str(self.path)


def checkpoint_files(store, run_ids: list[str]):
    """Where the checkpoint of the stack ``run_ids`` lives for records going to ``store`` (a ``RunStore`` or a
    sink with its own ``checkpoint_files``: executors/channel.py)."""
    own = getattr(store, "checkpoint_files", None)
    return own(run_ids) if own is not None else CheckpointFiles(store.runs_dir, run_ids)


def _generators(task) -> dict:
    import torch

    return {k: v for k, v in vars(task).items() if isinstance(v, torch.Generator)}


class Checkpointer:
    """Saves and restores the state of one stack (``loop.Prepared``) for the runs ``run_ids`` in ``files``
    (``CheckpointFiles`` or a Ray worker's channel to the head)."""

    def __init__(self, files, run_ids: list[str], every: int):
        self.files, self.run_ids, self.every = files, list(run_ids), every
        self.last_save = self.started = time.monotonic()
        self.wall_before = 0.0  # seconds trained before this process resumed the runs
        self.warned = False
        # Called before every save: the loop stores the train/loss points it buffers between evaluations, so a
        # checkpoint never gets ahead of the records it continues from (a run resumed from step S logs from S + 1).
        self.before_save: Callable[[], None] | None = None

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

    def save(self, step: int, prep, live) -> None:
        import torch

        if self.before_save is not None:
            self.before_save()
        state = {
            "format": FORMAT,
            "run_ids": self.run_ids,
            "step": step,
            "params": [p.detach().clone() for p in prep.stack.parameters_list()],
            "opt": _optimizer_state(prep.opt),
            "loss_sum": prep.loss_sum.detach().clone(),
            "rng_cpu": torch.get_rng_state(),
            "rng_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "live": [mb.slot for mb in live],  # places in this stack (loop.Prepared: it may have shrunk)
            "members": [
                {
                    "gens": {k: g.get_state() for k, g in _generators(mb.task).items()},
                    "det": (mb.det.initial, mb.det.step),
                    "best": dict(mb.best),
                    "last": dict(mb.last),
                    "n_since": mb.n_since,
                }
                for mb in prep.members
            ],
            "wall": self.wall_before + time.monotonic() - self.started,
        }
        try:
            self.files.write(state, step)
            self.last_save = time.monotonic()
        except OSError as e:  # a full disk: training goes on (the store records the reason when it fails too)
            if not self.warned:
                self.warned = True
                print(f"sparse-tui: cannot write checkpoint {self.files}: {e.strerror or e}", file=sys.stderr,
                      flush=True)

    # -- restoring ---------------------------------------------------------------------------------------------
    def restore(self, prep) -> tuple[int, list]:
        """Load this stack's checkpoint into ``prep`` (members, stack, optimiser, random streams). Returns (step,
        live members); (0, all members) when there is none, or it belongs to other runs or another format."""
        import torch

        try:
            state = self.files.load(prep.device)
        except Exception as e:  # noqa: BLE001 - a damaged checkpoint: start over, say so
            print(f"sparse-tui: ignoring damaged checkpoint {self.files}: {type(e).__name__}: {e}", file=sys.stderr,
                  flush=True)
            return 0, list(prep.members)
        if state is None:
            return 0, list(prep.members)
        if state.get("format") != FORMAT or state.get("run_ids") != self.run_ids:
            return 0, list(prep.members)
        with torch.no_grad():
            for p, saved in zip(prep.stack.parameters_list(), state["params"], strict=True):
                p.copy_(saved)
            _load_optimizer_state(prep.opt, state["opt"])
            prep.loss_sum.copy_(state["loss_sum"])
        torch.set_rng_state(state["rng_cpu"])
        if state["rng_cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng_cuda"])
        for mb, saved in zip(prep.members, state["members"], strict=True):
            gens = _generators(mb.task)
            for k, st in saved["gens"].items():
                gens[k].set_state(st)
            mb.det.initial, mb.det.step = saved["det"]
            mb.best, mb.last, mb.n_since = dict(saved["best"]), dict(saved["last"]), saved["n_since"]
        self.wall_before = float(state.get("wall", 0.0))
        return int(state["step"]), [prep.members[i] for i in state["live"]]

    def finished(self, members) -> None:
        """Remove the checkpoint once every run of the stack ended for good (nothing left to resume)."""
        if all(mb.result is not None and mb.result.status in ("finished", "diverged", "cancelled") for mb in members):
            self.files.remove()


def _optimizer_state(opt) -> dict:
    """Every tensor and counter of a ``StackOptimizer`` (fused torch.optim or the per-model update)."""
    if getattr(opt, "fused", False):
        return {"fused": opt.opt.state_dict()}
    out: dict = {"t": opt.t.detach().clone(), "lr_now": opt.lr_now.detach().clone()}
    for name in ("state1", "state2"):
        val = getattr(opt, name, None)
        out[name] = None if val is None else [s.detach().clone() for s in val]
    return out


def _load_optimizer_state(opt, saved: dict) -> None:
    if "fused" in saved:
        opt.opt.load_state_dict(saved["fused"])
        return
    opt.t.copy_(saved["t"])
    opt.lr_now.copy_(saved["lr_now"])
    for name in ("state1", "state2"):
        mine, theirs = getattr(opt, name, None), saved.get(name)
        if mine is not None and theirs is not None:
            for a, b in zip(mine, theirs, strict=True):
                a.copy_(b)
