"""Your own training code in the run store (issue 40): ``sparse_tui.init`` / ``run.log`` / ``run.finish``, in the
style of W&B, so that the console, ``runs``, ``fit``, the plateau detector and every export serve runs that
sparse-tui did not train. docs/LOGGING.md is the user's guide.

    import sparse_tui
    with sparse_tui.init(name="d64", group="induction-width", config={"model": {"d_model": 64}, "seed": 0},
                         plateau={"metric": "test/acc", "mode": "above", "value": 0.9}) as run:
        for step in range(steps):
            ...
            run.log({"train/loss": loss.item()}, step=step)

A logged run is a row of the same store as a built-in run, written by the same writer (``store.RunStore``): its
group is the run's *preset* (what ``fit --preset``, the console's groups and the forecast's peers go by), its config
keys are its hyperparameter columns (``params``: ``model.d_model``, ``seed``), its ``seed`` key its seed, and its
plateau rule is stored as the config's ``plateau`` section, exactly as a preset's (``training/plateau.py``'s detector
with the same modes and defaults; ``fit --threshold`` re-reads it from the curve). Its ``versions`` say
``logged_by: sparse_tui.init`` and the script: such a run cannot be resumed by sparse-tui (only its script can).

The lifecycle is the store's: the run is recorded ``running`` with this process as its pid and its batch's
coordinator, so ``store.reap`` fails it when the process is gone (a SIGKILL, an OOM kill) and no heartbeat keeps it
``running`` forever. A normal exit without ``finish`` ends it ``finished``, an uncaught exception ``failed`` (with
the exception as its reason), Ctrl-C ``interrupted``.

``log`` only checks its arguments and appends to a buffer; a background thread writes the buffer every
``FLUSH_SECONDS`` in one transaction (with the heartbeat and the live plateau), so logging costs a training loop a
few microseconds a call (benchmarks/logging_bench.py, docs/PERFORMANCE.md). Bad input raises ``LogError`` naming the
key, before anything of that call is buffered; nothing logged before is lost. A NaN or infinite value is kept (a gap
in the curve, as built-in runs store it), counted in the summary's ``nonfinite``; a run whose last ``*loss`` (or
plateau metric) is non-finite ends ``diverged``, as a built-in run with a non-finite loss does.

Nothing here imports torch or textual: the logging API works in an install without torch.
"""

from __future__ import annotations

import atexit
import math
import os
import platform
import sqlite3
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sparse_tui.base.version import __version__
from sparse_tui.store import TERMINAL, RunStore, StoreError
from sparse_tui.training.plateau import PlateauDetector

FLUSH_SECONDS = 0.5  # how often the writer thread stores the buffered points (and beats)
LOGGED_BY = "sparse_tui.init"  # versions["logged_by"] of a run made here (lifecycle/runner.py refuses to resume it)
MAX_NAME = 200


class LogError(TypeError, ValueError):
    """A bad argument to ``init``, ``log`` or ``finish``; the message is one line naming the key. Nothing of the
    call that raised it was recorded, and nothing recorded before is lost."""


# -- the config --------------------------------------------------------------------------------------------------


