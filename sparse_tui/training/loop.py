"""The one training loop: a stack of M runs (models/stack.py) trained together; a single run is a stack of one.

``train_stack`` is the only place a Transformer or toy model is trained, whoever asked (``trainer.train_run`` for one
run, ``runner._train_claimed`` for a group, the headless CLI, the console, worker processes). Evaluation,
attention snapshots, plateau detection, divergence, cancellation, logging and the learning-rate schedule are
written once, here, per member of the stack.

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
from contextlib import contextmanager, nullcontext
from typing import Callable

import torch

from sparse_tui.presets import RunConfig, eval_steps
from sparse_tui.training.checkpoint import Checkpointer
from sparse_tui.training.metrics import evaluate, toy_metrics
from sparse_tui.training.optim import StackOptimizer
from sparse_tui.training.plateau import PlateauDetector
from sparse_tui.training.runlog import RunLogger, RunResult
from sparse_tui.training.schedule import lr_factor, lr_table


class StackFailed(RuntimeError):
    """A stack's trial step failed (unsupported kernel, out of memory): nothing was trained or logged."""

    def __init__(self, reason: str, oom: bool = False):
        super().__init__(reason)
        self.reason, self.oom = reason, oom


def snapshot_steps(cfg: RunConfig) -> set[int]:
    ev = eval_steps(cfg)
    if cfg.eval.snapshot_every <= 0:
        picks = {0, cfg.train.steps}
        # plus a few evenly spaced evaluation steps so the heatmap can be stepped through training
        for k in range(1, 4):
            picks.add(ev[round(k * (len(ev) - 1) / 4)])
        return picks
    return {s for s in ev if s % cfg.eval.snapshot_every == 0} | {cfg.train.steps}


@torch.no_grad()
def attention_snapshot(model, batch, n: int) -> tuple[dict, dict]:
    """Full attention maps (all query rows) of the first ``n`` test sequences, for the heatmap panel."""
    x = batch.x[:n]
    prev = getattr(model, "readout_only", None)
    if prev is not None:
        model.readout_only = False
    try:
        _, attn = model(x)
    finally:
        if prev is not None:
            model.readout_only = prev
    L = x.shape[1]
    maps = {}
    for li, a in enumerate(attn, start=1):
        if a is None:
            continue
        a = a.float()
        if L > 160:  # long sequences: keep the readout row only (a T x T map would not fit a terminal anyway)
            a = a[:, :, -1:, :]
        maps[f"L{li}"] = a.permute(1, 0, 2, 3).cpu().numpy()  # [H, E, Lq, L]
    meta = {"seq_len": L, "relevant": batch.relevant[:n].int().cpu().tolist()}
    if x.dtype == torch.long:
        meta["tokens"] = x.cpu().tolist()
    if batch.copy_q is not None:
        meta["copy_q"] = batch.copy_q[:n].cpu().tolist()
        meta["copy_k"] = batch.copy_k[:n].cpu().tolist()
    return maps, meta


def denormals_flushed() -> bool:
    """Whether this thread's CPU arithmetic flushes denormal floats to zero now (FTZ / DAZ)."""
    return float(torch.tensor([1e-39], dtype=torch.float32) * 1.0) == 0.0


@contextmanager
def cpu_float_mode(flush_denormal: bool, device: torch.device):
    """``train.flush_denormal`` on a CPU: denormal floats are flushed to zero while the run trains (restored after).

    Unstable runs drive values into the denormal range (below 1.2e-38), where every CPU float operation takes
    tens of times longer; measured on blog_n80 at lr 1e-2, 600 steps took 49.1 s without and 17.1 s with flushing,
    ending at the same loss (docs/PERFORMANCE.md). It changes results only where a value underflows."""
    if not (flush_denormal and device.type == "cpu"):
        yield
        return
    before = denormals_flushed()
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(before)


