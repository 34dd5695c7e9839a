"""training/cudagraph.py, the CUDA-only code of the loop, driven on CPU with stand-ins for torch.cuda's stream
and graph objects: the warm-up steps run eagerly, the next call captures the same step function once (capture
runs nothing) and replays it, every later call only replays, and the tasks' generators are registered; a capture
that fails falls back to eager training ('auto') or fails the run ('on')."""

from __future__ import annotations

from contextlib import contextmanager

import torch

from sparse_tui.training import cudagraph


class FakeGraph:
    def __init__(self):
        self.replays, self.generators = 0, []

    def register_generator_state(self, gen):
        self.generators.append(gen)

    def replay(self):
        self.replays += 1


def install_fakes(monkeypatch, log):
    class Stream:
        def __init__(self, device=None):
            pass

        def wait_stream(self, other):
            pass

    @contextmanager
    def graph(g, stream=None):
        log.append("capture-begin")
        yield
        log.append("capture-end")

    @contextmanager
    def on_stream(s):
        yield

    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())
    monkeypatch.setattr(torch.cuda, "stream", on_stream)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)


def test_warm_up_then_capture_once_then_replay(monkeypatch):
    log: list[str] = []
    install_fakes(monkeypatch, log)
    gen = torch.Generator()
    step = cudagraph.GraphedStep(lambda: log.append("fn"), [gen], torch.device("cpu"))
    for _ in range(cudagraph.WARMUP_STEPS):
        step.step()
    assert log == ["fn"] * cudagraph.WARMUP_STEPS and step.graph is None
    step.step()  # capture: the function is recorded once, then the graph is replayed for this step
    assert log[cudagraph.WARMUP_STEPS:] == ["capture-begin", "fn", "capture-end"]
    assert step.graph.replays == 1 and step.graph.generators == [gen]
    for _ in range(5):
        step.step()
    assert step.graph.replays == 6 and log.count("fn") == cudagraph.WARMUP_STEPS + 1


def _runs(graph: str):
    from sparse_tui.presets import RunConfig
    from sparse_tui.training.loop import train_stack
    from sparse_tui.training.runlog import RunLogger

    cfg = RunConfig.model_validate({
        "task": {"kind": "recall", "n_tokens": 8, "n_pairs": 3},
        "model": {"kind": "transformer", "n_layers": 1, "d_model": 8},
        "train": {"lr": 1e-2, "batch_size": 8, "steps": 6, "device": "cpu", "cuda_graph": graph},
        "eval": {"every": 3, "test_size": 16}})
    logs = []
    res = train_stack([cfg], loggers=[RunLogger(on_eval=lambda s, v: logs.append((s, dict(v))))])
    return logs, res[0]


def test_a_failed_capture_falls_back_to_eager_with_a_note_or_fails_when_required(monkeypatch, capsys):
    """The loop's CUDA-graph branch on CPU (stand-ins as above, the capture made to fail): 'auto' trains on eagerly
    from the failed step, with the same numbers as 'off' and the reason in the run's notes; 'on' fails the run."""
    import pytest

    from sparse_tui.training import loop

    ref_logs, ref = _runs("off")
    log: list[str] = []
    install_fakes(monkeypatch, log)

    @contextmanager
    def broken_graph(g, stream=None):
        raise RuntimeError("operation not permitted when stream is capturing (injected)")
        yield

    monkeypatch.setattr(torch.cuda, "graph", broken_graph)
    monkeypatch.setattr(loop, "graph_wanted", lambda device, mode: mode != "off")
    logs, res = _runs("auto")
    assert res.status == "finished" and res.summary["cuda_graph"] is False
    assert "CUDA graph capture failed (RuntimeError: operation not permitted" in res.summary["notes"][0]
    assert "CUDA graph capture failed" in capsys.readouterr().err
    assert logs == ref_logs  # warm-up steps and the failed step ran eagerly: the same numbers exactly
    with pytest.raises(RuntimeError, match="injected"):
        _runs("on")
