"""The faults a CUDA review of 4d7d4fb predicted (issue 44), each shown on this CPU, emulating CUDA where needed:

* bf16 autocast: CUDA's autocast runs softmax in float32 while the matmuls run in bfloat16, so the hand-written
  attention core's backward got a float32 ``p`` and a bfloat16 ``dy``, and its ``bmm`` raised (every stack then
  failed its trial and was halved down to eager single runs);
* the batched evaluation accumulated every member's sums one member at a time per chunk, so a long-sequence stack
  (chunked to a few sequences by the memory budget) cost M times the operations of one member, and read scalars back
  to the host inside the loop;
* a restack whose trial fails after training began restarted runs from their checkpoint while the store held later
  points, and the old stack's graph was still held while the new one was captured;
* the TF32 switch read ``allow_tf32``, which raises once anything in the process used torch's ``fp32_precision`` API;
* NVML's utilisation and memory were read in one ``try``: one NotSupported dropped both;
* the train loss was read back at every ``eval.train_every`` point on GPUs (a host sync every 10 steps);
* every run of a stack wrote its own heartbeat transaction.
"""

from __future__ import annotations

import copy
import math
import weakref

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from sparse_tui.presets.schema import RunConfig
from sparse_tui.training import loop, metrics, precision
from sparse_tui.training.loop import Prepared

TR = {"kind": "transformer", "n_layers": 2, "n_heads": 2, "d_model": 16}
TRAIN = {"lr": 3e-2, "batch_size": 8, "steps": 40, "device": "cpu"}
EVAL = {"every": 10, "test_size": 24, "snapshot_examples": 3}


def cfg(seed: int, task: dict | None = None, model: dict | None = None, **train) -> RunConfig:
    return RunConfig.model_validate({"seed": seed, "task": copy.deepcopy(task or {"kind": "recall", "n_tokens": 16,
                                                                                  "n_pairs": 6}),
                                     "model": {**TR, **(model or {})}, "train": {**TRAIN, **train},
                                     "eval": dict(EVAL)})