@contextmanager
def precision_mode(precision: str, device: torch.device):
    """``train.precision`` for the training steps (evaluations always run in float32):

    * ``fp32``: float32 everywhere (the default; the results the tests and docs quote);
    * ``tf32``: CUDA matmuls round their inputs to TensorFloat-32 (10-bit mantissa, float32 range and accumulation):
      curves match fp32 to about 1e-3 relative, plateau steps can move by an evaluation; no effect on CPUs;
    * ``bf16``: the forward runs under bfloat16 autocast (8-bit mantissa; weights, gradients, optimiser state and
      the loss stay float32): curves differ visibly from fp32 (about 1e-2), plateau lengths can shift; on CPUs it
      is slower than fp32 on most chips."""
    if precision == "tf32" and device.type == "cuda":
        before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        try:
            yield nullcontext
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
        return
    if precision == "bf16":
        # cache_enabled=False: autocast's weight-cast cache must not outlive a CUDA graph capture
        yield lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16, cache_enabled=False)
        return
    yield nullcontext


@contextmanager
def full_fp32(device: torch.device):
    """Evaluations run in float32 whatever ``train.precision`` says: TF32 matmuls are switched off inside."""
    if device.type != "cuda" or not (torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32):
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def graph_wanted(device: torch.device, mode: str) -> bool:
    """Whether the step is captured as a CUDA graph (``train.cuda_graph``: auto / on capture on CUDA devices; never
    in a process where a capture already failed: training/cudagraph.py)."""
    from sparse_tui.training.cudagraph import capture_broken

    return device.type == "cuda" and mode != "off" and capture_broken() is None


def generator_slots(members) -> list[tuple[object, str]]:
    """``(task, attribute)`` of every member's random generators: what the trial puts back, what a CUDA graph
    registers (device generators only) and what a failed capture replaces."""
    return [(mb.task, k) for mb in members for k, v in vars(mb.task).items() if isinstance(v, torch.Generator)]


class _Member:
    """One run inside the stack: its task, its own module (evaluation), test set and bookkeeping."""

    def __init__(self, index, cfg, logger, task, module, test):
        self.index, self.cfg, self.logger, self.task, self.module, self.test = index, cfg, logger, task, module, test
        self.slot = index  # its place in the stack it trains in now (Prepared: changes when the stack shrinks)
        self.ev_steps = set(eval_steps(cfg))
        self.snaps = snapshot_steps(cfg)
        self.det = PlateauDetector(mode=cfg.plateau.mode, value=cfg.plateau.value)
        self.history: dict[str, list[float]] = {}
        self.best: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.n_since = 0
        self.result: RunResult | None = None


def build_members(cfgs: list[RunConfig], device: torch.device, loggers, dtype=None) -> list[_Member]:
    from sparse_tui.models import build_model
    from sparse_tui.tasks import make_task

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
        members.append(_Member(i, cfg, loggers[i], task, module, test))
    return members