def _scalar(key: str, v: Any) -> Any:
    """A config value as stored (JSON), or LogError naming ``key``."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    if isinstance(v, (list, tuple)):
        return [_scalar(f"{key}[{i}]", x) for i, x in enumerate(v)]
    item = getattr(v, "item", None)
    if callable(item) and getattr(v, "ndim", None) == 0:  # a numpy scalar or a 0-d tensor
        return _scalar(key, item())
    raise LogError(f"config key {key!r}: a {type(v).__name__} cannot be stored (config values are numbers, strings,"
                   " booleans, None, or lists or dicts of them)")


def clean_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The config as stored: nested dicts of JSON values (numpy scalars as numbers, paths as strings). LogError
    naming the first key that cannot be stored, is not a string, or is the reserved ``plateau`` (``init``'s
    ``plateau=``)."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise LogError(f"config: must be a dict, got {type(config).__name__}")

    def walk(node: Mapping, prefix: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in node.items():
            if not isinstance(k, str) or not k:
                raise LogError(f"config key {prefix}{k!r}: keys must be non-empty strings")
            key = prefix + k
            out[k] = walk(v, key + ".") if isinstance(v, Mapping) else _scalar(key, v)
        return out

    clean = walk(config, "")
    if "plateau" in clean:
        raise LogError("config key 'plateau': reserved for the plateau rule; pass it as init(plateau={...})")
    seed = clean.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise LogError(f"config key 'seed': must be an integer (runs are grouped by it), got {seed!r}")
    return clean


def plateau_rule(plateau: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """``init``'s ``plateau=`` as the config's ``plateau`` section, checked by the preset schema's own rule
    (``presets.schema.PlateauConfig``: metric, mode fraction / below / above, value; default: test/loss to 0.2 of
    its initial value, App. D.1). A string is the metric with the default mode and value."""
    from pydantic import ValidationError

    from sparse_tui.presets.errors import format_validation_error
    from sparse_tui.presets.schema import PlateauConfig

    if isinstance(plateau, str):
        plateau = {"metric": plateau}
    if plateau is not None and not isinstance(plateau, Mapping):
        raise LogError(f"plateau: a dict (metric, mode, value) or a metric name, got {type(plateau).__name__}")
    try:
        return PlateauConfig.model_validate(dict(plateau or {})).model_dump(mode="json")
    except ValidationError as e:
        raise LogError(format_validation_error(e, "plateau")[0]) from None


# -- the run -----------------------------------------------------------------------------------------------------


class Run:
    """One run logged by this process (``init`` makes it). ``log`` / ``log_attention`` / ``finish``; a context
    manager that ends the run ``finished``, or ``failed`` / ``interrupted`` when its block raises."""

    def __init__(self, store: RunStore, run_id: str, batch_id: str, rule: dict, *, flush_seconds: float):
        self.store, self.id, self.batch_id = store, run_id, batch_id
        self.det = PlateauDetector(mode=rule["mode"], value=rule["value"])
        self.metric = rule["metric"]
        self.flush_seconds = flush_seconds
        self.ended: str | None = None  # the terminal status, once finished
        self.cancel_requested = False  # the console (or `sparse-tui cancel`) asked this run to stop
        self._pid = os.getpid()
        self._started = time.perf_counter()
        self._step = -1  # the last step logged
        self._next = 0  # the step of a log() without one
        self._points: deque = deque()  # (step, {name: float}) not yet written
        self._maps: deque = deque()  # (step, maps, meta) not yet written
        self._write = threading.Lock()  # one flush at a time (the thread's and finish's)
        self._stop = threading.Event()
        self._warned = False
        self._plateau_written = False
        self.last: dict[str, float] = {}
        self.best: dict[str, float] = {}
        self.nonfinite: dict[str, int] = {}  # metric -> first step at which it was NaN or infinite
        self._thread = threading.Thread(target=self._loop, name=f"sparse-tui-log-{run_id}", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"<sparse_tui.Run {self.id} {self.ended or 'running'} step {self._step} in {self.store.path}>"

    @property
    def step(self) -> int:
        """The last step logged (-1: none yet)."""
        return self._step

    @property
    def should_stop(self) -> bool:
        """True once the console or ``sparse-tui cancel`` asked this run to stop: end the training loop; ``finish``
        then records the run ``cancelled``."""
        return self.cancel_requested

    # -- logging -----------------------------------------------------------------------------------------------

    def _check_step(self, step: Any) -> int:
        if self.ended is not None:
            raise LogError(f"run {self.id} has ended ({self.ended}); start another with sparse_tui.init()")
        if step is None:
            return max(self._next, self._step, 0)
        if isinstance(step, bool) or not hasattr(step, "__index__"):
            raise LogError(f"step: must be an integer, got {step!r}")
        s = step.__index__()
        if s < 0:
            raise LogError(f"step: must be >= 0, got {s}")
        if s < self._step:
            raise LogError(f"step: {s} is before step {self._step}, already logged (steps must not go backwards);"
                           " nothing of this call was logged")
        return s

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Record ``metrics`` (name -> number: a float, an int, a numpy scalar, a one-element tensor) at ``step``
        (an integer, never smaller than the last one logged; default: one after the last ``log`` without a step).
        Names are free; ``train/loss``, ``test/loss`` and ``test/acc`` are the ones the console's curves and the run
        table show first, ``attn/L1/H0/relevant``-style names are attention probes. LogError names the first bad
        key; nothing of this call is recorded then."""
        s = self._check_step(step)
        if not isinstance(metrics, Mapping):
            raise LogError(f"log(): metrics must be a dict of name -> number, got {type(metrics).__name__}")
        vals: dict[str, float] = {}
        for k, v in metrics.items():
            if type(k) is not str or not k:
                raise LogError(f"log(): metric names must be non-empty strings, got {k!r}")
            t = type(v)
            if t is float:
                vals[k] = v
            elif t is int:
                vals[k] = float(v)
            else:
                vals[k] = _number(k, v)
        self._points.append((s, vals))
        self._step = s
        if step is None:
            self._next = s + 1

    def log_attention(self, maps: Mapping[str, Any], step: int | None = None, *, tokens: Any = None,
                      relevant: Any = None) -> None:
        """Attention maps at ``step`` for the console's Attention panel: ``{'L1': array, ...}``, each [Lq, L] (one
        head, one sequence), [H, Lq, L] or [H, E, Lq, L] (heads, example sequences); numpy arrays or tensors.
        ``tokens``: the sequences' token ids [E][L] (row and column labels); ``relevant``: 0/1 [E][L], the key
        positions the readout should attend to (marked ``s``)."""
        import numpy as np

        s = self._check_step(step)
        if not isinstance(maps, Mapping) or not maps:
            raise LogError("log_attention(): maps must be a non-empty dict of layer name -> array")
        arrs: dict[str, Any] = {}
        for k, v in maps.items():
            if type(k) is not str or not k:
                raise LogError(f"log_attention(): layer names must be non-empty strings, got {k!r}")
            if hasattr(v, "detach"):  # a tensor, wherever it lives
                v = v.detach().float().cpu().numpy()
            try:
                a = np.asarray(v, dtype=np.float32)
            except (TypeError, ValueError):
                raise LogError(f"log_attention(): {k!r}: not an array of numbers") from None
            if a.ndim not in (2, 3, 4) or 0 in a.shape:
                raise LogError(f"log_attention(): {k!r}: shape {list(a.shape)}; want [Lq, L], [H, Lq, L] or"
                               " [H, E, Lq, L]")
            arrs[k] = a.reshape((1,) * (4 - a.ndim) + a.shape)
        _, E, _, L = next(iter(arrs.values())).shape
        meta: dict[str, Any] = {"seq_len": L}
        for key, val in (("tokens", tokens), ("relevant", relevant)):
            if val is not None:
                try:
                    rows = np.atleast_2d(np.asarray(val.detach().cpu().numpy() if hasattr(val, "detach") else val)
                                         .astype(int))
                except (TypeError, ValueError):
                    raise LogError(f"log_attention(): {key}: not integers") from None
                if rows.ndim != 2 or rows.shape[0] < E or rows.shape[1] != L:
                    raise LogError(f"log_attention(): {key}: shape {list(rows.shape)}; want [E, L] = [{E}, {L}]")
                meta[key] = rows[:E].tolist()
        self._maps.append((s, arrs, meta))
        self._step = s

    # -- writing -----------------------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.wait(self.flush_seconds):
            self.flush()  # never raises: what cannot be written is kept for the next flush

    def flush(self) -> None:
        """Write what is buffered now (the thread does every ``FLUSH_SECONDS``), with the heartbeat, in one
        transaction. A store that cannot be written (locked past its timeout, a full disk) keeps the points for
        the next flush and says so once on stderr; the training loop is never stopped by it."""
        with self._write:
            points = [self._points.popleft() for _ in range(len(self._points))]
            maps = [self._maps.popleft() for _ in range(len(self._maps))]
            if not points and not maps and self.ended is not None:
                return
            series: dict[str, tuple[list[int], list[float]]] = {}
            for s, vals in points:
                for k, v in vals.items():
                    steps, values = series.setdefault(k, ([], []))
                    steps.append(s)
                    values.append(v)
            for k, (steps, values) in series.items():
                self._observe(k, steps, values)
            try:
                with self.store.transaction():
                    for k, (steps, values) in series.items():
                        self.store.log_metrics_many(self.id, steps, {k: values})
                    for s, arrs, meta in maps:
                        self.store.log_attention(self.id, s, arrs, meta)
                    if self.det.step is not None and not self._plateau_written:
                        self.store.log_plateau(self.id, self.det.step)
                    if self.ended is None:
                        self.cancel_requested = self.store.heartbeat(self.id, max(self._step, 0)) or \
                            self.cancel_requested
            except Exception as e:  # noqa: BLE001 - locked, disk full, ...: kept for the next flush
                self._points.extendleft(reversed(points))
                self._maps.extendleft(reversed(maps))
                if not self._warned:
                    self._warned = True
                    print(f"sparse-tui: run {self.id}: cannot write to {self.store.path} ({e}); the points are kept"
                          " in memory and written when it can be", file=sys.stderr, flush=True)
                return
            self._plateau_written = self.det.step is not None

    def _observe(self, k: str, steps: list[int], values: list[float]) -> None:
        """The run's last and best values and its plateau detector, from one metric's new points in step order
        (``Tracker.record``'s rules: the lowest finite ``*loss``, the highest finite ``*acc``)."""
        self.last[k] = values[-1]
        if k == self.metric and self.det.step is None:
            for s, v in zip(steps, values):
                if self.det.update(s, v) is not None:
                    break
        finite = values if all(map(math.isfinite, values)) else [v for v in values if math.isfinite(v)]
        if len(finite) < len(values) and k not in self.nonfinite:
            s, v = next((s, v) for s, v in zip(steps, values) if not math.isfinite(v))
            self.nonfinite[k] = s
            print(f"sparse-tui: run {self.id}: {k} is {v} at step {s} (kept as a gap in the curve)",
                  file=sys.stderr, flush=True)
        if finite and k.endswith("loss"):
            self.best[k] = min(self.best.get(k, math.inf), min(finite))
        elif finite and k.endswith("acc"):
            self.best[k] = max(self.best.get(k, -math.inf), max(finite))

    # -- the end -----------------------------------------------------------------------------------------------

    def finish(self, status: str | None = None, reason: str | None = None) -> str:
        """End the run: write what is buffered, then its terminal status (default ``finished``; ``cancelled``
        when it was asked to stop; ``diverged`` when its last ``*loss`` or plateau metric is not finite),
        summary and plateau step. A second call does nothing. Returns the status recorded."""
        if self.ended is not None:
            return self.ended
        if status is not None and status not in TERMINAL:
            raise LogError(f"finish(): status {status!r}: one of {', '.join(sorted(TERMINAL))}")
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)
        self.flush()
        if status is None:
            bad = [k for k, v in self.last.items() if not math.isfinite(v) and (k.endswith("loss") or k == self.metric)]
            if bad:
                status, reason = "diverged", f"non-finite {bad[0]} at step {self.nonfinite.get(bad[0], self._step)}"
            elif self.cancel_requested:
                status, reason = "cancelled", f"cancelled at step {self._step}"
            else:
                status = "finished"
        self.ended = status
        summary = {"final": dict(self.last), "best": dict(self.best), "steps_done": max(self._step, 0),
                   "wall_seconds": time.perf_counter() - self._started}
        if self.nonfinite:
            summary["nonfinite"] = dict(self.nonfinite)
        try:
            self.store.finish(self.id, status, reason=reason, plateau_step=self.det.step, summary=summary,
                              step=max(self._step, 0))
            self.store.drop_coordinator(self.batch_id)
        except (sqlite3.Error, OSError) as e:  # the reaper fails it when this process is gone
            print(f"sparse-tui: run {self.id}: cannot record its end in {self.store.path} ({e})", file=sys.stderr)
        if self in _OPEN:
            _OPEN.remove(self)
        return status

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.finish(*_ending(exc_type, exc, self._step))