# -- bf16 autocast and the attention core ---------------------------------------------------------------------------
class CudaAutocastSoftmax(TorchFunctionMode):
    """What CUDA's autocast does and the CPU's does not: softmax of a bfloat16 input computed (and returned) in
    float32 (softmax is on CUDA autocast's float32 list)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.softmax, torch.softmax, F.softmax) and args[0].dtype == torch.bfloat16 \
                and torch.is_autocast_enabled("cpu"):
            return func(args[0].float(), *args[1:], **kwargs)
        return func(*args, **kwargs)


def test_attention_core_backward_under_cuda_style_bf16_autocast():
    from sparse_tui.models.transformer import attention_core

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(6, 5, 4, generator=g, requires_grad=True) for _ in range(3))
    bias = torch.zeros(5, 5).masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), float("-inf"))
    with CudaAutocastSoftmax(), torch.autocast("cpu", dtype=torch.bfloat16):
        y = attention_core(q, k, v, bias)
    assert y.dtype == torch.bfloat16
    y.float().square().sum().backward()  # raised "expected scalar type Float but found BFloat16" before
    want = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    p = ((want[0] @ want[1].transpose(1, 2)) + bias).softmax(-1)
    (p @ want[2]).square().sum().backward()
    for got, ref in zip((q, k, v), want):
        assert got.grad.dtype == torch.float32
        torch.testing.assert_close(got.grad, ref.grad, rtol=0.1, atol=0.1)  # bf16 rounding, same gradient


def test_a_stack_trains_under_cuda_style_bf16_autocast():
    """The whole step of a stack on the core kernel (the one pick_kernel chooses up to 65 positions on CUDA)."""
    prep = Prepared([cfg(s, precision="bf16") for s in range(2)], torch.device("cpu"), kernel="core",
                    autocast=lambda: torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False))
    with CudaAutocastSoftmax():
        loop.trial_step(prep)  # the trial runs the step and an evaluation; StackFailed before
        for step in range(1, 4):
            prep.opt.set_lr(step, prep.lr_dev)
            prep.step_fn()
    assert torch.isfinite(prep.loss_sum).all() and float(prep.loss_sum.sum()) > 0


# -- the batched evaluation -----------------------------------------------------------------------------------------
class Ops(TorchDispatchMode):
    """Operations that launch work (views excluded), and scalars read back to the host."""

    def __init__(self):
        super().__init__()
        self.ops = self.scalars = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not (func.is_view or func is torch.ops.aten._unsafe_view.default):
            self.ops += 1
        if func is torch.ops.aten._local_scalar_dense.default:
            self.scalars += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("task", [{"kind": "recall", "n_tokens": 16, "n_pairs": 12}, {"kind": "linreg", "d": 4,
                                                                                        "T": 32}])
def test_the_batched_evaluation_costs_no_more_operations_than_one_member_at_a_time(task, monkeypatch):
    counts = {}
    for M in (4, 8):
        prep = Prepared([cfg(s, task) for s in range(M)], torch.device("cpu"))
        prep.batched_eval = True
        # the memory budget chunks the stack to 2 test sequences (the long-sequence case: Fig. 3 right, Fig. 12)
        L = prep.test_inputs().shape[2]
        monkeypatch.setattr(metrics, "_ATTN_BUDGET", 2 * metrics._attn_elements(prep.stack, L))
        prep.measure(prep.members)  # the cached masks built once
        reads = []
        real = torch.Tensor.tolist
        monkeypatch.setattr(torch.Tensor, "tolist", lambda t: reads.append(t.shape) or real(t))
        with Ops() as batched:
            got = prep.measure(prep.members)
        monkeypatch.setattr(torch.Tensor, "tolist", real)
        assert len(reads) == 1 and batched.scalars == 0  # one transfer to the host per evaluation
        prep.batched_eval = False
        with Ops() as alone:
            want = prep.measure(prep.members)
        assert batched.ops <= alone.ops, (M, batched.ops, alone.ops)
        counts[M] = batched.ops
        for i in range(M):
            for k, v in want[i].items():
                assert got[i][k] == pytest.approx(v, rel=1e-4, abs=1e-5), k
    assert counts[8] <= counts[4] * 1.05  # per chunk, the operations of one member whatever the stack's size


# -- a restack that fails after training began ----------------------------------------------------------------------
def _finishing_early(n: int) -> list[RunConfig]:
    """n runs of which all but one stop soon after their plateau (a restack at about step 40 of 300)."""
    out = []
    for s in range(n):
        c = cfg(s, {"kind": "recall", "n_tokens": 8, "n_pairs": 3}, steps=300)
        stop = 0 if s else -1
        out.append(c.model_copy(update={"plateau": c.plateau.model_copy(update={"stop_after": stop,
                                                                                 "value": 1e9})}))
    return out


def test_a_restack_whose_trial_fails_mid_training_keeps_the_old_stack(monkeypatch):
    ref = loop.train_stack(_finishing_early(3))  # the restack succeeds
    calls = []
    real = loop.trial_step

    def failing(prep, *a, **kw):
        calls.append(prep.M)
        if len(calls) > 1:
            raise loop.StackFailed("OutOfMemoryError: CUDA out of memory (emulated)", oom=True)
        return real(prep, *a, **kw)

    monkeypatch.setattr(loop, "trial_step", failing)
    steps: list[int] = []
    got = loop.train_stack(_finishing_early(3), on_step=steps.append)
    notes = got[0].summary["notes"]
    assert calls[:2] == [3, 1]
    assert steps == list(range(1, 301))  # never restarted: every step once, in order
    assert [r.status for r in got] == [r.status for r in ref] and got[0].step == 300
    assert any("kept the stack of 3" in n for n in notes), notes
    assert len(calls) == 2  # no second attempt at every later step
    assert got[0].summary["final"]["test/loss"] == pytest.approx(ref[0].summary["final"]["test/loss"], rel=1e-5)


def test_a_restack_never_holds_two_graphs(monkeypatch):
    """The old stack's graph is let go before the new one is captured (it doubled the memory); a failed restack
    captures the old stack's graph anew."""
    alive = weakref.WeakSet()
    seen = []

    class FakeGraph:  # what _engine returns on CUDA: an object holding the captured graph, its step a bound method
        def __init__(self, prep):
            self.prep = prep

        def step(self):
            self.prep.step_fn()

    real_engine = loop._engine

    def engine(prep, graph, mode, notes):
        import gc

        gc.collect()
        seen.append(len(alive))
        fn, _ = real_engine(prep, False, mode, notes)
        g = FakeGraph(prep)
        alive.add(g)
        return g.step, True

    monkeypatch.setattr(loop, "_engine", engine)
    loop.train_stack(_finishing_early(3))
    assert seen == [0, 0]


# -- TF32 through fp32_precision --------------------------------------------------------------------------------------
@pytest.fixture
def precision_api():
    m = torch.backends.cuda.matmul
    if not hasattr(m, "fp32_precision"):
        pytest.skip("this torch has no fp32_precision API")
    before = m.fp32_precision
    yield m
    m.fp32_precision = before


def test_tf32_switch_works_after_the_fp32_precision_api_was_used(precision_api):
    precision_api.fp32_precision = "tf32"  # anything else in the process (a library, the user) used the new API
    with precision.full_fp32(torch.device("cpu")):  # read allow_tf32 first, and raised
        pass
    assert precision.tf32_enabled()
    with precision._tf32(False):
        assert not precision.tf32_enabled() and precision_api.fp32_precision == "ieee"
    assert precision_api.fp32_precision == "tf32"
    precision_api.fp32_precision = "ieee"
    with precision._tf32(True):
        assert precision.tf32_enabled()
    assert precision_api.fp32_precision == "ieee"


