"""Bridges to the tools researchers already use: ``sparse-tui export --to tensorboard DIR`` and
``--to mlflow [URI]`` (optional extras: ``pip install "sparse-tui[tensorboard]"``, ``"sparse-tui[mlflow]"``).

TensorBoard: one event file per run in ``DIR/<run name> <run id>/`` with every logged metric as a scalar at its
step, the run's parameters and final metrics for the HParams dashboard (the hparams plugin's protos, written the
way its own summary functions do, without TensorFlow), and the attention maps of the first test example as images
(``attention/L1/head0`` per snapshot step). The experiment summary (every parameter that varies, every final
metric) goes to ``DIR`` itself. Writing again into the same folder adds a new event file per run; TensorBoard
reads them together.

MLflow: one MLflow run per sparse-tui run, in the experiment named after the preset, with the parameters, the
metrics at their steps, the status, the tags (``tag`` = "true"), the note (``mlflow.note.content``) and the
sparse-tui run id (``sparse_tui.run_id``); a run exported before is skipped (matched by that id). The default
tracking store is SQLite beside the run store: ``sqlite:///RUNS_DIR/mlflow.db``.

Nothing here imports torch or Textual, and each tool's library is imported only when its bridge is used: a missing
extra is one line naming the ``pip install``.
"""

from __future__ import annotations

import json
import math
import re
import struct
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable

from sparse_tui.plotting import ramp
from sparse_tui.store import RunRecord, RunStore

BRIDGES = ("tensorboard", "mlflow")
INSTALL = {"tensorboard": 'pip install "sparse-tui[tensorboard]"', "mlflow": 'pip install "sparse-tui[mlflow]"'}
FINAL = ("test/loss", "test/acc", "train/loss")  # the HParams dashboard's metrics (when the runs logged them)
IMAGE_SCALE = 8  # pixels per attention cell in the images


class BridgeError(Exception):
    """A bridge that cannot run (missing extra, unwritable target): one line."""


def run_dir_name(rec: RunRecord) -> str:
    """A run's folder in the TensorBoard log dir: its name and id, safe as one path component."""
    name = rec.name
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "_", name).strip("_")[:80] + f"_{rec.run_id}"


def hparam_values(rec: RunRecord) -> dict[str, Any]:
    """A run's parameters as numbers, texts or booleans (lists as JSON), and its preset and seed."""
    out: dict[str, Any] = {"preset": rec.preset}
    for k, v in sorted(rec.params.items()):
        if k not in ("name", "description") and v is not None:
            out[k] = v if isinstance(v, (bool, int, float, str)) else json.dumps(v)
    return out


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
    rows = []
    for row in matrix:
        line = []
        for v in row:
            v = float(v)
            px = ramp(min(1.0, max(0.0, v))) if math.isfinite(v) else (40, 40, 40)
            line += [tuple(int(c) for c in px)] * scale
        rows += [line] * scale
    return _png(rows), len(rows), len(rows[0]) if rows else 0


def _hparams_summaries(rec_values: dict[str, Any], infos: dict[str, str], metrics: list[str]):
    """(experiment, session start, session end) summaries of the HParams plugin."""
    from google.protobuf import struct_pb2
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    types = {"number": api_pb2.DATA_TYPE_FLOAT64, "string": api_pb2.DATA_TYPE_STRING,
             "bool": api_pb2.DATA_TYPE_BOOL}
    exp = api_pb2.Experiment(
        hparam_infos=[api_pb2.HParamInfo(name=k, type=types[t]) for k, t in infos.items()],
        metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=m)) for m in metrics],
    )
    start = plugin_data_pb2.SessionStartInfo(start_time_secs=time.time())
    for k, v in rec_values.items():
        if isinstance(v, bool):
            start.hparams[k].CopyFrom(struct_pb2.Value(bool_value=v))
        elif isinstance(v, (int, float)):
            start.hparams[k].CopyFrom(struct_pb2.Value(number_value=float(v)))
        else:
            start.hparams[k].CopyFrom(struct_pb2.Value(string_value=str(v)))
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.STATUS_SUCCESS, end_time_secs=time.time())

    def summary(tag: str, **data) -> Summary:
        meta = metadata.create_summary_metadata(plugin_data_pb2.HParamsPluginData(**data))
        return Summary(value=[Summary.Value(tag=tag, metadata=meta, tensor=metadata.NULL_TENSOR)])

    return (summary(metadata.EXPERIMENT_TAG, experiment=exp),
            summary(metadata.SESSION_START_INFO_TAG, session_start_info=start),
            summary(metadata.SESSION_END_INFO_TAG, session_end_info=end))