def _number(key: Any, v: Any) -> float:
    if isinstance(v, (str, bytes)) or v is None or isinstance(v, Mapping):
        raise LogError(f"log(): {key!r}: {type(v).__name__} {_short(v)} is not a number (log numbers; attention"
                       " maps go to run.log_attention)")
    try:
        return float(v)
    except (TypeError, ValueError, RuntimeError):
        raise LogError(f"log(): {key!r}: {type(v).__name__} {_short(v)} is not a number (a one-element tensor or"
                       " array is)") from None


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _ending(exc_type: type, exc: BaseException | None, step: int) -> tuple[str, str]:
    """The status and reason of a run whose script raised ``exc``."""
    if issubclass(exc_type, KeyboardInterrupt):
        return "interrupted", f"interrupted at step {max(step, 0)}"
    text = str(exc).splitlines()[0] if exc is not None and str(exc) else ""
    return "failed", f"{exc_type.__name__}{': ' + text[:300] if text else ''} at step {max(step, 0)}"


# -- the process: exit and uncaught exceptions ---------------------------------------------------------------------

_OPEN: list[Run] = []  # runs of this process not yet finished
_UNCAUGHT: list[tuple[type, BaseException]] = []  # the exception that ends the script, seen by the hook
_HOOKED = False


def _excepthook(exc_type, exc, tb, _previous=sys.excepthook):
    _UNCAUGHT.append((exc_type, exc))
    _previous(exc_type, exc, tb)


