"""The one training loop: a stack of M runs (models/stack.py) trained together; a single run is a stack of one.

``train_stack`` is the only place a Transformer or toy model is trained, whoever asked (``trainer.train_run`` for one
run, ``runner.train_claimed`` for a group, the headless CLI, the console, worker processes). ``_train`` is one flat
loop over the steps (nanoGPT's train.py is the model); what concerns one run (evaluation, attention snapshots,
plateau detection, the best and last metrics, buffered train/loss points, its end and its summary) is its
``Tracker``, the one summary builder: an integrated ODE run (training/trainer.py) is recorded through it too.

A run's numbers do not depend on which runs share its stack: each member has its own task (its own seeded data
streams on the device: tasks/_common.py), its own initialisation (``models.build_model`` from its seed), its own
fixed test set, its own optimiser hyperparameters, and the stack's forward and loss never mix models (the gradient
of the summed losses is each model's own gradient). tests/test_stack.py checks this in float64.

The step (``step_fn``) is one function: sample every member's batch on the device, forward, per-model losses,
backward, mask padded gradients, per-model clipping, one optimiser update, add the losses to an on-device sum. The
eager loop calls it; on CUDA (``train.cuda_graph``) the same function is captured once and replayed
(training/cudagraph.py). The loss is read back only at evaluations on GPUs; on CPUs, where reading costs nothing,
every step, so that a NaN stops a run at the step it appears.

Before training, every stack takes a trial (``trial_step``): the training step itself (sampling, forward,
backward, clipping, the optimiser's first update and its state) and an evaluation of every member, then every
parameter, optimiser state, loss sum and random stream is put back exactly as it was (tests/test_loop_trial.py), so
the run's numbers do not depend on it. A failure raises ``StackFailed`` before anything is logged; the caller
(runner) then falls back to smaller stacks and finally to one run at a time on the plainest kernels. On CUDA with
graphs wanted, the trial runs on the capture stream (the warm-up torch asks for) and checks that the step never
waits for the host; the step is then captured (training/cudagraph.py) before step 0 is evaluated.
"""

from __future__ import annotations

import math
import sys
import time
from contextlib import nullcontext
from types import SimpleNamespace
from typing import Callable

import torch

from sparse_tui.base import startup
from sparse_tui.base.sysmetrics import SYSTEM
from sparse_tui.models import build_model
from sparse_tui.models.stack import build_stack, stacked_loss
from sparse_tui.presets.schema import RunConfig
from sparse_tui.science.repetition import scheduled
from sparse_tui.science.schedule import lr_table
from sparse_tui.tasks import make_task
from sparse_tui.training import calibration, cudagraph
from sparse_tui.training.checkpoint import Checkpointer
from sparse_tui.training.metrics import evaluate_stack, toy_metrics
from sparse_tui.training.optim import StackOptimizer
from sparse_tui.training.precision import cpu_float_mode, full_fp32, precision_mode
from sparse_tui.training.runlog import RunLogger, RunResult, heartbeat_all, together
from sparse_tui.training.snapshots import snapshot_maps, snapshot_meta
from sparse_tui.training.tracker import Tracker, read_back

startup.record("imports", startup.since_start())  # process start to torch and the training code imported


class StackFailed(RuntimeError):
    """A stack's trial step failed (unsupported kernel, out of memory): nothing was trained or logged."""

    def __init__(self, reason: str, oom: bool = False):
        super().__init__(reason)
        self.reason, self.oom = reason, oom


def graph_wanted(device: torch.device, mode: str) -> bool:
    """Whether the step is captured as a CUDA graph (``train.cuda_graph``: auto / on capture on CUDA devices; never
    in a process where a capture already failed: training/cudagraph.py)."""
    return device.type == "cuda" and mode != "off" and cudagraph.capture_broken() is None


def generator_slots(members) -> list[tuple[object, str]]:
    """``(task, attribute)`` of every member's random generators: what the trial puts back, what a CUDA graph
    registers (device generators only) and what a failed capture replaces."""
    return [(mb.task, k) for mb in members for k, v in vars(mb.task).items() if isinstance(v, torch.Generator)]


