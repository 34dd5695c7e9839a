"""The one way records travel from a Ray worker to the run store: a bounded channel (a Ray actor on the head)
and the worker's ``ChannelSink``, which takes the run store's writing calls and sends them as records.

A worker never opens SQLite (no database over a network file system). The training loop writes through a
``RunLogger`` to a *sink* (training/runlog.py): on this machine the sink is the ``RunStore``; on a Ray worker it is
a ``ChannelSink`` (both declare ``store.RunSink``, the calls a training run makes, and the worker's adds
``checkpoint_files``). Each call becomes a record ``(method, args...)``; the coordinator on the head
calls the same ``RunStore`` method with the same arguments (``apply``), so cluster runs are stored exactly like
local ones, and the console, ``runs``, ``show``, ``export`` and ``fit`` on the head see them live.

Bounded memory and backpressure: the worker buffers records and sends them as one message at least every
``FLUSH_SECONDS`` (at a heartbeat or an evaluation), at ``MAX_RECORDS`` records, and at once for a checkpoint or a
run's end. The channel holds at most ``CAPACITY`` messages; a worker whose message does not fit waits until the
coordinator has taken some (its training pauses; nothing is dropped). Each answer carries the coordinator's
control state: a stop (Ctrl-C / SIGTERM on the head: ``interrupted``) and the runs whose cancel was requested, which
the worker's loop sees at its next heartbeat as it would see the store's ``cancel_requested``.

Checkpoints go to the head: ``ChannelCheckpoint.write`` sends the saved state's bytes, which the coordinator writes
into RUNS_DIR/checkpoints with ``training.checkpoint.CheckpointFiles``; a worker resuming a run starts from the
bytes the coordinator read there and handed to the task, loaded as data only (``weights_only``: a planted file
runs nothing on a worker either).
"""

from __future__ import annotations

import asyncio
import collections
import io
import time
from types import SimpleNamespace

from sparse_tui.store import RunSink
from sparse_tui.training.checkpoint import CheckpointFiles, load_bytes

FLUSH_SECONDS = 0.5
MAX_RECORDS = 64
CAPACITY = 32  # messages: at most CAPACITY x MAX_RECORDS records (or checkpoints) wait in the channel
PUT_TIMEOUT = 600.0  # seconds a worker waits for room before it gives up (the coordinator is hung, not dead)


class Channel:
    """The bounded queue between a batch's Ray workers and its coordinator (made a Ray actor by
    ``ray_executor``; async, so that waiting puts do not block ``take``)."""

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self.items: collections.deque = collections.deque()
        self.stop: str | None = None
        self.cancel: set[str] = set()
        self.cond = asyncio.Condition()  # bound to the actor's event loop at its first use (Python 3.10+)

    async def put(self, message: list) -> tuple[str | None, list[str]]:
        """Append one message (a list of records), waiting while the channel is full. Returns the control state
        (stop status, cancelled run ids)."""
        async with self.cond:
            while len(self.items) >= self.capacity:
                await self.cond.wait()
            self.items.append(message)
        return self.stop, sorted(self.cancel)

    async def take(self) -> list:
        """Every waiting message, oldest first (the coordinator's side); wakes the waiting workers."""
        async with self.cond:
            out = list(self.items)
            self.items.clear()
            self.cond.notify_all()
        return out

    async def control(self, stop: str | None, cancel: list[str]) -> None:
        self.stop = stop or self.stop
        self.cancel.update(cancel)