def _writer(folder: Path):
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder.mkdir(parents=True, exist_ok=True)
    return EventFileWriter(str(folder))


def _event(summary=None, step: int = 0, wall: float | None = None):
    from tensorboard.compat.proto.event_pb2 import Event

    return Event(summary=summary, step=int(step), wall_time=wall if wall is not None else time.time())


def to_tensorboard(store: RunStore, runs: list[RunRecord], folder: Path,
                   say: Callable[[str], None] = lambda _: None) -> int:
    """Write the runs as TensorBoard event files under ``folder`` (see the module docstring). Returns how many."""
    try:
        from tensorboard.compat.proto.summary_pb2 import Summary
    except ImportError:
        raise BridgeError(f"--to tensorboard needs TensorBoard: {INSTALL['tensorboard']}") from None
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BridgeError(f"{folder}: cannot create the folder: {e.strerror or e}") from None
    values = {r.run_id: hparam_values(r) for r in runs}
    finals = {r.run_id: final_values(store, r) for r in runs}
    infos: dict[str, str] = {}
    for vals in values.values():
        for k, v in vals.items():
            infos.setdefault(k, "bool" if isinstance(v, bool) else "number" if isinstance(v, (int, float)) else "string")
    varying = {k: t for k, t in infos.items() if len({repr(v.get(k)) for v in values.values()}) > 1 or len(runs) == 1}
    metrics = sorted({m for f in finals.values() for m in f})
    top = _writer(folder)
    exp, _, _ = _hparams_summaries({}, varying, metrics)
    top.add_event(_event(exp))
    top.close()
    for rec in runs:
        w = _writer(folder / run_dir_name(rec))
        base = rec.started_at or rec.created_at or time.time()
        for name, (steps, vals) in store.metrics(rec.run_id).items():
            for s, v in zip(steps, vals):
                if v is not None and math.isfinite(v):
                    w.add_event(_event(Summary(value=[Summary.Value(tag=name, simple_value=float(v))]), s, base))
        last_step = rec.step or 0
        for tag, v in finals[rec.run_id].items():
            w.add_event(_event(Summary(value=[Summary.Value(tag=tag, simple_value=v)]), last_step, base))
        _, start, end = _hparams_summaries({k: v for k, v in values[rec.run_id].items() if k in varying}, varying,
                                           metrics)
        w.add_event(_event(start, 0, base))
        for step in store.attention_steps(rec.run_id):
            maps, _meta = store.attention(rec.run_id, step)
            for layer in sorted(maps):
                a = maps[layer]  # [H, E, Lq, L]
                for h in range(a.shape[0]):
                    png, height, width = attention_png(a[h, 0])
                    img = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=png)
                    w.add_event(_event(Summary(value=[Summary.Value(tag=f"attention/{layer}/head{h}", image=img)]),
                                       step, base))
        w.add_event(_event(end, last_step, base))
        w.close()
        say(f"{rec.run_id} -> {folder / run_dir_name(rec)}")
    return len(runs)


# -- MLflow ----------------------------------------------------------------------------------------------------


def default_mlflow_uri(store: RunStore) -> str:
    return f"sqlite:///{(store.runs_dir / 'mlflow.db').resolve()}"


