"""Bridges to the tools researchers already use: ``sparse-tui export --to tensorboard DIR`` and
``--to mlflow [URI]`` (optional extras: ``pip install "sparse-tui[tensorboard]"``, ``"sparse-tui[mlflow]"``).
Both round-trip (issue 34 item 6; tests/test_bridges.py reads them back with the tools' own readers).

TensorBoard: one event file per run in ``DIR/<run name>_<run id>/`` with every logged metric as a scalar at its
step, the final metrics, the HParams plugin's session (every parameter of the run, its preset and seed: the same
whatever is exported with it), the tags and the note as text (``sparse_tui/tags``, ``sparse_tui/note``) and the
attention maps of the first test example as images (``attention/L1/head0`` per snapshot step). The experiment
summary (the union of the hparams and final metrics of every run exported into ``DIR``) goes to ``DIR`` itself.
A point's wall time is the time the store logged it (``store.reads.step_clock``); a store from before those times
were kept has its points' interpolated linearly in the step between the run's start and end. The files are
sparse-tui's own, named per run and written by the one file writer (files.py): exporting again replaces them, so a
re-export never doubles a curve.

MLflow: one MLflow run per sparse-tui run, in the experiment named after the preset, with the parameters, the
metrics at their steps, the status, the tags (``tag`` = "true"), the note (``mlflow.note.content``) and the
sparse-tui run id (``sparse_tui.run_id``). A run exported before is skipped (matched by that id), or with
``--update`` brought up to date: changed tags and note, metric points past the last exported step, a status that
ended since. The default tracking store is SQLite beside the run store (``sqlite:///RUNS_DIR/mlflow.db``); a path
without a scheme is a path, never a run id (``X.db``: that SQLite file; else a folder holding ``mlflow.db``). Before
anything is written the target is
checked: not the run store itself, a parent folder that exists (``--mkdir`` creates it) and can be written. Every
MLflow call runs in a daemon thread under ``--timeout`` seconds (default 30): an unreachable server or a locked
database is one line, exit 2, never minutes of retries.

Nothing here imports torch or Textual, and each tool's library is imported only when its bridge is used: a missing
extra is one line naming the ``pip install``.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
import threading
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import unquote, urlparse

from sparse_tui.base.files import WriteError, causes, first_line, write_file
from sparse_tui.base.plotting import ramp
from sparse_tui.store import RunRecord, RunStore
from sparse_tui.store.reads import step_clock

BRIDGES = ("tensorboard", "mlflow")
INSTALL = {"tensorboard": 'pip install "sparse-tui[tensorboard]"', "mlflow": 'pip install "sparse-tui[mlflow]"'}
# What each viewer needs: the [mlflow] extra is mlflow-skinny (the client), whose `mlflow ui` has no server (flask)
VIEWER = {"tensorboard": "tensorboard --logdir {dest}",
          "mlflow": "mlflow ui --backend-store-uri {dest}; the UI needs the full package: pip install mlflow"}
FINAL = ("test/loss", "test/acc", "train/loss")  # the HParams dashboard's metrics (when the runs logged them)
IMAGE_SCALE = 8  # pixels per attention cell in the images
TIMEOUT = 30.0  # seconds each MLflow call may take (--timeout)
EVENTS = "events.out.tfevents.sparse-tui"  # our event files' names start so (TensorBoard reads any *tfevents*)


class BridgeError(Exception):
    """A bridge that cannot run (missing extra, unwritable target, a call that failed or did not answer): one
    line. ``stuck``: a call is still running in its thread (the caller should leave without waiting for it).
    ``disk_full``: the disk (or quota) ran out, exit 1 as for training (docs/USAGE.md), not a usage error."""

    def __init__(self, message: str, stuck: bool = False, cause: BaseException | None = None):
        super().__init__(message)
        self.stuck = stuck
        self.disk_full = cause is not None and _disk_full(cause)


def _disk_full(e: BaseException) -> bool:
    """Whether ``e`` (or what it was raised from) says the disk is full: ENOSPC / EDQUOT, or SQLite's words."""
    from sparse_tui.store.records import is_disk_full

    return any(is_disk_full(c) or "disk is full" in str(c).lower() or "no space left" in str(c).lower()
               for c in causes(e))


