"""``run --dry-run``'s time estimates, torch-free: the CPU estimate from the sweep scheduler's calibration, and GPU
projections: ``project_h100`` (the cost model fitted on the H100 measured 2026-11-26) and ``project`` (a range on a
named card, ``H200: 8–25 min``: from the card's own calibration when a GPU run left one, training/calibration.py,
else from the H100 model scaled to the card). A module of its own: the scheduler imports ``resources``, and this
needs the scheduler."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from sparse_tui.base.numbers import fmt_duration


def time_estimate(specs: list, schedule: str = "auto", workers: int = 0, device: str | None = None) -> str | None:
    """``run --dry-run``'s time estimate: the sweep scheduler's calibration (a few training steps of the batch's
    typical run, timed now on one CPU thread: ``scheduler.measure_thread_speedup``) times every run's steps, spread
    over the workers the plan would start. Evaluations, worker start-up and other load to come are not counted, so
    it is a lower bound of the right order. None on a GPU or when the step cannot be timed (the line says why)."""
    from sparse_tui.training import scheduler

    if not specs:
        return None
    the_plan = scheduler.plan(specs, schedule, device)
    if scheduler._device_type(specs, device) != "cpu":
        return "estimate: none for a GPU from the CPU calibration ('sparse-tui doctor --device cuda' times the GPU)"
    typical = scheduler._typical([s.config for s in specs])
    if typical.model.kind == "ode":
        return "estimate: seconds (the ODE model is integrated, not trained step by step)"
    try:
        t1, _ = scheduler.measure_thread_speedup(typical, 1)
    except Exception as e:  # noqa: BLE001 - an estimate must never stop a dry run
        return f"estimate: none ({type(e).__name__}: {e})"
    at_once = max(1, workers or the_plan.workers)
    total = sum(s.config.train.steps for s in specs) * t1 / min(at_once, len(specs))
    return (f"estimate: about {fmt_duration(total)} here now ({len(specs)} run(s), {min(at_once, len(specs))} at a"
            f" time; a typical step took {t1 * 1e3:.2f} ms on one thread just now; evaluations and start-up not"
            f" counted, and other load on the machine slows it)")


def step_seconds(specs: list, device: str | None = None) -> tuple[float, str]:
    """Seconds per training step of the preset's typical run, from ``run --dry-run``'s cost model: on a CPU the
    scheduler's calibration (one step timed now on one thread), on a GPU the H100 projection's steps; an integrated
    ODE run costs ~1e-4 s a step (Fig. 1c's 20 runs take seconds). With the line that says where it came from."""
    from sparse_tui.training import scheduler

    typical = scheduler._typical([s.config for s in specs])
    if typical.model.kind == "ode":
        return 1e-4, "an ODE step ~0.1 ms (integrated, not trained)"
    if scheduler._device_type(specs, device) != "cpu":
        p = project_h100(specs)
        steps = sum(s.config.train.steps for s in specs)
        if p is not None and steps:
            return (p.train_s + p.eval_s) / steps, "the H100 projection (docs/PERFORMANCE.md, GPU)"
    t1, _ = scheduler.measure_thread_speedup(typical, 1)
    return t1, f"a typical step timed now on one CPU thread: {t1 * 1e3:.2f} ms"


# -- a projected time on one H100 -------------------------------------------------------------------------------
# A cost model fitted on the one GPU this project has measured (docs/PERFORMANCE.md, section "GPU": NVIDIA H100 80GB
# HBM3, torch 2.11, 2026-11-26), for the plan the scheduler would make there (``auto`` on CUDA: stacks by
# ``scheduler.group_runs`` within MEMORY_FRACTION of the card):
# * a training step of one stack: H100_STACK_MS + H100_MS_PER_GFLOP per GFLOP of its padded training matmuls (the
#   scheduler's per-stack line, fitted over 18 graphed fp32 stacks of the blog_nembd and Fig. 4 sweeps: its
#   STACK_OVERHEAD_FLOPS is the same line);
# * everything else, fitted to the two whole sweeps timed on the card (the scheduler's phase of
#   ``benchmarks/sweep_bench.py --device cuda``: blog_nembd 24 runs x 2,000 steps in 21.6 s, Fig. 4 9 runs x 2,000
#   steps in 30.3 s), after their stacks' steps as the line predicts them: H100_START_S once (the process, CUDA
#   context, trials and captures) and H100_EVAL_S per evaluation of one run (eager, one member at a time, with its
#   store writes: the code measured then; the batched evaluation of issue 35 has not met a card).
# Two sweeps fix two constants exactly, so the model reproduces them and nothing else is checked: a projection,
# not a measurement. Precision fp32 (tf32 measured 0.64x of the step on the blog stack; not applied here).
H100 = "NVIDIA H100 80GB HBM3"
H100_DATE = "2026-11-26"
H100_MEMORY_BYTES = int(79.2 * 2**30)
H100_STACK_MS = 1.8
H100_MS_PER_GFLOP = 0.044
H100_START_S = 5.6
H100_EVAL_S = 0.0143


@dataclass(frozen=True)
class Projection:
    """A preset's projected wall time on one H100 (``project_h100``): ``seconds`` in all, of which ``train_s``
    (training steps of ``stacks`` stacks), ``eval_s`` (``evaluations`` of single runs) and ``start_s``."""

    seconds: float
    train_s: float
    eval_s: float
    start_s: float
    runs: int
    stacks: int
    evaluations: int
    source: str = f"projection from the {H100} measured {H100_DATE} (docs/PERFORMANCE.md, GPU)"

    def short(self) -> str:
        """For a table cell: ``~21 min on one H100 (projected, 2026-11-26)``."""
        return f"~{fmt_duration(self.seconds)} on one H100 (projected, {H100_DATE})"

    def line(self) -> str:
        return (f"GPU projection: about {fmt_duration(self.seconds)} on one H100 ({self.runs} run(s) in "
                f"{self.stacks} stack(s): steps {fmt_duration(self.train_s)}, {self.evaluations} evaluations "
                f"{fmt_duration(self.eval_s)}, start-up {fmt_duration(self.start_s)}; {self.source}; not measured)")


def project_h100(preset) -> Projection | None:
    """The projected wall time of ``preset`` (a path, a ``presets.LoadedPreset`` or its expanded ``RunSpec`` list)
    on one H100 with ``auto``'s GPU plan (the cost model above). None when nothing in it trains step by step (the
    integrated ODE runs take seconds on a CPU). Torch-free (``run --dry-run``, ``reproduce --list``)."""
    cfgs = _cfgs(preset)
    if not cfgs:
        return None
    groups, n_evals = _stacks(cfgs, H100_MEMORY_BYTES)
    train = _train_s(cfgs, groups, H100_STACK_MS, H100_MS_PER_GFLOP)
    ev = n_evals * H100_EVAL_S
    return Projection(train + ev + H100_START_S, train, ev, H100_START_S, len(cfgs), len(groups), n_evals)


def _stacks(cfgs: list, memory: int) -> tuple[list, int]:
    """``auto``'s GPU stacks of ``cfgs`` on a card of ``memory`` bytes, and their evaluations in all."""
    from sparse_tui.presets.resources import MEMORY_FRACTION
    from sparse_tui.presets.schema import n_eval_steps
    from sparse_tui.training import scheduler

    groups = scheduler.group_runs(cfgs, budget_bytes=int(MEMORY_FRACTION * memory))
    return groups, sum(n_eval_steps(c.train.steps, c.eval.every) for c in cfgs)


def _train_s(cfgs: list, groups: list, stack_ms: float, ms_per_gflop: float) -> float:
    """Seconds of training steps of the stacks ``groups``, a step of a stack taking ``stack_ms`` + ``ms_per_gflop``
    per GFLOP of its padded training matmuls."""
    from sparse_tui.training import flops

    return sum(cfgs[g[0]].train.steps * (stack_ms + ms_per_gflop * flops.stack_flops([cfgs[i] for i in g]) / 1e9)
               / 1e3 for g in groups)


# -- a range on a named card ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Card:
    """A card a projection can name: ``key`` as printed (``H200``), NVIDIA's name, its memory, and its memory
    bandwidth relative to the H100 the cost model was fitted on (the H200's compute is the H100's; its bandwidth
    about 1.4x: 4.8 against 3.35 TB/s in NVIDIA's data sheets)."""

    key: str
    name: str
    memory_bytes: int
    bandwidth: float


CARDS = (Card("H100", H100, H100_MEMORY_BYTES, 1.0), Card("H200", "NVIDIA H200", int(139 * 2**30), 1.43))
LENT_CARD = "H200"  # the card this project is lent now (issue 44): what --dry-run and reproduce --list name
# Without a calibration on the card, the high end of the range: the H100 model was fitted on two sweeps and checked
# on nothing else (a stated margin, not a measured error).
MODEL_MARGIN = 1.5
# With a calibration: the range held to +-20 % (the tolerance; benchmarks/projection_check.py measures it).
CALIBRATED_MARGIN = 1.2


def card_for(name: str) -> Card | None:
    """The known card whose key appears in ``name`` (a key, or a name as ``torch.cuda.get_device_name`` gives it)."""
    for c in CARDS:
        if c.key.lower() in name.lower():
            return c
    return None


def fmt_range(low: float, high: float) -> str:
    """``12–30 s``, ``8–25 min`` or ``1.5–3.0 h`` (seconds)."""
    if high < 90:
        return f"{max(1, int(low))}–{math.ceil(high)} s"
    if high < 90 * 60:
        return f"{max(1, int(low / 60))}–{math.ceil(high / 60)} min"
    return f"{low / 3600:.1f}–{high / 3600:.1f} h"


@dataclass(frozen=True)
class CardProjection:
    """A preset's projected wall time on one card as a range (``low`` to ``high`` seconds, ``seconds`` between)."""

    card: str
    low: float
    seconds: float
    high: float
    runs: int
    stacks: int
    evaluations: int
    calibrated: bool
    basis: str

    def short(self) -> str:
        """For a table cell or a list: ``H200: 8–25 min``."""
        return f"{self.card}: {fmt_range(self.low, self.high)}"

    def line(self) -> str:
        return (f"GPU projection: {self.short()} ({self.runs} run(s) in {self.stacks} stack(s), {self.evaluations} "
                f"evaluations; {self.basis}; {'calibrated, ' if self.calibrated else ''}not measured for this preset)")


def _cfgs(preset) -> list:
    from sparse_tui.presets.loading import expand, load_preset

    if isinstance(preset, (str, Path)):
        preset = load_preset(preset)
    specs = preset if isinstance(preset, list) else expand(preset)
    cfgs = [s.config for s in specs if s.config.model.kind != "ode"]
    return [c.model_copy(update={"train": c.train.model_copy(update={"device": "cuda"})}) for c in cfgs]


def project(preset, card: str | None = None) -> CardProjection | None:
    """The projected wall time of ``preset`` on ``card`` (a key such as ``H200``, or a name a calibration was
    recorded under; default ``LENT_CARD``) as a range. From the card's calibration points when it has them (its
    fitted step line, its evaluations and start-up, +-20 %), else from the H100 cost model above with the card's
    memory for the stacks: from every step at the card's memory bandwidth to the H100's time plus ``MODEL_MARGIN``.
    None when nothing in the preset trains step by step. Torch-free."""
    from sparse_tui.training import calibration

    cfgs = _cfgs(preset)
    if not cfgs:
        return None
    want = card or LENT_CARD
    known = card_for(want)
    points = [p for name, pts in calibration.load().items()
              if name == want or (known is not None and card_for(name) == known) for p in pts]
    label = known.key if known is not None else want
    memory = known.memory_bytes if known is not None else (
        int(calibration.mean_of(points, "memory_bytes") or H100_MEMORY_BYTES))
    groups, n_evals = _stacks(cfgs, memory)
    line = calibration.step_line(points)
    if line is None and calibration.fp32_points(points):  # one size: the H100 line's shape through its points
        pts = calibration.fp32_points(points)
        mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
        k = my / (H100_STACK_MS + H100_MS_PER_GFLOP * mx)
        line = H100_STACK_MS * k, H100_MS_PER_GFLOP * k
    if line is not None:
        train = _train_s(cfgs, groups, *line)
        ev = n_evals * (calibration.mean_of(points, "eval_s") or H100_EVAL_S)
        start = calibration.mean_of(points, "start_s") or H100_START_S
        mid = start + train + ev
        basis = (f"calibrated on this card: {len(points)} stack(s) timed, the latest {points[-1].get('date', '?')} "
                 f"(training/calibration.py), held to +-{CALIBRATED_MARGIN - 1:.0%}")
        return CardProjection(label, mid / CALIBRATED_MARGIN, mid, mid * CALIBRATED_MARGIN, len(cfgs), len(groups),
                              n_evals, True, basis)
    train = _train_s(cfgs, groups, H100_STACK_MS, H100_MS_PER_GFLOP)
    ev = n_evals * H100_EVAL_S
    bw = known.bandwidth if known is not None else 1.0
    mid = H100_START_S + train + ev
    low = H100_START_S + train / bw + ev
    scaled = f", steps down to 1/{bw:.2f} at the {label}'s memory bandwidth" if bw != 1.0 else ""
    basis = (f"from the {H100} measured {H100_DATE} (docs/PERFORMANCE.md, GPU){scaled}, up to +{MODEL_MARGIN - 1:.0%} "
             f"for what that model has not seen; no calibration on this card yet")
    return CardProjection(label, low, mid, mid * MODEL_MARGIN, len(cfgs), len(groups), n_evals, False, basis)


def projections(preset) -> list[CardProjection]:
    """``run --dry-run``'s GPU lines: the lent card's range (``LENT_CARD``), then every other card a calibration was
    recorded for on this machine (lifecycle: training/calibration.py), each once."""
    from sparse_tui.training import calibration

    cards = [LENT_CARD]
    for name in calibration.load():
        c = card_for(name)
        key = c.key if c is not None else name
        if key not in cards:
            cards.append(key)
    return [p for p in (project(preset, c) for c in cards) if p is not None]