def to_mlflow(store: RunStore, runs: list[RunRecord], uri: str | None = None,
              say: Callable[[str], None] = lambda _: None) -> tuple[int, int]:
    """Log the runs to an MLflow tracking store (see the module docstring). Returns (logged, skipped: exported
    before)."""
    try:
        import logging

        logging.getLogger("alembic").setLevel(logging.WARNING)
        logging.getLogger("mlflow").setLevel(logging.WARNING)
        from mlflow import MlflowClient
        from mlflow.entities import Metric, Param, RunTag
    except ImportError:
        raise BridgeError(f"--to mlflow needs MLflow: {INSTALL['mlflow']}") from None
    uri = uri or default_mlflow_uri(store)
    try:
        client = MlflowClient(tracking_uri=uri)
    except Exception as e:  # noqa: BLE001 - a bad URI: one line
        raise BridgeError(f"--to mlflow {uri}: {str(e).splitlines()[0]}") from None
    logged = skipped = 0
    experiments: dict[str, str] = {}
    for rec in runs:
        name = rec.preset or "sparse-tui"
        if name not in experiments:
            exp = client.get_experiment_by_name(name)
            experiments[name] = exp.experiment_id if exp is not None else client.create_experiment(name)
        eid = experiments[name]
        found = client.search_runs([eid], filter_string=f"tags.`sparse_tui.run_id` = '{rec.run_id}'", max_results=1)
        if found:
            skipped += 1
            continue
        tags = {"sparse_tui.run_id": rec.run_id, "sparse_tui.batch_id": rec.batch_id, "sparse_tui.status": rec.status,
                "sparse_tui.preset": rec.preset}
        tags.update({t: "true" for t in rec.tags})
        if rec.note:
            tags["mlflow.note.content"] = rec.note
        stamp = int((rec.started_at or rec.created_at) * 1000)
        rid = client.create_run(eid, start_time=stamp, run_name=f"{rec.name} {rec.run_id}").info.run_id
        params = [Param(k, str(v)[:6000]) for k, v in hparam_values(rec).items()]
        metrics = []
        for key, (steps, vals) in store.metrics(rec.run_id).items():
            metrics += [Metric(key, float(v), stamp, int(s)) for s, v in zip(steps, vals)
                        if v is not None and math.isfinite(v)]
        for key, v in final_values(store, rec).items():
            metrics.append(Metric(key, v, stamp, int(rec.step or 0)))
        tag_list = [RunTag(k, v) for k, v in tags.items()]
        for kind, items, limit in (("params", params, 100), ("metrics", metrics, 1000), ("tags", tag_list, 100)):
            for i in range(0, len(items), limit):  # MLflow's limits per call
                client.log_batch(rid, **{kind: items[i:i + limit]})
        status = {"finished": "FINISHED", "running": "RUNNING", "queued": "SCHEDULED"}.get(rec.status, "FAILED")
        if status in ("FINISHED", "FAILED"):
            client.set_terminated(rid, status=status,
                                  end_time=int((rec.ended_at or time.time()) * 1000))
        logged += 1
        say(f"{rec.run_id} -> MLflow run {rid} (experiment {name})")
    return logged, skipped


def export_to(target: str, store: RunStore, runs: Iterable[RunRecord], dest: str | None,
              say: Callable[[str], None] = lambda _: None) -> str:
    """The command line's ``--to``: write ``runs`` to ``target`` at ``dest`` and return the line that says what was
    done. Raises ``BridgeError``."""
    runs = list(runs)
    if target == "tensorboard":
        folder = Path(dest) if dest else store.runs_dir / "tensorboard"
        n = to_tensorboard(store, runs, folder, say)
        return f"wrote {n} run(s) as TensorBoard event files under {folder.resolve()} (tensorboard --logdir {folder})"
    if target == "mlflow":
        uri = dest or default_mlflow_uri(store)
        n, skipped = to_mlflow(store, runs, uri, say)
        more = f"; {skipped} exported before, skipped" if skipped else ""
        return f"logged {n} run(s) to MLflow at {uri}{more} (mlflow ui --backend-store-uri {uri})"
    raise BridgeError(f"--to: must be one of {', '.join(BRIDGES)}, got {target!r}")