class ChannelSink(RunSink):
    """A run store's writing half for a Ray worker (``store.RunSink``): the same calls, sent as records to the
    coordinator.

    ``put`` sends one message and returns the control state (``ray.get`` of ``Channel.put`` in a worker; tests pass
    a plain function). ``checkpoints``: the bytes of the checkpoint files the coordinator found for these runs,
    by the first run id of the stack they belong to."""

    def __init__(self, put, runs_dir: str, checkpoints: dict[str, bytes] | None = None):
        self.put = put
        self.runs_dir = runs_dir  # the head's store (messages only: nothing is written here)
        self.checkpoints = dict(checkpoints or {})
        self.buf: list[tuple] = []
        self.steps: dict[str, int] = {}
        self.stop: str | None = None
        self.cancelled: set[str] = set()
        self.last_flush = time.monotonic()

    # -- the RunStore calls the training loop makes ---------------------------------------------------------------
    def started(self, run_ids: list[str], device: str, versions: dict) -> None:
        self._add(("started", list(run_ids), device, versions), flush=True)

    def _reached(self, run_id: str, step: int) -> None:
        self.steps[run_id] = max(self.steps.get(run_id, 0), int(step))

    def log_metrics(self, run_id: str, step: int, metrics: dict[str, float], wall_time: float | None = None) -> None:
        self._reached(run_id, step)  # (the time: the worker's, not the head's)
        self._add(("log_metrics", run_id, int(step), dict(metrics), wall_time or time.time()))

    def log_metrics_many(self, run_id: str, steps: list[int], series: dict[str, list[float]],
                         wall_time: float | list[float] | None = None) -> None:
        if steps:
            self._reached(run_id, max(steps))
        when = list(wall_time) if isinstance(wall_time, (list, tuple)) else (wall_time or time.time())
        self._add(("log_metrics_many", run_id, list(steps), {k: list(v) for k, v in series.items()}, when))

    def log_plateau(self, run_id: str, step: float) -> None:
        self._add(("log_plateau", run_id, float(step)))

    def log_attention(self, run_id: str, step: int, maps: dict, meta: dict) -> None:
        self._add(("log_attention", run_id, int(step), maps, meta))

    def log_array(self, run_id: str, name: str, value) -> None:
        self._add(("log_array", run_id, name, value))

    def heartbeat(self, run_id: str, step: int) -> bool:
        self._reached(run_id, step)
        self._add(("heartbeat", run_id, int(step)))
        return run_id in self.cancelled

    def finish(self, run_id: str, status: str, **kw) -> None:
        self._add(("finish", run_id, status, kw), flush=True)

    def get(self, run_id: str) -> SimpleNamespace:
        """What the runner reads of a run (its ``step``): the last step this worker reported."""
        return SimpleNamespace(step=self.steps.get(run_id, 0))

    def checkpoint_files(self, run_ids: list[str]) -> "ChannelCheckpoint":
        return ChannelCheckpoint(self, run_ids, self.checkpoints.get(run_ids[0]))

    def should_stop(self) -> str | None:
        """The coordinator's stop (polled by the training loop every step; refreshed at every message)."""
        return self.stop

    # -- sending --------------------------------------------------------------------------------------------------
    def _add(self, record: tuple, flush: bool = False) -> None:
        self.buf.append(record)
        if flush or len(self.buf) >= MAX_RECORDS or time.monotonic() - self.last_flush >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        self.last_flush = time.monotonic()
        if not self.buf:
            return
        message, self.buf = self.buf, []
        stop, cancel = self.put(message)
        self.stop = stop or self.stop
        self.cancelled.update(cancel)


class ChannelCheckpoint:
    """``CheckpointFiles`` for a Ray worker: saves go to the head (as bytes, through the channel), the restore
    reads the bytes the coordinator handed the task."""

    def __init__(self, sink: ChannelSink, run_ids: list[str], initial: bytes | None):
        self.sink, self.run_ids, self.initial = sink, list(run_ids), initial

    def write(self, state, step: int) -> None:
        import torch

        buf = io.BytesIO()
        torch.save(state, buf)
        self.sink._add(("checkpoint", self.run_ids, int(step), buf.getvalue()), flush=True)

    def load(self, device):
        """The state in the bytes the coordinator handed over (data only: ``checkpoint.load_bytes``)."""
        return None if self.initial is None else load_bytes(self.initial, device)

    def remove(self) -> None:
        self.sink._add(("checkpoint_remove", self.run_ids), flush=True)

    def __str__(self) -> str:
        return f"{self.sink.runs_dir}/checkpoints/{self.run_ids[0]}.pt (on the head)"


def apply(store, record: tuple, on_error=None) -> str | None:
    """Write one worker record into ``store`` with the call the local path makes (the coordinator's side).
    Returns the run id whose cancel the store reports at a heartbeat, else None."""
    kind = record[0]
    if kind in ("log_metrics", "log_metrics_many", "log_plateau", "log_attention", "log_array"):  # the same call
        getattr(store, kind)(*record[1:])
    elif kind == "heartbeat":
        _, run_id, step = record
        if store.heartbeat(run_id, step):
            return run_id
    elif kind == "finish":
        from sparse_tui.lifecycle.runner import record_end

        _, run_id, status, kw = record
        record_end(store, run_id, status, **kw)
    elif kind == "started":
        _, run_ids, device, versions = record
        for run_id in run_ids:
            store.mark_running(run_id, device=device, versions=versions)
    elif kind == "checkpoint":
        _, run_ids, step, data = record
        try:
            CheckpointFiles(store.runs_dir, run_ids).write(data, step)
        except OSError as e:
            if on_error is not None:
                on_error(f"cannot write checkpoint for {run_ids[0]}: {e.strerror or e}")
    elif kind == "checkpoint_remove":
        CheckpointFiles(store.runs_dir, record[1]).remove()
    else:  # pragma: no cover - a newer worker than coordinator
        raise ValueError(f"unknown record {kind!r} from a Ray worker")
    return None
