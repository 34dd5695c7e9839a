"""System metrics per run (issue 34 item 5): the process's CPU share and RSS and, on CUDA with NVML, the GPU's
utilisation and memory, recorded as ``sys/*`` metrics at every evaluation (sparse_tui/base/sysmetrics.py), shown by
``show`` and exported as metrics. NVML is faked here (no GPU)."""

from __future__ import annotations

import csv
import io
import types

import pytest
from typer.testing import CliRunner

from sparse_tui.base.sysmetrics import Nvml, SystemSampler, nvml_index


def fake_nvml(util=37, used_gib=12.1):
    return types.SimpleNamespace(
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: ("h", i), nvmlDeviceGetName=lambda h: b"NVIDIA H100 80GB HBM3",
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=util + h[1]),
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=used_gib * 2**30, total=80 * 2**30))


@pytest.fixture
def recording(monkeypatch):
    monkeypatch.setenv("SPARSE_TUI_SYSTEM_METRICS", "1")


def test_sample_reads_the_process_and_nvml(recording, monkeypatch):
    cpu = SystemSampler(Nvml(fake_nvml())).sample("cpu")
    assert sorted(cpu) == ["sys/cpu_pct", "sys/rss_mb"]  # a CPU run reads no GPU
    assert cpu["sys/rss_mb"] > 10 and cpu["sys/cpu_pct"] >= 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # CUDA's device 0 is NVML's GPU 1
    assert nvml_index(0) == 1
    gpu = SystemSampler(Nvml(fake_nvml())).sample("cuda", 0)
    assert gpu["sys/gpu_util"] == 38 and gpu["sys/gpu_mem_mb"] == pytest.approx(12.1 * 1024)
    # no NVML (not installed, or it fails): the GPU metrics are absent, the rest stays
    dead = SystemSampler(Nvml(types.SimpleNamespace(nvmlInit=lambda: 1 / 0))).sample("cuda", 0)
    assert sorted(dead) == ["sys/cpu_pct", "sys/rss_mb"]


def test_off_records_nothing(monkeypatch):
    monkeypatch.setenv("SPARSE_TUI_SYSTEM_METRICS", "0")
    assert SystemSampler(Nvml(fake_nvml())).sample("cuda", 0) == {}


def test_recorded_per_run_shown_and_exported(recording, monkeypatch, tiny_preset, runs_dir):
    """Two runs trained as one stack through the store, their GPU read through a fake NVML: every evaluation
    carries sys/*; ``show`` prints them; the long CSV export carries them as metrics; the final metrics do not."""
    from sparse_tui import cli
    from sparse_tui.presets.loading import expand, load_preset
    from sparse_tui.store import RunStore
    from sparse_tui.training import loop
    from sparse_tui.training.runlog import RunLogger

    sampler = SystemSampler(Nvml(fake_nvml()))
    monkeypatch.setattr(loop, "SYSTEM", types.SimpleNamespace(sample=lambda kind, index: sampler.sample("cuda", 0)))
    specs = expand(load_preset(tiny_preset, ["seeds=[0, 1]", "train.steps=20", "eval.every=10"]))
    store = RunStore(runs_dir)
    _, ids = store.create_runs(specs)
    store.claim_runs(ids, device="cpu", versions={})
    res = loop.train_stack([s.config for s in specs], loggers=[RunLogger(store, i) for i in ids])
    assert [r.status for r in res] == ["finished"] * 2
    for rid, r in zip(ids, res):
        m = store.metrics(rid)
        for k in ("sys/cpu_pct", "sys/rss_mb", "sys/gpu_util", "sys/gpu_mem_mb"):
            assert m[k][0] == m["test/loss"][0] == [0, 10, 20], k  # at every evaluation
        assert m["sys/gpu_util"][1] == [37.0] * 3 and m["sys/rss_mb"][1][0] > 10
        assert not any(k.startswith("sys/") for k in r.summary["final"])  # the science's numbers only
    shown = CliRunner().invoke(cli.app, ["show", ids[0], "--runs-dir", str(runs_dir), "--no-plots"])
    assert shown.exit_code == 0, shown.output
    assert "sys/gpu_util" in shown.output and "sys/rss_mb" in shown.output and "peak" in shown.output
    exported = CliRunner().invoke(cli.app, ["export", "--metrics", "--runs-dir", str(runs_dir), ids[1]])
    assert exported.exit_code == 0, exported.output
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    gpu = [r for r in rows if r["name"] == "sys/gpu_mem_mb"]
    assert len(gpu) == 3 and float(gpu[0]["value"]) == pytest.approx(12.1 * 1024)