def reads_every_step(device: torch.device) -> bool:
    """Whether the loop reads the loss sums back every step: on CPUs, where reading costs nothing (a NaN then
    stops a run at the step it appears); on GPUs only at evaluations, and train/loss points between them stay on the
    device until then."""
    return device.type == "cpu"


def build_members(cfgs: list[RunConfig], device: torch.device, loggers, dtype=None) -> list[Tracker]:
    members = []
    for i, cfg in enumerate(cfgs):
        torch.manual_seed(cfg.seed)  # as a lone run always did (nothing here draws from the global generator)
        task = make_task(cfg, device)
        module = build_model(cfg, task).to(device)
        if dtype is not None:
            module = module.to(dtype)
        test = task.test_batch(cfg.eval.test_size)
        if dtype is not None and test.x.is_floating_point():
            test = type(test)(test.x.to(dtype), test.y.to(dtype), test.relevant, test.copy_q, test.copy_k)
        members.append(Tracker(cfg, loggers[i], task, module, test, index=i))
    return members


class Batcher:
    """Every member's training batch, stacked to ``[M, B, ...]`` (padded on the left / at the end for mixed
    shapes: models/stack.py). A stack of one is a view, no copy."""

    def __init__(self, stack, members: list[Tracker], dtype):
        self.stack, self.members, self.dtype = stack, members, dtype
        self.padded = getattr(stack, "padded", False)
        self.classification = members[0].task.classification

    def _float(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.dtype) if (self.dtype is not None and t.is_floating_point()) else t

    def assemble(self, batches) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.padded:
            join = torch.stack if len(batches) > 1 else lambda ts: ts[0].unsqueeze(0)
            return self._float(join([b.x for b in batches])), self._float(join([b.y for b in batches]))
        st = self.stack
        M, B, L = len(batches), batches[0].x.shape[0], st.L
        x0 = batches[0].x
        if x0.dtype == torch.long:
            x = torch.zeros(M, B, L, dtype=torch.long, device=x0.device)
            for i, b in enumerate(batches):
                x[i, :, L - b.x.shape[1]:] = b.x
        else:
            n_in = max(b.x.shape[2] for b in batches)
            x = torch.zeros(M, B, L, n_in, dtype=self.dtype or x0.dtype, device=x0.device)
            for i, b in enumerate(batches):
                x[i, :, L - b.x.shape[1]:, : b.x.shape[2]] = b.x
        if self.classification:
            y = torch.stack([b.y for b in batches])
        else:
            y = torch.zeros(M, B, st.C, dtype=self.dtype or batches[0].y.dtype, device=x0.device)
            for i, b in enumerate(batches):
                y[i, :, : b.y.shape[1]] = b.y
        return x, y

    def train(self, bs: int):
        return self.assemble([mb.task.train_batch(bs, meta=False) for mb in self.members])