def run_dir_name(rec: RunRecord) -> str:
    """A run's folder in the TensorBoard log dir: its name and id, safe as one path component."""
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "_", rec.name).strip("_")[:80] + f"_{rec.run_id}"


def hparam_values(rec: RunRecord) -> dict[str, Any]:
    """A run's parameters as numbers, texts or booleans (lists as JSON), its preset and its seed: the same for a
    run whatever is exported with it."""
    out: dict[str, Any] = {"preset": rec.preset, "seed": rec.seed}
    for k, v in sorted(rec.params.items()):
        if k not in ("name", "description") and v is not None:
            out[k] = v if isinstance(v, (bool, int, float, str)) else json.dumps(v)
    return {k: v for k, v in out.items() if v is not None}


def final_values(store: RunStore, rec: RunRecord) -> dict[str, float]:
    final = dict(rec.final or store.last_metrics(rec.run_id))
    out = {f"final/{k}": float(final[k]) for k in FINAL if k in final and final[k] is not None
           and math.isfinite(final[k])}
    if rec.plateau_step is not None:
        out["final/plateau_step"] = float(rec.plateau_step)
    return out


# -- TensorBoard -----------------------------------------------------------------------------------------------


def _png(rgb: list[list[tuple[int, int, int]]]) -> bytes:
    """An RGB image (rows of (r, g, b)) as PNG bytes (zlib only)."""
    h, w = len(rgb), len(rgb[0]) if rgb else 0
    raw = b"".join(b"\x00" + bytes(c for px in row for c in px) for row in rgb)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def attention_png(matrix: Any, scale: int = IMAGE_SCALE) -> tuple[bytes, int, int]:
    """An attention map [Lq, L] (values 0-1) as a PNG in the console's colour ramp, each cell ``scale`` pixels."""
    rows = [[ramp(float(v)) for v in row for _ in range(scale)] for row in matrix for _ in range(scale)]
    return _png(rows), len(rows), len(rows[0]) if rows else 0


_STATUS = {"finished": "STATUS_SUCCESS", "running": "STATUS_RUNNING", "queued": "STATUS_RUNNING",
           "interrupted": "STATUS_ABORTED", "cancelled": "STATUS_ABORTED"}  # else (failed, diverged): failure


def _kind(v: Any) -> str:
    """An hparam's type in the HParams plugin: bool, number or string."""
    return "bool" if isinstance(v, bool) else "number" if isinstance(v, (int, float)) else "string"


def _hparams_summaries(rec_values: dict[str, Any], infos: dict[str, str], metrics: list[str], status: str = "",
                       start_time: float = 0.0, end_time: float = 0.0):
    """(experiment, session start, session end) summaries of the HParams plugin."""
    from google.protobuf import struct_pb2
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    types = {"number": api_pb2.DATA_TYPE_FLOAT64, "string": api_pb2.DATA_TYPE_STRING,
             "bool": api_pb2.DATA_TYPE_BOOL}
    exp = api_pb2.Experiment(
        hparam_infos=[api_pb2.HParamInfo(name=k, type=types[t]) for k, t in sorted(infos.items())],
        metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=m)) for m in sorted(metrics)],
    )
    start = plugin_data_pb2.SessionStartInfo(start_time_secs=start_time)
    for k, v in rec_values.items():
        kind = _kind(v)
        start.hparams[k].CopyFrom(struct_pb2.Value(**{f"{kind}_value": float(v) if kind == "number" else v}))
    end = plugin_data_pb2.SessionEndInfo(status=getattr(api_pb2, _STATUS.get(status, "STATUS_FAILURE")),
                                         end_time_secs=end_time)

    def summary(tag: str, **data) -> Summary:
        meta = metadata.create_summary_metadata(plugin_data_pb2.HParamsPluginData(**data))
        return Summary(value=[Summary.Value(tag=tag, metadata=meta, tensor=metadata.NULL_TENSOR)])

    return (summary(metadata.EXPERIMENT_TAG, experiment=exp),
            summary(metadata.SESSION_START_INFO_TAG, session_start_info=start),
            summary(metadata.SESSION_END_INFO_TAG, session_end_info=end))