class Batcher:
    """Every member's training batch, stacked to ``[M, B, ...]`` (padded on the left / at the end for mixed
    shapes: models/stack.py). A stack of one is a view, no copy."""

    def __init__(self, stack, members: list[_Member], dtype):
        self.stack, self.members, self.dtype = stack, members, dtype
        self.padded = getattr(stack, "padded", False)
        self.classification = members[0].task.classification

    def _float(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.dtype) if (self.dtype is not None and t.is_floating_point()) else t

    def assemble(self, batches) -> tuple[torch.Tensor, torch.Tensor]:
        if len(batches) == 1 and not self.padded:
            return self._float(batches[0].x).unsqueeze(0), self._float(batches[0].y).unsqueeze(0)
        if not self.padded:
            return (self._float(torch.stack([b.x for b in batches])), self._float(torch.stack([b.y for b in batches])))
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
    params = prep.stack.parameters_list()
    saved = [p.detach().clone() for p in params]
    opt_saved = prep.opt.snapshot()
    sums = prep.loss_sum.clone()
    synced = None
    try:
        if stream is not None:
            stream.wait_stream(torch.cuda.current_stream(prep.device))
        with torch.cuda.stream(stream) if stream is not None else nullcontext():
            for i in range(warmup):
                prep.opt.set_lr(1, prep.lr_dev)
                if check_syncs and i == warmup - 1:
                    from sparse_tui.training.cudagraph import host_syncs

                    synced = host_syncs(prep.step_fn)
                else:
                    prep.step_fn()
        if stream is not None:
            torch.cuda.current_stream(prep.device).wait_stream(stream)
        with torch.no_grad(), full_fp32(prep.device):
            for mb in prep.members:
                prep.stack.load_into(mb.slot, mb.module)
                mb.module.eval()
                evaluate(mb.module, mb.test, mb.task.kind, mb.task.classification)
                if mb.cfg.model.kind == "toy":
                    toy_metrics(mb.module, mb.task)
                mb.module.train()
        if prep.device.type == "cuda":
            torch.cuda.synchronize(prep.device)
    except Exception as e:  # noqa: BLE001 - any failure of the trial is a reason to fall back
        oom = isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower()
        raise StackFailed(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".strip(), oom) from None
    finally:
        for p in params:
            p.grad = None
    with torch.no_grad():
        for p, s in zip(params, saved):
            p.copy_(s)
        prep.loss_sum.copy_(sums)
    prep.opt.restore(opt_saved)
    for (owner, name), st in zip(slots, states):
        getattr(owner, name).set_state(st)
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
                 capturable: bool = False, members: list[_Member] | None = None):
        from sparse_tui.models.stack import build_stack, stacked_loss

        self.cfgs, self.device = cfgs, device
        self.M = M = len(cfgs)
        self.kernel, self.dtype, self.capturable = kernel, dtype, capturable
        self.steps, self.bs = cfgs[0].train.steps, cfgs[0].train.batch_size
        if members is None:
            members = build_members(cfgs, device, loggers or [RunLogger() for _ in cfgs], dtype)
        for slot, mb in enumerate(members):
            mb.slot = slot  # its place in this stack (``index``: its place in the caller's list, for ``on_done``)
        self.members = members
        self.classification = classification = self.members[0].task.classification
        self.stack = stack = build_stack([mb.module for mb in self.members], kernel, classification)
        params = stack.parameters_list()
        self.table = lr_table(cfgs, self.steps)
        self.opt = opt = StackOptimizer(params, cfgs, self.table, device, capturable=capturable)
        self.lr_dev = torch.tensor(self.table, device=device, dtype=params[0].dtype)  # [steps, M]
        self.batcher = batcher = Batcher(stack, self.members, dtype)
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
    def restack(cls, old: "Prepared", keep: list[_Member]) -> "Prepared":
        """A smaller stack of ``keep`` (members of ``old``) that continues exactly where they are: their parameters,
        optimiser state, loss sums and bookkeeping move over; their tasks (and random streams) are the same
        objects. The new stack pads only to the largest of the members kept."""
        names = old.stack.names
        for mb in keep:
            old.stack.load_into(mb.slot, mb.module)
        states = old.opt.state_tensors()
        blocks = [{k: [old.stack.member_block(n, v, mb.slot) if v.dim() else v for mb in keep]
                   for k, v in st.items()} for n, st in zip(names, states)]
        sums = old.loss_sum[[mb.slot for mb in keep]].clone()
        new = cls([mb.cfg for mb in keep], old.device, kernel=old.kernel, dtype=old.dtype, autocast=old.autocast,
                  capturable=old.capturable, members=keep)
        new.opt.load_member_states([{k: new.stack.stacked_like(n, b) if b[0].dim() else b[0]
                                     for k, b in bl.items()} for n, bl in zip(names, blocks)])
        new.loss_sum.copy_(sums)
        return new

    def trial(self, stream=None, warmup: int = 1, check_syncs: bool = False) -> str | None:
        return trial_step(self, stream, warmup, check_syncs)

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
    from sparse_tui.training import cudagraph

    stream = torch.cuda.Stream(prep.device) if graph else None
    synced = prep.trial(stream, cudagraph.WARMUP_STEPS if graph else 1, check_syncs=graph)
    if not graph:
        return prep.step_fn, False
    why = None
    if synced is not None:
        why = f"CUDA graph skipped: the step waits for the host ({synced})"
    else:
        try:
            slots = [sl for sl in generator_slots(prep.members) if getattr(*sl).device.type == "cuda"]
            return cudagraph.GraphedStep(prep.step_fn, slots, prep.device, stream).step, True
        except cudagraph.CaptureFailed as e:
            why = f"CUDA graph capture failed ({e.reason})"
    if graph_mode == "on":
        raise StackFailed(why)
    why += "; trained eagerly"
    notes.append(why)
    print(f"sparse-tui: {why}", file=sys.stderr, flush=True)
    return prep.step_fn, False