# -- the train loss stays on the device until an evaluation; one heartbeat transaction per stack --------------------
def test_the_train_loss_is_read_back_at_evaluations_only_on_gpus(monkeypatch):
    """On a GPU (emulated: the loop's sync interval of a CUDA device), train/loss points between evaluations stay
    on the device and are read back with the evaluation, and are the same numbers."""
    c = [cfg(s, steps=40).model_copy(update={"eval": cfg(s).eval.model_copy(update={"every": 20,
                                                                                      "train_every": 5})})
         for s in range(2)]
    points_cpu: list = []
    loop.train_stack(c, loggers=[_Recorder(points_cpu, i) for i in range(2)])
    reads = []
    real = torch.Tensor.tolist
    monkeypatch.setattr(loop, "reads_every_step", lambda device: False)  # as on a GPU
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: reads.append(tuple(t.shape)) or real(t))
    points_gpu: list = []
    loop.train_stack(c, loggers=[_Recorder(points_gpu, i) for i in range(2)])
    monkeypatch.setattr(torch.Tensor, "tolist", real)
    assert [p[:2] for p in sorted(points_gpu)] == [p[:2] for p in sorted(points_cpu)]
    assert [p[2] for p in sorted(points_gpu)] == pytest.approx([p[2] for p in sorted(points_cpu)], rel=1e-6)
    assert len([p for p in points_gpu if p[1] % 20]) == 2 * 6  # train/loss at 5, 10, 15, 25, 30, 35
    # reads: the two runs' loss sums at evaluation steps 20 and 40 only (before: also at 5, 10, 15, 25, 30, 35), and
    # with each evaluation the 6 points buffered on the device since the last, in one transfer
    assert reads.count((2,)) == 2 and reads.count((6,)) == 2, reads


class _Recorder:
    """A RunLogger without a store that keeps (run, step, train/loss) points."""

    def __init__(self, points: list, index: int):
        from sparse_tui.training.runlog import RunLogger

        self.inner = RunLogger()
        self.points, self.index = points, index

    def metrics(self, step, values):
        if "train/loss" in values:
            self.points.append((self.index, step, values["train/loss"]))

    def series(self, steps, series):
        for s, v in zip(steps, series.get("train/loss", [])):
            self.points.append((self.index, s, v))

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_one_heartbeat_transaction_per_stack(tmp_path, monkeypatch):
    from sparse_tui.presets.loading import RunSpec
    from sparse_tui.store import RunStore
    from sparse_tui.training import runlog
    from sparse_tui.training.runlog import RunLogger

    store = RunStore(tmp_path)
    c = [cfg(s, steps=6) for s in range(3)]
    _, ids = store.create_runs([RunSpec("t", "t.toml", x) for x in c])
    for i in ids:
        store.mark_running(i, device="cpu", versions={})
    monkeypatch.setattr(runlog, "HEARTBEAT_SECONDS", 0.0)  # a heartbeat at every step
    begins = []
    loggers = [RunLogger(store, i) for i in ids]
    store.con.set_trace_callback(lambda sql: begins.append(sql) if sql.startswith("BEGIN") else None)
    loop.train_stack(c, loggers=loggers)
    store.con.set_trace_callback(None)
    beats = [store.get(i).heartbeat_at for i in ids]
    assert all(b is not None for b in beats) and store.get(ids[0]).step == 6
    # 6 steps: one heartbeat transaction per step for the 3 runs together (3 per step before), plus the
    # evaluations' (step 0 and 6), the ends' and the first beat's
    assert len(begins) <= 6 + 12, len(begins)
    store.request_cancel([ids[1]])
    assert loop.heartbeat_all([lg for lg in loggers], 7) == {1}
    store.close()
    assert math.isfinite(beats[0])


# -- NVML: utilisation and memory read apart --------------------------------------------------------------------------
def test_one_nvml_not_supported_drops_only_its_own_reading(monkeypatch):
    import types

    from sparse_tui.base.sysmetrics import Nvml, SystemSampler

    class NotSupported(Exception):  # pynvml.NVMLError_NotSupported
        pass

    def no(h):
        raise NotSupported("Not Supported")

    base = dict(nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 1,
                nvmlDeviceGetHandleByIndex=lambda i: ("h", i), nvmlDeviceGetName=lambda h: b"NVIDIA H200",
                nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=41),
                nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=3 * 2**30, total=140 * 2**30))
    monkeypatch.setenv("SPARSE_TUI_SYSTEM_METRICS", "1")
    no_util = Nvml(types.SimpleNamespace(**{**base, "nvmlDeviceGetUtilizationRates": no}))
    got = SystemSampler(no_util).sample("cuda", 0)
    assert "sys/gpu_util" not in got and got["sys/gpu_mem_mb"] == 3 * 1024
    assert no_util.summary() == "GPU0 H200 ?% 3.0/140G"
    no_mem = Nvml(types.SimpleNamespace(**{**base, "nvmlDeviceGetMemoryInfo": no}))
    got = SystemSampler(no_mem).sample("cuda", 0)
    assert got["sys/gpu_util"] == 41 and "sys/gpu_mem_mb" not in got
    assert no_mem.summary() == "GPU0 H200 41% ?"
    neither = Nvml(types.SimpleNamespace(**{**base, "nvmlDeviceGetMemoryInfo": no,
                                            "nvmlDeviceGetUtilizationRates": no}))
    assert neither.read(0) is None and neither.summary() is None