def _text(tag: str, text: str):
    """A text summary (TensorBoard's Text dashboard), built as its own summary function does, without TF."""
    from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2, types_pb2
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.text import metadata

    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[text.encode("utf-8")],
                                    tensor_shape=tensor_shape_pb2.TensorShapeProto())
    return Summary(value=[Summary.Value(tag=tag, metadata=metadata.create_summary_metadata(tag, ""),
                                        tensor=tensor)])


def _event(summary=None, step: int = 0, wall: float = 0.0):
    from tensorboard.compat.proto.event_pb2 import Event

    return Event(summary=summary, step=int(step), wall_time=wall)


def _write_events(path: Path, events: list) -> None:
    """One event file, all or nothing, by the one file writer (no writer thread: an error is one line)."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.summary.writer.record_writer import RecordWriter

    def fill(fh) -> None:
        rw = RecordWriter(fh)
        first = events[0].wall_time if events else time.time()
        rw.write(Event(wall_time=first, file_version="brain.Event:2").SerializeToString())
        for ev in events:
            rw.write(ev.SerializeToString())

    try:
        write_file(path, fill, binary=True)
    except WriteError as e:
        raise BridgeError(f"--to tensorboard {e}", cause=e) from None


def _replace_events(folder: Path, name: str, events: list) -> None:
    """Write ``folder/name`` and remove the other event files sparse-tui wrote there before (a re-export)."""
    _write_events(folder / name, events)
    for old in folder.glob(f"{EVENTS}*"):
        if old.name != name:
            try:
                old.unlink()
            except OSError:
                pass


def _previous_experiment(path: Path) -> tuple[dict[str, str], set[str]]:
    """The hparams (name -> type) and metrics of the experiment summary an earlier export left at ``path``."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import api_pb2, metadata

    names = {api_pb2.DATA_TYPE_FLOAT64: "number", api_pb2.DATA_TYPE_STRING: "string", api_pb2.DATA_TYPE_BOOL: "bool"}
    infos: dict[str, str] = {}
    metrics: set[str] = set()
    if not path.is_file():
        return infos, metrics
    try:
        for ev in EventFileLoader(str(path)).Load():
            for v in ev.summary.value:
                if v.tag == metadata.EXPERIMENT_TAG:
                    exp = metadata.parse_experiment_plugin_data(v.metadata.plugin_data.content)
                    infos.update({h.name: names.get(h.type, "string") for h in exp.hparam_infos})
                    metrics.update(m.name.tag for m in exp.metric_infos)
    except Exception:  # noqa: BLE001 - a damaged summary of ours is rewritten from this export
        pass
    return infos, metrics


def folder_problem(folder: Path, mkdir: bool) -> str | None:
    """Why ``folder`` cannot take the export (checked before anything is written), None when it can."""
    if folder.exists() and not folder.is_dir():
        return f"{folder}: not a directory"
    if not folder.exists():
        parent = Path(os.path.abspath(folder)).parent
        if not parent.is_dir() and not mkdir:
            return f"{folder}: directory {parent} does not exist (--mkdir creates it)"
        return None
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder}: directory is not writable"
    return None