def _train(cfgs, device, loggers, should_stop, on_done, on_step, kernel, graph_mode, dtype, notes, autocast):
    graph = graph_wanted(device, graph_mode)
    prep = Prepared(cfgs, device, loggers, kernel, dtype, autocast, capturable=graph)
    members = prep.members
    ckpt = Checkpointer.for_stack(members)  # training/checkpoint.py: continue from the latest checkpoint
    start, resumed = ckpt.restore(prep) if ckpt is not None else (0, members)
    runner, graphed = _engine(prep, graph, graph_mode, notes)  # the trial (puts the state back), the capture
    M, steps = prep.M, prep.steps
    sync_every = 1 if device.type == "cpu" else min(c.eval.every for c in cfgs)
    t0 = time.perf_counter()

    def flush_train_log(mb: _Member) -> None:
        """Store the buffered train/loss points in one transaction (at evaluations, checkpoints and the end)."""
        log = getattr(mb, "train_log", None)
        if log:
            mb.logger.series([p[0] for p in log], {"train/loss": [p[1] for p in log]})
            log.clear()

    def do_eval(mb: _Member, step: int, loss_host: list[float]) -> dict[str, float]:
        flush_train_log(mb)
        cfg, model = mb.cfg, mb.module
        prep.stack.load_into(mb.slot, model)
        model.eval()
        with full_fp32(device):
            vals = evaluate(model, mb.test, mb.task.kind, mb.task.classification)
            if cfg.model.kind == "toy":
                vals.update(toy_metrics(model, mb.task))
        model.train()
        if mb.n_since:
            vals["train/loss"] = loss_host[mb.slot] / mb.n_since
        mb.n_since = 0
        vals["lr"] = cfg.train.lr * lr_factor(max(step, 1), cfg)
        mb.logger.metrics(step, vals)
        if step in mb.snaps:
            with full_fp32(device):
                maps, meta = attention_snapshot(model, mb.test, cfg.eval.snapshot_examples)
            mb.logger.attention(step, maps, meta)
        mb.det.update(step, vals.get(cfg.plateau.metric, math.nan))
        for k, v in vals.items():
            mb.history.setdefault(k, []).append(v)
            if k.endswith("loss") and math.isfinite(v):
                mb.best[k] = min(mb.best.get(k, math.inf), v)
            elif k.endswith("acc") and math.isfinite(v):
                mb.best[k] = max(mb.best.get(k, -math.inf), v)
        return vals

    def end(mb: _Member, status: str, step: int, reason: str | None = None) -> None:
        flush_train_log(mb)
        if isinstance(getattr(mb.module, "embed", None), torch.nn.Embedding):
            # the final token embedding outlives the checkpoints (blog 3's geometry view: sparse_tui/geometry.py)
            prep.stack.load_into(mb.slot, mb.module)
            mb.logger.array("embed", mb.module.embed.weight.detach().float().cpu().numpy())
        elapsed = time.perf_counter() - t0
        summary = {
            "final": mb.last,
            "best": mb.best,
            "steps_done": step,
            "wall_seconds": elapsed,
            "steps_per_second": step / elapsed if elapsed > 0 else None,
            "n_params": sum(p.numel() for p in mb.module.parameters()),
        }
        if M > 1:
            summary["stacked_with"] = M
        if graph:
            summary["cuda_graph"] = graphed
        if notes:
            summary["notes"] = list(notes)
        mb.result = RunResult(status=status, reason=reason, plateau_step=mb.det.step, summary=summary, step=step)
        if on_done is not None:
            on_done(mb.index, mb.result)

    def restack(step: int) -> None:
        """Continue with a stack of the live members only (its graph captured anew), and checkpoint it at once."""
        nonlocal prep, runner, graphed, ckpt
        before = prep.M
        prep = Prepared.restack(prep, live)
        runner, graphed = _engine(prep, graph, "auto", notes)
        why = f"stack of {before} runs rebuilt as {prep.M} at step {step} (the others ended)"
        notes.append(why)
        print(f"sparse-tui: {why}", file=sys.stderr, flush=True)
        if ckpt is not None:  # the new stack's checkpoint replaces the old one (other runs, other shapes)
            old = ckpt
            ckpt = Checkpointer.for_stack(live)
            ckpt.started, ckpt.wall_before, ckpt.before_save = old.started, old.wall_before, old.before_save
            ckpt.save(step, prep, live)
            if old.run_ids[0] != ckpt.run_ids[0]:  # else the new file replaced it
                old.files.remove()

    zeros = [0.0] * M
    for mb in members:
        mb.train_log = []  # (step, train/loss) between evaluations, stored at the next one (or checkpoint)
    if ckpt is not None:  # a process killed after a checkpoint must not lose the points logged before it
        ckpt.before_save = lambda: [flush_train_log(mb) for mb in members]
    for mb in members if start == 0 else []:
        mb.last = do_eval(mb, 0, zeros)
        mb.logger.heartbeat(0, force=True)

    live = list(resumed)
    for step in range(start + 1, steps + 1):
        prep.opt.set_lr(step, prep.lr_dev)
        runner()
        for mb in live:
            mb.n_since += 1
        evaluating = [mb for mb in live if step in mb.ev_steps]
        loss_host = None
        if step % sync_every == 0 or evaluating:
            loss_host = prep.loss_sum.tolist()
            for mb in list(live):
                if (step % sync_every == 0 or step in mb.ev_steps) and not math.isfinite(loss_host[mb.slot]):
                    end(mb, "diverged", step, f"non-finite training loss at step {step}")
                    live.remove(mb)
        reset: set[int] = set()
        for mb in evaluating:
            if mb.result is None:
                mb.last = do_eval(mb, step, loss_host)
                reset.add(mb.slot)
                after = mb.cfg.plateau.stop_after
                if after >= 0 and mb.det.step is not None and step - mb.det.step >= after and mb in live:
                    end(mb, "finished", step,
                        f"stopped at step {step}, {step - mb.det.step} steps after its plateau (plateau.stop_after)")
                    live.remove(mb)
        # train/loss between evaluations: the mean over the last eval.train_every steps (one host sync then)
        logging = [mb for mb in live if mb.result is None and step % mb.cfg.eval.train_every == 0
                   and mb not in evaluating and mb.n_since]
        if logging:
            loss_host = prep.loss_sum.tolist() if loss_host is None else loss_host
            for mb in logging:
                mb.train_log.append((step, loss_host[mb.slot] / mb.n_since))
                reset.add(mb.slot)
                mb.n_since = 0
        if reset:  # one multiply on the device for the whole stack
            prep.loss_sum.mul_(prep.reset_masks(frozenset(reset)))
        if on_step is not None:
            on_step(step)
        why_all = should_stop() if should_stop is not None else None
        if ckpt is not None:
            ckpt.maybe_save(step, prep, live, now=bool(why_all))
        for mb in list(live):
            cancel = mb.logger.heartbeat(step)
            why = "cancelled" if cancel else why_all
            if why:
                end(mb, why, step, f"{why} at step {step}")
                live.remove(mb)
        if not live:
            break
        if 2 * len(live) <= prep.M and steps - step >= RESTACK_MIN_STEPS:
            restack(step)
    for mb in live:
        bad = [k for k in ("test/loss", "train/loss") if k in mb.last and not math.isfinite(mb.last[k])]
        if bad:
            end(mb, "diverged", steps, f"non-finite {bad[0]} at step {steps}")
        else:
            end(mb, "finished", steps)
    if ckpt is not None:
        ckpt.finished(members)
    return [mb.result for mb in members]