def trial_step(prep: "Prepared", stream=None, warmup: int = 1, check_syncs: bool = False) -> str | None:
    """The stack's trial: ``warmup`` training steps (sampling, forward, backward, clipping, the optimiser update
    and its state) and one evaluation of every member, then everything put back exactly: parameters, optimiser
    state (in place: the same tensors; a state the trial made for a fresh optimiser is zeroed, as fresh), the loss
    sums, every member's random streams. An
    unsupported kernel, an out-of-memory error or any other failure of these raises ``StackFailed`` before anything
    is trained or logged.

    ``stream``: run the steps there (CUDA: the capture stream; the steps are then the graph's warm-up).
    ``check_syncs``: run the last step under CUDA's sync debug mode; returns the first host sync found (then the
    step cannot be captured), else None."""
    slots = generator_slots(prep.members)
    states = [getattr(o, a).get_state() for o, a in slots]
    params = list(prep.stack.parameters())
    saved = [p.detach().clone() for p in params]
    opt_saved = prep.opt.snapshot()
    sums = prep.loss_sum.clone()
    synced = None
    failed: StackFailed | None = None
    try:
        if stream is not None:
            stream.wait_stream(torch.cuda.current_stream(prep.device))
        with torch.cuda.stream(stream) if stream is not None else nullcontext():
            for i in range(warmup):
                prep.opt.set_lr(1, prep.lr_dev)
                if check_syncs and i == warmup - 1:
                    synced = cudagraph.host_syncs(prep.step_fn)
                else:
                    prep.step_fn()
        if stream is not None:
            torch.cuda.current_stream(prep.device).wait_stream(stream)
        prep.measure(prep.members)
        prep.snapshots(prep.members)
        if prep.device.type == "cuda":
            torch.cuda.synchronize(prep.device)
    except Exception as e:  # noqa: BLE001 - any failure of the trial is a reason to fall back
        oom = isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower()
        failed = StackFailed(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".strip(), oom)
    finally:
        for p in params:
            p.grad = None
    # put back even after a failure: a restack's trial runs mid-training, on the random streams of members that
    # go on training in the old stack
    with torch.no_grad():
        for p, s in zip(params, saved):
            p.copy_(s)
        prep.loss_sum.copy_(sums)
    prep.opt.restore(opt_saved)
    for (owner, name), st in zip(slots, states):
        getattr(owner, name).set_state(st)
    if failed is not None:
        raise failed
    return synced


def train_stack(
    cfgs: list[RunConfig],
    *,
    device: torch.device | str = "cpu",
    loggers: list[RunLogger] | None = None,
    should_stop: Callable[[], str | None] | None = None,
    on_done: Callable[[int, RunResult], None] | None = None,
    on_step: Callable[[int], None] | None = None,
    kernel: str = "auto",
    graph: str | None = None,
    dtype: torch.dtype | None = None,
    notes: list[str] | None = None,
) -> list[RunResult]:
    """Train ``cfgs`` (one ``grouping.group_key``; one run or many) as one stack; one ``RunResult`` per run.

    ``on_done(i, result)`` is called as soon as run i ends (a run that diverges or is cancelled ends before the
    others). ``kernel``: the stack's attention kernel (models/stack.py). ``graph``: ``train.cuda_graph`` override
    (``"auto"``, ``"on"``, ``"off"``). ``dtype``: train in this float type (tests use float64). ``notes`` are
    recorded in every run's summary (e.g. why a fallback trained it). Raises ``StackFailed`` when the trial step
    fails."""
    device = torch.device(device) if isinstance(device, str) else device
    loggers = loggers or [RunLogger() for _ in cfgs]
    t = cfgs[0].train
    with cpu_float_mode(all(c.train.flush_denormal for c in cfgs), device), precision_mode(t.precision, device) as ac:
        return _train(cfgs, device, loggers, should_stop, on_done, on_step, kernel, graph or t.cuda_graph, dtype,
                      notes or [], ac)


class Prepared:
    """A stack ready to train: its members, the stacked model, optimiser, batcher and ``step_fn``, the one
    training step (what the eager loop calls, what a CUDA graph captures, what the scheduler's calibration and
    the benchmarks time)."""

    def __init__(self, cfgs, device, loggers=None, kernel="auto", dtype=None, autocast=nullcontext,
                 capturable: bool = False, members: list[Tracker] | None = None):
        self.cfgs, self.device = cfgs, device
        self.M = M = len(cfgs)
        self.kernel, self.dtype, self.capturable = kernel, dtype, capturable
        self.steps, self.bs = cfgs[0].train.steps, cfgs[0].train.batch_size
        if members is None:
            members = build_members(cfgs, device, loggers or [RunLogger() for _ in cfgs], dtype)
        self.members = members
        self.classification = classification = self.members[0].task.classification
        self.stack = stack = build_stack([mb.module for mb in self.members], kernel, classification)
        for slot, mb in enumerate(members):
            mb.slot, mb.stack = slot, stack  # its place in this stack (``index``: in the caller's list, for on_done)
        params = list(stack.parameters())
        self.table = lr_table(cfgs, self.steps)
        self.opt = opt = StackOptimizer(params, cfgs, self.table, device, capturable=capturable)
        self.lr_dev = torch.tensor(self.table, device=device, dtype=params[0].dtype)  # [steps, M]
        self.batcher = batcher = Batcher(stack, self.members, dtype)
        # Members evaluated in one batched pass of the stack on GPUs, where per-member evaluations were launch-bound
        # (docs/PERFORMANCE.md, GPU); one at a time on CPUs, where the batched pass took 1.2-2.7x the CPU time (its
        # tensors leave the caches, as stacked training steps do, and padding adds FLOPs; measured 2026-11-27).
        self.batched_eval = device.type == "cuda"
        self.autocast = autocast
        self.loss_sum = loss_sum = torch.zeros(M, device=device, dtype=params[0].dtype)
        bs = self.bs

        def step_fn() -> None:
            """The training step of the whole stack; captured as is in a CUDA graph (training/cudagraph.py)."""
            x, y = batcher.train(bs)
            with autocast():
                out = stack(x)
            losses = stacked_loss(out.float() if out.dtype == torch.bfloat16 else out, y, classification)
            opt.zero_grad()
            losses.sum().backward()
            stack.mask_grads()
            opt.clip_()
            opt.step()
            loss_sum.add_(losses.detach())

        self.step_fn = step_fn

    @classmethod
    @torch.no_grad()
    def restack(cls, old: "Prepared", keep: list[Tracker]) -> "Prepared":
        """A smaller stack of ``keep`` (members of ``old``) that continues exactly where they are: their parameters,
        optimiser state, loss sums and bookkeeping move over; their tasks (and random streams) are the same
        objects. The new stack pads only to the largest of the members kept."""
        names = [n for n, _ in old.stack.named_parameters()]
        for mb in keep:
            old.stack.load_into(mb.slot, mb.module)
        states = old.opt.state_tensors()
        blocks = [{k: [old.stack.member_block(n, v, mb.slot) if v.dim() else v for mb in keep]
                   for k, v in st.items()} for n, st in zip(names, states)]
        sums = old.loss_sum[[mb.slot for mb in keep]].clone()
        new = cls([mb.cfg for mb in keep], old.device, kernel=old.kernel, dtype=old.dtype, autocast=old.autocast,
                  capturable=old.capturable, members=keep)
        new.opt.load_state_dict({"state": [{k: new.stack.stacked_like(n, b) if b[0].dim() else b[0]
                                            for k, b in bl.items()} for n, bl in zip(names, blocks)]})
        new.loss_sum.copy_(sums)
        return new

    def test_inputs(self) -> torch.Tensor | None:
        """Every member's fixed test inputs stacked as for training ([M, n, L, ...], left-padded; built once), or
        None when the members' test sets differ in size (then each is evaluated alone)."""
        if "_test_x" not in self.__dict__:
            tests = [mb.test for mb in self.members]
            same = len({len(t) for t in tests}) == 1
            self._test_x = self.batcher.assemble(tests)[0] if same else None
        return self._test_x

    def measure(self, due: list[Tracker]) -> dict[int, dict[str, float]]:
        """The metrics of members ``due`` (by slot) from one batched pass of the whole stack, chunked to the
        memory model (metrics.evaluate_stack), in float32; equal to each member's ``Tracker.measure`` within
        float rounding (tests/test_batched_eval.py). Each member alone where ``batched_eval`` is off (CPUs)."""
        x = self.test_inputs() if self.batched_eval else None
        if x is None:
            return {mb.slot: mb.measure() for mb in due}
        with full_fp32(self.device):
            vals = evaluate_stack(self.stack, x, [mb.test for mb in self.members], [mb.slot for mb in due],
                                  self.members[0].task.kind, self.classification)
        if self.cfgs[0].model.kind == "toy":
            for mb in due:
                vals[mb.slot].update(toy_metrics(SimpleNamespace(W=self.stack.W[mb.slot], a=self.stack.a[mb.slot]),
                                                 mb.task))
        return vals

    @torch.no_grad()
    def snapshots(self, due: list[Tracker]) -> dict[int, tuple[dict, dict]]:
        """Attention snapshots (every query row) of members ``due`` (by slot) from one forward of the stack over
        the first ``eval.snapshot_examples`` test sequences ({} where ``batched_eval`` is off: each member's
        ``Tracker.evaluate`` then takes its own)."""
        x = self.test_inputs() if self.batched_eval else None
        if x is None or not due:
            return {}
        n = min(x.shape[1], max(mb.cfg.eval.snapshot_examples for mb in due))
        L = x.shape[2]
        with full_fp32(self.device):
            _, attn = self.stack(x[:, :n], need_attn=True, full=True)
        out = {}
        for mb in due:
            k = min(n, mb.cfg.eval.snapshot_examples)
            off = L - mb.test.x.shape[1]
            own = [a[mb.slot, :k, :, off:, off:] for a in attn]
            out[mb.slot] = snapshot_maps(own, L - off), snapshot_meta(mb.test, k)
        return out

    def reset_masks(self, idx: frozenset[int]) -> torch.Tensor:
        """A ``[M]`` 0/1 tensor on the device that zeroes the loss sums of members ``idx`` (cached per set: the
        loop resets sums with one multiply, never a Python scalar written into a device tensor)."""
        cache = self.__dict__.setdefault("_reset", {})
        if idx not in cache:
            cache[idx] = torch.tensor([0.0 if i in idx else 1.0 for i in range(self.M)], device=self.device,
                                      dtype=self.loss_sum.dtype)
        return cache[idx]


# A stack whose live members fall to half of it or fewer is rebuilt from them (``Prepared.restack``) when at least
# this many steps remain: ended members cost a whole model's work per step until the last member ends.
RESTACK_MIN_STEPS = 100


def _engine(prep: Prepared, graph: bool, graph_mode: str, notes: list[str]) -> tuple[Callable[[], None], bool]:
    """The trial of ``prep`` (on the capture stream when graphed), then its step function: the CUDA graph of the
    step, or the eager step (with the reason noted) when the step waits for the host or its capture fails. Raises
    ``StackFailed`` when the trial fails, or (``graph_mode == "on"``) when no graph can be had. Returns (step
    function, graphed). A checkpoint must be loaded before (loading replaces the optimiser's state tensors)."""
    stream = torch.cuda.Stream(prep.device) if graph else None
    with startup.timed("trial step"):
        synced = trial_step(prep, stream, cudagraph.WARMUP_STEPS if graph else 1, check_syncs=graph)
    if not graph:
        return prep.step_fn, False
    why = None
    if synced is not None:
        why = f"CUDA graph skipped: the step waits for the host ({synced})"
    else:
        try:
            slots = [sl for sl in generator_slots(prep.members) if getattr(*sl).device.type == "cuda"]
            with startup.timed("first capture"):
                graphed = cudagraph.GraphedStep(prep.step_fn, slots, prep.device, stream)
            return graphed.step, True
        except cudagraph.CaptureFailed as e:
            why = f"CUDA graph capture failed ({e.reason})"
    if graph_mode == "on":
        raise StackFailed(why)
    why += "; trained eagerly"
    notes.append(why)
    print(f"sparse-tui: {why}", file=sys.stderr, flush=True)
    return prep.step_fn, False


def evaluate_due(prep: Prepared, due: list[Tracker], step: int, sums: list[float] | None = None) -> None:
    """Evaluate members ``due`` at ``step`` together: their metrics and snapshots (``Prepared.measure`` /
    ``snapshots``: one batched pass of the stack on GPUs, each member alone on CPUs), the process's system metrics
    sampled once (sparse_tui/base/sysmetrics.py: CPU, RSS, NVML; no device sync), and every record written to the store
    in one transaction."""
    if not due:
        return
    read_back(due)
    vals = prep.measure(due)
    snaps = prep.snapshots([tr for tr in due if step in tr.snaps])
    system = SYSTEM.sample(prep.device.type, prep.device.index)
    with together([tr.logger for tr in due]):
        for tr in due:
            tr.evaluate(step, None if sums is None else sums[tr.slot], vals[tr.slot], snaps.get(tr.slot), system)


def _graph_and_context(cfgs, device, graph_mode: str, notes: list[str]) -> bool:
    """Whether the stack's step is captured as a CUDA graph (``graph_wanted``, and never with a repetition schedule:
    a switch changes the step's constants); on CUDA, the context is made first (timed once per process)."""
    graph = graph_wanted(device, graph_mode)
    if graph and any(scheduled(c.task) for c in cfgs):
        graph = False
        notes.append("CUDA graph off: a repetition schedule (task.p / task.B) changes the training step")
    if device.type == "cuda" and "cuda context" not in startup.PHASES:
        with startup.timed("cuda context"):
            torch.zeros(1, device=device)
            torch.cuda.synchronize(device)
    return graph


def _restack(prep: Prepared, live: list[Tracker], ckpt, graph: bool, step: int, notes: list[str]):
    """Continue with a stack of the ``live`` runs only (its graph captured anew), checkpointed at once. When that
    fails, training began: the old stack goes on (its runs never restart from a checkpoint or step 0 while the store
    holds later points), its graph captured anew or eagerly. Says which in ``notes`` and the batch log. Returns
    (prep, ckpt, step_fn, graphed, failed)."""
    failed = False
    try:
        new = Prepared.restack(prep, live)
        step_fn, graphed = _engine(new, graph, "auto", notes)
    except Exception as e:  # noqa: BLE001 - the trial's StackFailed, or the new stack's allocation
        failed, new = True, None
        for slot, mb in enumerate(prep.members):
            mb.slot, mb.stack = slot, prep.stack
        reason = e.reason if isinstance(e, StackFailed) else f"{type(e).__name__}: {e}"
        why = f"stack of {prep.M} runs not rebuilt at step {step} ({reason}): kept the stack of {prep.M}"
        step_fn, graphed = prep.step_fn, False
        if graph:
            try:
                step_fn, graphed = _engine(prep, graph, "auto", notes)  # its graph captured anew
            except StackFailed:
                pass  # it goes on eagerly
    else:
        why = f"stack of {prep.M} runs rebuilt as {len(live)} at step {step} (the others ended)"
        prep = new
        ckpt = ckpt.handover(step, prep, live) if ckpt is not None else None
    notes.append(why)
    print(f"sparse-tui: {why}", file=sys.stderr, flush=True)
    return prep, ckpt, step_fn, graphed, failed


def _log_train(prep: Prepared, live: list[Tracker], step: int, sums: list[float] | None, reset: set[int]) -> None:
    """train/loss points between evaluations (every ``eval.train_every`` steps): from ``sums`` when the loss sums
    were read back at this step, else from a copy kept on the device until the next evaluation (GPUs)."""
    held = None
    for tr in [tr for tr in live if tr.result is None and step not in tr.ev_steps]:
        if step % tr.cfg.eval.train_every == 0 and tr.n_since:
            if sums is None and held is None:
                held = prep.loss_sum.clone()
            tr.log_train(step, sums[tr.slot] if sums is not None else held[tr.slot])
            reset.add(tr.slot)


def _end_survivors(live: list[Tracker], steps: int) -> None:
    """The runs still live after the last step end finished, or diverged when their last loss is not finite."""
    for tr in live:
        bad = [k for k in ("test/loss", "train/loss") if k in tr.last and not math.isfinite(tr.last[k])]
        if bad:
            tr.end("diverged", steps, f"non-finite {bad[0]} at step {steps}")
        else:
            tr.end("finished", steps)


def _train(cfgs, device, loggers, should_stop, on_done, on_step, kernel, graph_mode, dtype, notes, autocast):
    graph = _graph_and_context(cfgs, device, graph_mode, notes)
    with startup.timed("build"):
        prep = Prepared(cfgs, device, loggers, kernel, dtype, autocast, capturable=graph)
    runs, steps = prep.members, prep.steps
    switching = [tr for tr in runs if tr.switchers]  # runs with a repetition schedule (repetition.py)
    ckpt = Checkpointer.for_stack(runs)  # training/checkpoint.py: continue from the latest checkpoint
    start, live = ckpt.restore(prep) if ckpt is not None else (0, list(runs))
    step_fn, graphed = _engine(prep, graph, graph_mode, notes)  # the trial (puts the state back), the capture
    # what every run's summary says about how it trained (one dict for the stack: a rebuild updates it)
    context: dict = {"stacked_with": prep.M} if prep.M > 1 else {}
    context.update({"cuda_graph": graphed} if graph else {}, notes=notes)
    for tr in runs:
        tr.begin(context, on_done)
    card = calibration.card_of(device)  # a GPU: this stack's first seconds calibrate the projections (per card)
    cal = calibration.Calibrator(card, device, cfgs, graphed, startup.since_start()) if card else None
    if start == 0:
        t0 = time.perf_counter()
        with startup.timed("first evaluation"):
            evaluate_due(prep, runs, 0)
        if cal is not None:
            cal.evaluated(time.perf_counter() - t0)
        heartbeat_all([tr.logger for tr in runs], 0, force=True)
    startup.report(device.type)
    sync_every = 1 if reads_every_step(device) else min(c.eval.every for c in cfgs)
    restack_failed = False
    if cal is not None:
        cal.begin(start)
    for step in range(start + 1, steps + 1):
        prep.opt.set_lr(step, prep.lr_dev)
        for tr in switching:
            tr.schedule_to(step)
        step_fn()
        # the loss sums are read back at evaluations (and every step on CPUs: a NaN stops a run where it appears)
        synced = step % sync_every == 0
        sums = prep.loss_sum.tolist() if synced or any(step in tr.ev_steps for tr in live) else None
        for tr in live:
            tr.n_since += 1
            if (synced or step in tr.ev_steps) and not math.isfinite(sums[tr.slot]):
                tr.end("diverged", step, f"non-finite training loss at step {step}")
        reset: set[int] = set()  # whose loss sums were logged (zeroed below by one multiply on the device)
        due = [tr for tr in live if tr.result is None and step in tr.ev_steps]
        if cal is not None and due:
            cal.pause()
        evaluate_due(prep, due, step, sums)
        if cal is not None and due:
            cal.resume()
        if cal is not None and cal.step(step):
            cal = None
        for tr in due:
            reset.add(tr.slot)
            after = tr.cfg.plateau.stop_after
            if after >= 0 and tr.det.step is not None and step - tr.det.step >= after:
                tr.end("finished", step, f"stopped at step {step}, {step - tr.det.step} steps after its"
                                         " plateau (plateau.stop_after)")
        _log_train(prep, live, step, sums, reset)
        if reset:
            prep.loss_sum.mul_(prep.reset_masks(frozenset(reset)))
        if on_step is not None:
            on_step(step)
        why_all = should_stop() if should_stop is not None else None
        live = [tr for tr in live if tr.result is None]
        if ckpt is not None:
            ckpt.maybe_save(step, prep, live, now=bool(why_all))
        cancelled = heartbeat_all([tr.logger for tr in live], step)  # one transaction for the stack
        for j, tr in enumerate(live):
            why = "cancelled" if j in cancelled else why_all
            if why:
                tr.end(why, step, f"{why} at step {step}")
        live = [tr for tr in live if tr.result is None]
        if not live:
            break
        if 2 * len(live) <= prep.M and steps - step >= RESTACK_MIN_STEPS and not restack_failed:
            step_fn = None  # the old stack's graph is let go before the new one is captured: never two at once
            prep, ckpt, step_fn, graphed, restack_failed = _restack(prep, live, ckpt, graph, step, notes)  # no retry
            context.update({"cuda_graph": graphed} if graph else {})
    _end_survivors(live, steps)
    if ckpt is not None:
        ckpt.finished(runs)
    return [tr.result for tr in runs]