def _mkdir(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BridgeError(f"--to tensorboard {folder}: cannot create the folder: {e.strerror or e}", cause=e) \
            from None


def to_tensorboard(store: RunStore, runs: list[RunRecord], folder: Path, say: Callable[[str], None] = lambda _: None,
                   mkdir: bool = False) -> int:
    """Write the runs as TensorBoard event files under ``folder`` (see the module docstring). Returns how many."""
    try:
        from tensorboard.compat.proto.summary_pb2 import Summary
    except ImportError:
        raise BridgeError(f"--to tensorboard needs TensorBoard: {INSTALL['tensorboard']}") from None
    folder = Path(folder)
    why = folder_problem(folder, mkdir)
    if why:
        raise BridgeError(f"--to tensorboard {why}")
    _mkdir(folder)
    values = {r.run_id: hparam_values(r) for r in runs}
    finals = {r.run_id: final_values(store, r) for r in runs}
    top_name = f"{EVENTS}.experiment"
    infos, metrics = _previous_experiment(folder / top_name)
    for vals in values.values():
        for k, v in vals.items():
            infos.setdefault(k, _kind(v))
    metrics |= {m for f in finals.values() for m in f}
    exp, _, _ = _hparams_summaries({}, infos, sorted(metrics))
    _replace_events(folder, top_name, [_event(exp, 0, time.time())])
    for rec in runs:
        start, end, wall = step_clock(rec, *store.metric_times(rec.run_id))
        last_step = rec.step or 0
        _, hp_start, hp_end = _hparams_summaries(values[rec.run_id], infos, sorted(metrics), rec.status, start, end)
        events = [_event(hp_start, 0, start)]
        events += [_event(_text(f"sparse_tui/{tag}", text), 0, start)
                   for tag, text in (("tags", " ".join(rec.tags)), ("note", rec.note)) if text]

        def scalar(tag: str, v: float, step: int, when: float):
            return _event(Summary(value=[Summary.Value(tag=tag, simple_value=float(v))]), step, when)

        events += [scalar(name, v, st, wall(st)) for name, (steps, vals) in store.metrics(rec.run_id).items()
                   for st, v in zip(steps, vals) if v is not None and math.isfinite(v)]
        events += [scalar(tag, v, last_step, end) for tag, v in finals[rec.run_id].items()]
        for step in store.attention_steps(rec.run_id):
            maps, _meta = store.attention(rec.run_id, step)
            for layer in sorted(maps):
                a = maps[layer]  # [H, E, Lq, L]
                for h in range(a.shape[0]):
                    png, height, width = attention_png(a[h, 0])
                    img = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=png)
                    events.append(_event(Summary(value=[Summary.Value(tag=f"attention/{layer}/head{h}", image=img)]),
                                         step, wall(step)))
        events.append(_event(hp_end, last_step, end))
        events.sort(key=lambda ev: (ev.step, ev.wall_time))
        run_folder = folder / run_dir_name(rec)
        _mkdir(run_folder)
        _replace_events(run_folder, f"{EVENTS}.{rec.run_id}", events)
        say(f"{rec.run_id} -> {run_folder}")
    return len(runs)


# -- MLflow ----------------------------------------------------------------------------------------------------


def mlflow_uri(dest: str | None, store: RunStore) -> str:
    """The tracking URI of ``--to mlflow [DEST]``: the default beside the store, a URI as given, or a path without a
    scheme as a path: a ``.db`` file is that SQLite store, any other path a folder holding ``mlflow.db`` (MLflow 3
    refuses its ``file:`` store by default: it is in maintenance mode)."""
    if not dest:
        return f"sqlite:///{(store.runs_dir / 'mlflow.db').resolve()}"
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", dest):
        return dest
    path = Path(dest).expanduser().absolute()
    return f"sqlite:///{path if path.suffix == '.db' else path / 'mlflow.db'}"


def _local_path(uri: str) -> tuple[str, Path] | None:
    """("sqlite" or "file", the path) of a local tracking store's URI, None for a server or other scheme."""
    if uri.startswith("sqlite:///"):
        return "sqlite", Path(unquote(uri[len("sqlite:///"):].split("?")[0]))
    if uri.startswith("file:"):
        parsed = urlparse(uri)
        return "file", Path(unquote(parsed.path or uri[len("file:"):]))
    return None


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b) or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def mlflow_problem(uri: str, store: RunStore, mkdir: bool = False) -> str | None:
    """Why the tracking store ``uri`` must not be written (before anything is): the run store itself (through any
    symlink), a missing parent folder (unless ``mkdir``), a folder or file that cannot be written. None: go on."""
    local = _local_path(uri)
    if local is None:
        return None
    kind, path = local
    if _same(path, store.path) or (kind == "file" and _same(path, store.runs_dir)):
        return f"{uri}: that is the run store itself ({store.path}); MLflow would write its tables into it"
    parent = Path(os.path.abspath(path)).parent
    if not parent.is_dir():
        return None if mkdir else f"{uri}: directory {parent} does not exist (--mkdir creates it)"
    target = path if path.exists() else parent
    if not os.access(target, os.W_OK):
        return f"{uri}: {'file' if target == path else 'directory'} {target} is not writable"
    return None


