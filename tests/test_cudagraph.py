"""training/cudagraph.py, the CUDA-only code of the loop, driven on CPU with stand-ins for torch.cuda's stream and
graph objects that behave like torch's: capture records the step once (runs no kernel) and replays it; the tasks'
generators are registered; a capture that fails midway leaves its registered generators in capture mode, so that an
eager draw from them raises (torch's "Offset increment outside graph capture"), and the process must then never
capture again nor empty the CUDA cache. The loop captures only after its trial, which checked the step for host
syncs; a failed capture trains eagerly ('auto', with the cause in the run's notes) or fails the stack ('on')."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch

from sparse_tui.training import cudagraph, loop, precision


class FakeGen:
    """A generator with torch's capture-mode behaviour: drawing eagerly while registered with a capture that never
    ended cleanly raises."""

    def __init__(self, device="cpu"):
        self.device, self.offset, self.capturing, self.in_capture = torch.device(device), 0, False, False

    def get_state(self):
        return self.offset

    def set_state(self, state):
        self.offset = state

    def draw(self):
        if self.capturing and not self.in_capture:
            raise RuntimeError("Offset increment outside graph capture encountered unexpectedly.")
        self.offset += 4


CAPTURING: list = []  # the fake graph being captured, if any


class FakeGraph:
    def __init__(self):
        self.replays, self.generators, self.work = 0, [], None

    def register_generator_state(self, gen):
        self.generators.append(gen)

    def replay(self):
        self.replays += 1
        if self.work is not None:  # what the capture recorded runs now (on CPU: the real step)
            self.work()


def install_fakes(monkeypatch, log, fail_midway=False):
    class Stream:
        def __init__(self, device=None):
            pass

        def wait_stream(self, other):
            pass

    @contextmanager
    def graph(g, stream=None):
        log.append("capture-begin")
        for gen in g.generators:
            gen.capturing = gen.in_capture = True
        CAPTURING.append(g)
        try:
            yield
        finally:
            CAPTURING.pop()
            if fail_midway:  # as torch: capture_end raises (the body's error as __context__) before the
                for gen in g.generators:  # generators leave capture mode
                    gen.in_capture = False
                raise RuntimeError("CUDA error: operation failed due to a previous error during capture")
        for gen in g.generators:
            gen.capturing = gen.in_capture = False
        log.append("capture-end")

    @contextmanager
    def on_stream(s):
        yield

    monkeypatch.setattr(cudagraph, "_capture_broken", None)
    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())
    monkeypatch.setattr(torch.cuda, "stream", on_stream)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: log.append("empty_cache"))


class Task:
    def __init__(self):
        self.gen = FakeGen()


def test_capture_once_then_replay(monkeypatch):
    log: list[str] = []
    install_fakes(monkeypatch, log)
    task = Task()
    step = cudagraph.GraphedStep(lambda: (task.gen.draw(), log.append("fn")), [(task, "gen")],
                                 torch.device("cpu"), torch.cuda.Stream())
    assert log == ["capture-begin", "fn", "capture-end"] and step.graph.generators == [task.gen]
    for _ in range(5):
        step.step()
    assert step.graph.replays == 5 and log.count("fn") == 1


def test_a_capture_failing_midway_leaves_fresh_generators_and_no_more_captures(monkeypatch):
    log: list[str] = []
    install_fakes(monkeypatch, log, fail_midway=True)
    task = Task()
    task.gen.offset = 40
    old = task.gen

    def fn():
        task.gen.draw()  # the step draws its batch, then an operation breaks the capture
        raise RuntimeError("Cannot copy between CPU and CUDA tensors during CUDA graph capture (injected)")

    with pytest.raises(cudagraph.CaptureFailed) as err:
        cudagraph.GraphedStep(fn, [(task, "gen")], torch.device("cpu"), torch.cuda.Stream())
    # the reason names the error torch raised and the one that broke the capture (its __context__)
    assert "operation failed due to a previous error" in err.value.reason
    assert "cause: RuntimeError: Cannot copy between CPU and CUDA tensors" in err.value.reason
    with pytest.raises(RuntimeError, match="Offset increment"):
        old.draw()  # the registered generator is poisoned, as in torch
    assert task.gen is not old and task.gen.offset == 40  # a fresh one, in the state before the capture
    task.gen.draw()  # ... which an eager step can draw from
    assert cudagraph.capture_broken() and "Cannot copy" in cudagraph.capture_broken()
    cudagraph.free_cached_memory(torch.device("cuda"))
    assert "empty_cache" not in log  # never after a failed capture
    with pytest.raises(cudagraph.CaptureFailed, match="an earlier CUDA graph capture in this process failed"):
        cudagraph.GraphedStep(lambda: None, [], torch.device("cpu"), torch.cuda.Stream())
    assert not loop.graph_wanted(torch.device("cuda"), "auto")


def test_free_cached_memory_empties_the_cache_on_cuda_only(monkeypatch):
    log: list[str] = []
    install_fakes(monkeypatch, log)
    cudagraph.free_cached_memory(torch.device("cpu"))
    assert log == []
    cudagraph.free_cached_memory(torch.device("cuda"))
    assert log == ["empty_cache"]


def _runs(graph: str):
    from sparse_tui.presets.schema import RunConfig
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


def _loop_on_fakes(monkeypatch, log, syncs=None, fail_midway=False):
    """The loop's graph branch on CPU: under a fake capture the step records itself and runs nothing (as a CUDA
    capture runs no kernel), or breaks midway (``fail_midway``); a replay runs the recorded step."""
    install_fakes(monkeypatch, log, fail_midway=fail_midway)
    monkeypatch.setattr(loop, "graph_wanted", lambda device, mode: mode != "off")
    monkeypatch.setattr(cudagraph, "host_syncs", lambda fn: (fn(), syncs)[1])
    real = loop.Prepared.__init__

    def init(self, *a, **kw):
        real(self, *a, **kw)
        inner = self.step_fn

        def step_fn():
            if not CAPTURING:
                return inner()
            log.append("fn")
            if fail_midway:
                raise RuntimeError("Cannot copy between CPU and CUDA tensors during CUDA graph capture (injected)")
            CAPTURING[-1].work = inner

        self.step_fn = step_fn

    monkeypatch.setattr(loop.Prepared, "__init__", init)


def test_the_loop_replays_its_captured_step(monkeypatch):
    """Captured once after the trial (which ran the warm-up steps and put everything back), then replayed for every
    step: the same numbers as eager training."""
    ref_logs, _ = _runs("off")
    log: list[str] = []
    _loop_on_fakes(monkeypatch, log)
    logs, res = _runs("auto")
    assert res.status == "finished" and res.summary["cuda_graph"] is True
    assert log.count("capture-begin") == 1 and log.count("fn") == 1
    assert logs == ref_logs


def test_a_failed_capture_trains_eagerly_with_a_note_or_fails_the_stack_when_required(monkeypatch, capsys):
    """'auto': the same numbers as 'off' (capture ran nothing), and the reason with its cause in the run's notes;
    'on': the stack fails before anything is logged (StackFailed: the runner falls back)."""
    ref_logs, ref = _runs("off")
    log: list[str] = []
    _loop_on_fakes(monkeypatch, log, fail_midway=True)
    logs, res = _runs("auto")
    assert res.status == "finished" and res.summary["cuda_graph"] is False
    assert "CUDA graph capture failed (RuntimeError: CUDA error: operation failed" in res.summary["notes"][0]
    assert "trained eagerly" in capsys.readouterr().err
    assert logs == ref_logs
    log.clear()
    _loop_on_fakes(monkeypatch, log, fail_midway=True)
    with pytest.raises(loop.StackFailed, match="CUDA graph capture failed"):
        _runs("on")


def test_a_step_that_waits_for_the_host_is_not_captured(monkeypatch):
    ref_logs, _ = _runs("off")
    log: list[str] = []
    _loop_on_fakes(monkeypatch, log, syncs="called a synchronizing CUDA operation (injected)")
    logs, res = _runs("auto")
    assert "capture-begin" not in log and res.summary["cuda_graph"] is False
    assert "CUDA graph skipped: the step waits for the host (called a synchronizing" in res.summary["notes"][0]
    assert logs == ref_logs


def test_host_syncs_counts_synchronizing_calls_not_torchs_notice(monkeypatch):
    """torch warns once, when the sync debug mode is first set, that the mode "is a prototype feature and does not
    yet detect all synchronizing operations" (seen on an H100, torch 2.11): that notice is not a sync (counting it
    made every first stack of a process skip its graph)."""
    import warnings

    mode = []
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", mode.append)
    notice = "Synchronization debug mode is a prototype feature and does not yet detect all synchronizing operations"
    assert cudagraph.host_syncs(lambda: warnings.warn(notice)) is None
    assert cudagraph.host_syncs(lambda: (warnings.warn(notice), warnings.warn("called a synchronizing CUDA "
                                                                              "operation"))) == \
        "called a synchronizing CUDA operation"
    assert mode == ["warn", 0, "warn", 0]  # set for the call, put back after


def test_evaluations_run_in_float32_under_tf32():
    """train.precision = "tf32" rounds the training steps' matmuls; an evaluation switches TF32 off and puts the
    setting back (the docs promise float32 evaluations). Through torch's fp32_precision where it has it (reading the
    legacy flags raises once anything used it: tests/test_cuda_faults.py)."""
    with precision._tf32(True):
        assert precision.tf32_enabled()
        with precision.full_fp32(torch.device("cuda")):
            assert not precision.tf32_enabled()
        assert precision.tf32_enabled()


def test_tf32_precision_switches_tf32_on_for_the_steps_and_puts_the_flags_back():
    with precision._tf32(False):
        with precision.precision_mode("tf32", torch.device("cuda")) as autocast:
            assert precision.tf32_enabled()
            assert autocast is loop.nullcontext  # tf32 needs no autocast (bf16 does)
        assert not precision.tf32_enabled()


def test_the_optimiser_is_capturable_only_when_the_step_is_graphed(monkeypatch):
    """capturable=True keeps Adam's step counts on the device for a graph; an eager CUDA run does not need it (torch
    warns once per optimiser when it is set without a graph)."""
    seen = []

    def watch():
        inner = loop.Prepared.__init__

        def init(self, *a, **kw):
            inner(self, *a, **kw)
            seen.append(self.opt.capturable)

        monkeypatch.setattr(loop.Prepared, "__init__", init)

    watch()
    _runs("off")
    _loop_on_fakes(monkeypatch, [])  # wraps the watcher
    _runs("auto")
    assert seen == [False, True]