def _at_exit() -> None:
    """End this process's open runs: ``failed`` / ``interrupted`` after an uncaught exception, else ``finished``."""
    for run in list(_OPEN):
        if run._pid != os.getpid():  # a forked child: its parent owns the run
            continue
        if _UNCAUGHT:
            run.finish(*_ending(*_UNCAUGHT[-1], run.step))
        else:
            run.finish()


def _hook() -> None:
    global _HOOKED
    if not _HOOKED:
        _HOOKED = True
        sys.excepthook = _excepthook
        atexit.register(_at_exit)


def init(name: str | None = None, config: Mapping[str, Any] | None = None, *, runs_dir: str | Path | None = None,
         group: str | None = None, tags: list[str] | tuple[str, ...] | None = None,
         plateau: Mapping[str, Any] | str | None = None, total_steps: int | None = None, device: str | None = None,
         flush_seconds: float = FLUSH_SECONDS) -> Run:
    """Start a run of your own training code in the run store ``runs_dir`` (default ``$SPARSE_TUI_RUNS`` or
    ``./runs``, as every command) and return it, ``running``.

    ``name``: what tells the run apart in its group (its label; default ``seed=S`` when the config has a seed).
    ``group``: the runs it belongs with, e.g. a sweep (stored as its preset: ``fit --preset GROUP``; default: the
    script's file name). ``config``: hyperparameters (nested dicts of numbers, strings, booleans, lists), stored as
    the run's parameter columns (``model.d_model``); an integer ``seed`` key groups runs by seed. ``tags``: words
    for ``runs --tag`` and the console's filter. ``plateau``: the emergence rule, as a preset's ``[plateau]``
    (``{"metric": "test/acc", "mode": "above", "value": 0.9}``; default test/loss to 0.2 of its initial value).
    ``total_steps``: for progress and ETA. ``device``: shown in the run table (default ``-``).

    LogError (one line naming the key) for an argument that cannot be stored; StoreError for a store that cannot
    be opened. Nothing is recorded then."""
    from sparse_tui.base.dotted import flatten
    from sparse_tui.presets.fields import MAX_NAME as MAX_GROUP
    from sparse_tui.presets.schema import tag_problem

    clean = clean_config(config)
    rule = plateau_rule(plateau)
    for key, text, limit in (("name", name, MAX_NAME), ("group", group, MAX_GROUP), ("device", device, 40)):
        if text is not None and (not isinstance(text, str) or not text.strip() or len(text) > limit
                                 or not text.isprintable()):
            raise LogError(f"{key}: a non-empty line of at most {limit} printable characters, got {_short(text)}")
    tags = list(tags or [])
    for t in tags:
        if (why := tag_problem(t)) is not None:
            raise LogError(f"tags: {why}")
    if total_steps is not None and (isinstance(total_steps, bool) or not isinstance(total_steps, int)
                                    or total_steps < 1):
        raise LogError(f"total_steps: a positive integer, got {total_steps!r}")
    if not (isinstance(flush_seconds, (int, float)) and 0 < flush_seconds <= 60):
        raise LogError(f"flush_seconds: a number of seconds in (0, 60], got {flush_seconds!r}")
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c", "-") else None
    preset = (group or (Path(script).stem if script else "python")).strip()
    seed = clean.get("seed")
    stored = {**clean, "plateau": rule, **({"tags": tags} if tags else {})}
    params = flatten({k: v for k, v in stored.items() if k != "tags"})
    label = (name or "").strip() or (f"seed={seed}" if seed is not None else "")
    versions = {"logged_by": LOGGED_BY, "sparse_tui": __version__, "python": platform.python_version()}
    if script:
        versions["script"] = script
    if "torch" in sys.modules:  # the script's own torch (never imported here)
        versions["torch"] = getattr(sys.modules["torch"], "__version__", "?")
    store = RunStore(runs_dir)
    if store.read_only:
        raise StoreError(f"{store.path}: the run store is read-only; cannot record runs here (pass another runs_dir)")
    # the run as ``store.create_runs`` reads a ``presets.RunSpec``: the store's one way of recording a run
    config = SimpleNamespace(model_dump=lambda mode: stored, train=SimpleNamespace(steps=total_steps))
    spec = SimpleNamespace(preset=preset, preset_path=script, label=lambda: label, config=config, params=params,
                           swept={}, seed=seed)
    batch_id, (run_id,) = store.create_runs([spec])
    store.claim_runs([run_id], device=device or "-", versions=versions)
    _hook()
    run = Run(store, run_id, batch_id, rule, flush_seconds=float(flush_seconds))
    _OPEN.append(run)
    return run
