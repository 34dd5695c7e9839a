"""Blog 3's embedding-geometry view: the plane (PCA) and order numbers, the stored final embedding (schema 5), the
training loop writing it for each run of a stack, its figure and `show --plot`."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sparse_tui.executors import LocalExecutor
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.science import geometry
from sparse_tui.store import RunStore, StoreError

ROOT = Path(__file__).resolve().parent.parent


def _planted(V: int = 20, D: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token v at v·u + (v − mean)²/V·w + offset in D dimensions (u, w orthonormal): an ordered arc."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(D, D)))
    u, w = Q[:, 0], Q[:, 1]
    v = np.arange(V, dtype=float)
    E = np.outer(v, u) + np.outer((v - v.mean()) ** 2 / V, w) + rng.normal(size=D)
    return E, u, w


def test_pca_of_a_planted_embedding_recovers_its_plane_with_value_growing_along_pc1():
    E, u, w = _planted()
    pl = geometry.plane(E)
    assert pl.axes == ("PC1", "PC2") and pl.xy.shape == (20, 2)
    assert pl.explained == pytest.approx(1.0, abs=1e-9)  # the arc lies in span(u, w)
    v = np.arange(20) - 9.5
    assert np.allclose(pl.xy[:, 0], v, atol=0.35)  # PC1 is u (signed: value grows along it), centred
    assert np.all(np.diff(pl.xy[:, 0]) > 0)
    assert abs(np.corrcoef(pl.xy[:, 1], v**2)[0, 1]) > 0.99  # PC2 holds the bend of the arc
    flipped = geometry.plane(-E)  # the same embedding mirrored draws the same way
    assert np.allclose(flipped.xy[:, 0], pl.xy[:, 0])
    noisy = E + np.random.default_rng(1).normal(scale=0.5, size=E.shape)
    assert 0.9 < geometry.plane(noisy).explained < 1.0


def test_plane_draws_small_embeddings_as_they_are_and_refuses_non_matrices():
    E2 = np.arange(12.0).reshape(6, 2)
    assert np.array_equal(geometry.plane(E2).xy, E2) and geometry.plane(E2).axes == ("e1", "e2")
    one = geometry.plane(np.arange(5.0)[:, None])
    assert np.array_equal(one.xy[:, 0], np.arange(5.0)) and not one.xy[:, 1].any()
    with pytest.raises(ValueError, match=r"\[V, D\]"):
        geometry.plane(np.zeros(5))


def test_order_tells_an_ordered_embedding_from_a_shuffled_one():
    E, _, _ = _planted(V=32, D=4)
    o = geometry.order(E)
    assert o["neighbours"] == 1.0 and o["rho"] > 0.95
    perm = np.random.default_rng(3).permutation(32)
    shuffled = geometry.order(E[perm])
    assert shuffled["neighbours"] < 0.3 and abs(shuffled["rho"]) < 0.2
    line = geometry.order(np.arange(10.0)[:, None])
    assert line == {"rho": pytest.approx(1.0), "neighbours": 1.0}


def _recorded(tmp_path: Path, n: int = 2) -> tuple[RunStore, list[str]]:
    specs = [s for s in expand(load_preset(ROOT / "presets" / "blog3_geometry.toml"))][:n]
    store = RunStore(tmp_path / "runs")
    _, ids = store.create_runs(specs)
    return store, ids


def test_stored_array_round_trips_from_raw_bytes_and_is_deleted_with_its_run(tmp_path: Path):
    store, (a, b) = _recorded(tmp_path)
    E = np.random.default_rng(0).normal(size=(32, 3))
    store.log_array(a, "embed", E.astype(np.float32))
    back = store.array(a, "embed")
    assert back.dtype == np.float32 and back.shape == (32, 3) and np.array_equal(back, E.astype(np.float32))
    store.log_array(a, "embed", np.ones((2, 2), dtype=np.float16))  # replaced; float16 kept as float32
    assert store.array(a, "embed").dtype == np.float32 and store.array(a, "embed").shape == (2, 2)
    store.log_array(a, "counts", np.arange(4))  # int64 kept
    assert store.array(a, "counts").dtype == np.int64
    assert store.array(b, "embed") is None
    raw = store.con.execute("SELECT dtype, data FROM arrays WHERE run_id=? AND name='embed'", (a,)).fetchone()
    assert raw["dtype"] == "<f4" and len(raw["data"]) == 16  # raw little-endian bytes, no pickle, no npz
    store.delete([a])
    assert store.con.execute("SELECT COUNT(*) FROM arrays").fetchone()[0] == 0


def test_a_planted_dtype_is_refused_as_a_damaged_array(tmp_path: Path):
    store, (a, _) = _recorded(tmp_path)
    store.log_array(a, "embed", np.zeros((2, 2)))
    store.con.execute("UPDATE arrays SET dtype='|O'")
    store.con.commit()
    with pytest.raises(StoreError, match="damaged array 'embed'"):
        store.array(a, "embed")


def test_a_schema_4_store_gains_the_arrays_table(tmp_path: Path):
    store, (a, _) = _recorded(tmp_path)
    store.con.execute("DROP TABLE arrays")
    store.con.execute("UPDATE meta SET value='4' WHERE key='schema_version'")
    store.con.commit()
    store.close()
    again = RunStore(tmp_path / "runs")
    again.log_array(a, "embed", np.eye(3))
    assert np.array_equal(again.array(a, "embed"), np.eye(3))
    con = sqlite3.connect(tmp_path / "runs" / again.path.name)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "5"


def test_training_a_stack_stores_each_runs_final_embedding(tmp_path: Path):
    """Two nearest-token runs of different n_embd trained as one stack: each stores its own [V, D] embedding, the
    one it ends with (not its initial one)."""
    from sparse_tui.lifecycle import runner

    specs = expand(load_preset(ROOT / "presets" / "blog3_geometry.toml",
                               ["train.steps=60", "eval.every=30", "eval.test_size=64", "train.device=cpu",
                                "sweep.model.d_model=[2, 4]"]))
    store = RunStore(tmp_path / "runs")
    batch, ids = store.create_runs(specs)
    runner.run_batch(store, batch, LocalExecutor(), workers=1, group=8)
    for rid, D in zip(ids, (2, 4)):
        rec = store.get(rid)
        assert rec.status == "finished"
        E = store.array(rid, "embed")
        assert E.shape == (32, D) and np.isfinite(E).all()
    from sparse_tui.models import build_model
    from sparse_tui.tasks import make_task

    cfg = specs[0].config
    init = build_model(cfg, make_task(cfg, "cpu"))  # the same seeded initial embedding
    assert not np.allclose(init.embed.weight.detach().numpy(), store.array(ids[0], "embed"), atol=1e-3)


def test_geometry_figure_and_show_plot(tmp_path: Path):
    pytest.importorskip("matplotlib")
    from sparse_tui import atlas
    from sparse_tui.reports import figures
    from sparse_tui.reports.entries.blog3_geometry import geometry_figure

    store, ids = _recorded(tmp_path)
    E, _, _ = _planted(V=32, D=4)
    store.log_array(ids[0], "embed", E[:, :2])
    store.log_array(ids[1], "embed", E)
    for rid in ids:
        store.log_metrics_many(rid, [0, 100], {"test/loss": [3.0, 1.0], "test/acc": [0.1, 0.5]})
        store.finish(rid, "finished", step=100)
    png = geometry_figure(store, ids, tmp_path / "geo.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert atlas.find("blog3_geometry")[0].plot_fn() is geometry_figure
    bare = store.create_runs(expand(load_preset(ROOT / "presets" / "blog3_nearest.toml")))[1][0]
    with pytest.raises(figures.FigureError, match=f"no stored embedding for run.*{bare}"):
        geometry_figure(store, [bare], tmp_path / "none.png")
    store.close()
    out = tmp_path / "show.png"
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "show", ids[1], "--runs-dir", str(tmp_path / "runs"),
                        "--no-plots", "--plot", str(out)], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "show_embedding.png").read_bytes()[:4] == b"\x89PNG"
    assert f"wrote {tmp_path / 'show_embedding.png'}" in r.stderr.replace("\n", "")