class _Limited:
    """An ``MlflowClient`` whose every call runs in a daemon thread and is given up after ``timeout`` seconds."""

    def __init__(self, make: Callable[[], Any], uri: str, timeout: float):
        self.uri, self.timeout = uri, timeout
        self.client = self._run(make, "opening the tracking store")

    def _run(self, fn: Callable[[], Any], what: str) -> Any:
        box: dict[str, Any] = {}

        def go() -> None:
            try:
                box["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - reported below, in one line
                box["error"] = e

        t = threading.Thread(target=go, name="sparse-tui-mlflow", daemon=True)
        t.start()
        t.join(self.timeout)
        if t.is_alive():
            raise BridgeError(f"--to mlflow {self.uri}: {what} did not answer within {self.timeout:g} s (--timeout "
                              "to wait longer)", stuck=True)
        if "error" in box:
            raise BridgeError(f"--to mlflow {self.uri}: {what} failed: {first_line(box['error'])}",
                              cause=box["error"])
        return box.get("value")

    def __getattr__(self, name: str) -> Callable[..., Any]:
        fn = getattr(self.client, name)
        return lambda *a, **kw: self._run(lambda: fn(*a, **kw), f"MLflow's {name}")


def _mlflow_client(uri: str, timeout: float, say: Callable[[str], None]) -> tuple[_Limited, Any]:
    """(the limited client, mlflow.entities) for ``uri``; the first use of MLflow takes seconds: it is said."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # a server that is down: one try, then the line
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(max(1, int(timeout))))
    say(f"MLflow: loading the library and opening {uri} (the first use takes a few seconds)")
    try:  # imported here, outside the time limit: a slow import on a busy machine is not a hang
        import logging

        logging.getLogger("alembic").setLevel(logging.WARNING)
        logging.getLogger("mlflow").setLevel(logging.WARNING)
        import mlflow.entities
        from mlflow import MlflowClient
    except ImportError:
        raise BridgeError(f"--to mlflow needs MLflow: {INSTALL['mlflow']}") from None
    return _Limited(lambda: MlflowClient(tracking_uri=uri), uri, timeout), mlflow.entities


def _mlflow_tags(rec: RunRecord) -> dict[str, str]:
    tags = {"sparse_tui.run_id": rec.run_id, "sparse_tui.batch_id": rec.batch_id, "sparse_tui.status": rec.status,
            "sparse_tui.preset": rec.preset, "sparse_tui.tags": " ".join(rec.tags)}
    tags.update({t: "true" for t in rec.tags})
    if rec.note:
        tags["mlflow.note.content"] = rec.note
    return tags


def _log(client: _Limited, rid: str, params: list, metrics: list, tags: list) -> None:
    for kind, items, limit in (("params", params, 100), ("metrics", metrics, 1000), ("tags", tags, 100)):
        for i in range(0, len(items), limit):  # MLflow's limits per call
            client.log_batch(rid, **{kind: items[i:i + limit]})


def to_mlflow(store: RunStore, runs: list[RunRecord], uri: str, say: Callable[[str], None], *,
              timeout: float = TIMEOUT, update: bool = False, mkdir: bool = False) -> tuple[int, int, int]:
    """Log the runs to an MLflow tracking store (see the module docstring). Returns (logged, updated: exported
    before and brought up to date with ``update``, skipped: exported before)."""
    why = mlflow_problem(uri, store, mkdir)
    if why:
        raise BridgeError(f"--to mlflow {why}")
    local = _local_path(uri)
    if mkdir and local is not None:
        try:
            Path(os.path.abspath(local[1])).parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BridgeError(f"--to mlflow {uri}: cannot create its folder: {e.strerror or e}", cause=e) from None
    client, E = _mlflow_client(uri, timeout, say)
    logged = updated = skipped = 0
    experiments: dict[str, str] = {}
    for rec in runs:
        name = rec.preset or "sparse-tui"
        if name not in experiments:
            exp = client.get_experiment_by_name(name)
            experiments[name] = exp.experiment_id if exp is not None else client.create_experiment(name)
        eid = experiments[name]
        found = client.search_runs([eid], filter_string=f"tags.`sparse_tui.run_id` = '{rec.run_id}'", max_results=1)
        if found and not update:
            skipped += 1
            continue
        start, end, wall = step_clock(rec, *store.metric_times(rec.run_id))
        series = store.metrics(rec.run_id)
        finals = final_values(store, rec)
        tags = _mlflow_tags(rec)
        status = {"finished": "FINISHED", "running": "RUNNING", "queued": "SCHEDULED"}.get(rec.status, "FAILED")
        if found:
            old = found[0]
            rid = old.info.run_id
            gone = [t for t in old.data.tags.get("sparse_tui.tags", "").split() if t not in rec.tags]
            gone += ["mlflow.note.content"] if "mlflow.note.content" in old.data.tags and not rec.note else []
            for t in gone:
                client.delete_tag(rid, t)
            since = {k: max((m.step for m in client.get_metric_history(rid, k)), default=-1)
                     for k in set(series) | set(finals)}
        else:
            rid = client.create_run(eid, start_time=int(start * 1000), run_name=f"{rec.name} {rec.run_id}").info.run_id
            since = {}
        metrics = []
        for key, (steps, vals) in series.items():
            metrics += [E.Metric(key, float(v), int(wall(s) * 1000), int(s)) for s, v in zip(steps, vals)
                        if v is not None and math.isfinite(v) and int(s) > since.get(key, -1)]
        last = int(rec.step or 0)
        metrics += [E.Metric(k, v, int(end * 1000), last) for k, v in finals.items() if last > since.get(k, -1)]
        params = [] if found else [E.Param(k, str(v)[:6000]) for k, v in hparam_values(rec).items()]
        _log(client, rid, params, metrics, [E.RunTag(k, v) for k, v in tags.items()])
        if status in ("FINISHED", "FAILED") and (not found or found[0].info.status != status):
            client.set_terminated(rid, status=status, end_time=int(end * 1000))
        if found:
            updated += 1
            say(f"{rec.run_id} -> MLflow run {rid} (experiment {name}): updated, {len(metrics)} new point(s)")
        else:
            logged += 1
            say(f"{rec.run_id} -> MLflow run {rid} (experiment {name})")
    return logged, updated, skipped


def export_to(target: str, store: RunStore, runs: Iterable[RunRecord], dest: str | None,
              say: Callable[[str], None] = lambda _: None, *, mkdir: bool = False, timeout: float = TIMEOUT,
              update: bool = False) -> str:
    """The command line's ``--to``: write ``runs`` to ``target`` at ``dest`` and return the line that says what was
    done. Raises ``BridgeError``."""
    runs = list(runs)
    if target == "tensorboard":
        folder = Path(dest) if dest else store.runs_dir / "tensorboard"
        n = to_tensorboard(store, runs, folder, say, mkdir=mkdir)
        return (f"wrote {n} run(s) as TensorBoard event files under {folder.resolve()} "
                f"({VIEWER['tensorboard'].format(dest=folder)})")
    if target == "mlflow":
        uri = mlflow_uri(dest, store)
        n, updated, skipped = to_mlflow(store, runs, uri, say, timeout=timeout, update=update, mkdir=mkdir)
        more = f"; {updated} exported before, updated" if updated else ""
        more += f"; {skipped} exported before, skipped (--update brings their changes)" if skipped else ""
        return f"logged {n} run(s) to MLflow at {uri}{more} ({VIEWER['mlflow'].format(dest=uri)})"
    raise BridgeError(f"--to: must be one of {', '.join(BRIDGES)}, got {target!r}")
