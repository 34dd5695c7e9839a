"""The 'ode' model: the reduced gradient-flow dynamics of the toy model, recorded like a trained run.

The dynamics are those of ``sparse_tui.science.theory`` (paper Eqs. 12-14 for p = 0, Eqs. 17-21 for p > 0, both with
in-context repetition B); nothing here imports torch.

Time and steps
--------------
Gradient descent with step size lr follows the gradient flow with time t = lr x (number of steps), so step k is
flow time ``t_k = k * train.lr`` (constant schedule, no warmup). With a warmup or a decaying schedule the time is the
cumulative learning rate, t_k = lr * sum_{j<=k} lr_factor(j) (``schedule.lr_factor``, the training loop's). The
optimiser setting is ignored: the flow is the small-step limit of plain gradient descent (Asm. 1), not of Adam.
``batch_size`` is ignored too (the flow uses the expected loss).

Metrics (docs/ARCHITECTURE.md names) at steps 0, every, 2 every, ..., and train.steps:

* ``train/loss``: the training loss (Eq. 17 with B) *at* that step (the trainer's trained runs report the mean over
  the steps since the previous evaluation; for a smooth flow sampled finely the two agree);
* ``test/loss``: without cross-sample repetition; with in-context repetition B if ``task.test_repetition``, else with
  the relevant token at one of the B trained positions and noise at the other B - 1 (the linreg task's test set);
  see ``theory`` for the formula;
* ``toy/w``: the projection <W*, W>_F / ||W*||_F. For p = 0 this is the w of Eqs. 3 and 12; for p > 0 the state
  holds w~ (column 1, the repeated direction) and w (the other d-1 columns, each scaled by 1/sqrt(d-1)), and
  toy/w = (w~ + sqrt(d-1) w) / sqrt(d), which is what ``models/toy.py`` measures on a trained toy model;
* ``toy/w_tilde`` (extra, p > 0 only): w~;
* ``toy/alpha``: attention alpha on one relevant token (Eq. 9);
* ``attn/L1/H0/relevant`` and ``attn/L1/relevant``: the attention mass on the relevant tokens, B alpha;
* ``attn/entropy/L1``: entropy (nats) of the attention, -B a log a - (T-B) b log b with a = alpha,
  b = (1 - B alpha) / (T - B).

Plateau: ``plateau_step`` is the exact crossing of ``[plateau]`` (metric, mode, value) located on the integrator's
dense output, in (fractional) steps: t_cross / lr (inverted through the cumulative schedule when it is not
constant), or None when the threshold is not crossed by train.steps. Metrics the flow can watch exactly:
test/loss, train/loss, toy/w, toy/alpha, attn/L1/H0/relevant, attn/L1/relevant, attn/entropy/L1. For any other
metric ``plateau_exact`` is False and ``plateau_step`` None (the trainer should then use the eval-grid crossing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from sparse_tui.presets.loading import eval_steps
from sparse_tui.presets.schema import RunConfig
from sparse_tui.science import dynamics, theory
from sparse_tui.science.repetition import initial, parse_condition, scheduled
from sparse_tui.science.schedule import lr_factor

# run metric name -> theory observable
PLATEAU_OBSERVABLES = {
    "test/loss": "test_loss",
    "train/loss": "train_loss",
    "toy/w": "w",
    "toy/alpha": "alpha",
    "attn/L1/H0/relevant": "relevant",
    "attn/L1/relevant": "relevant",
    "attn/entropy/L1": "entropy",
}


@dataclass
class OdeRun:
    """An integrated 'ode' run: evaluation steps, metric arrays (same length as ``steps``) and the exact plateau."""

    steps: np.ndarray
    metrics: dict[str, np.ndarray]
    plateau_step: float | None
    plateau_time: float | None = None  # the same crossing in flow time
    plateau_exact: bool = True  # False when the watched metric is not one the flow can compute
    integrator_steps: int = 0
    notes: list[str] = field(default_factory=list)


def _linreg(cfg: Any) -> tuple[float, float, float, float, float]:
    """The flow's parameters (d, T, B, p, test_B) from the linreg task of ``cfg`` (test_B: the test set's
    repetition, 1 without)."""
    task = cfg.task
    if getattr(task, "kind", None) != "linreg":
        raise ValueError("the ode model needs task.kind = 'linreg'")
    B = float(initial(task.B))  # a schedule's start value (``_phases`` follows the schedule)
    return float(task.d), float(task.T), B, float(initial(task.p)), B if task.test_repetition else 1.0


def _tol(cfg: Any) -> dict[str, float]:
    """The integrator's tolerances: from ``cfg.model`` (kind 'ode') when it has ``rtol``/``atol``, else 1e-8 /
    1e-10."""
    return {"rtol": float(getattr(cfg.model, "rtol", 1e-8)), "atol": float(getattr(cfg.model, "atol", 1e-10))}


def _trajectory(cfg: Any, times: np.ndarray, **event) -> Any:
    """``dynamics.trajectory`` of ``cfg``'s task at flow ``times`` (tolerances: ``_tol``)."""
    d, T, B, p, test_B = _linreg(cfg)
    return dynamics.trajectory(times, d, T, B, p, test_B=test_B, **_tol(cfg), **event)


def _metrics(tr: Any) -> dict[str, np.ndarray]:
    """A trajectory's run metrics: each name of ``PLATEAU_OBSERVABLES``, read from the observable it maps to."""
    return {metric: getattr(tr, obs) for metric, obs in PLATEAU_OBSERVABLES.items()}


def _schedule_is_constant(cfg: Any) -> bool:
    return cfg.train.warmup_steps == 0 and cfg.train.schedule == "constant"


def _cum_lr(cfg: Any, upto: int) -> np.ndarray:
    """Cumulative flow time after each step 0..upto for a non-constant schedule (``schedule.lr_factor``)."""
    f = np.array([0.0] + [lr_factor(k, cfg) for k in range(1, upto + 1)])
    return cfg.train.lr * np.cumsum(f)


def step_times(cfg: Any, steps: Sequence[float]) -> np.ndarray:
    """Flow time of each step: steps * lr for a constant schedule, the cumulative learning rate otherwise
    (steps past train.steps continue at the last rate)."""
    s = np.asarray(steps, dtype=float)
    if _schedule_is_constant(cfg):
        return s * cfg.train.lr
    n = cfg.train.steps
    cum = _cum_lr(cfg, n)
    grid = np.arange(n + 1, dtype=float)
    last_rate = cum[-1] - cum[-2] if n >= 1 else cfg.train.lr
    return np.where(s <= n, np.interp(s, grid, cum), cum[-1] + (s - n) * last_rate)


def _time_to_step(cfg: Any, t: float) -> float:
    if _schedule_is_constant(cfg):
        return t / cfg.train.lr
    cum = _cum_lr(cfg, cfg.train.steps)
    return float(np.interp(t, cum, np.arange(cum.size, dtype=float)))


def _plateau_level(cfg: Any, obs: str) -> tuple[float, int]:
    mode, value = cfg.plateau.mode, float(cfg.plateau.value)
    if mode == "fraction":
        y0 = np.zeros(3)
        P = theory._Params(*_linreg(cfg))
        init = float(theory.OBSERVABLES[obs](y0[None], P)[0])
        return value * init, -1
    if mode == "below":
        return value, -1
    return value, +1


def _phases(cfg: Any) -> tuple[str, list[dynamics.Phase]]:
    """The scheduled key of ``cfg``'s task ('p' or 'B') and its schedule as ``dynamics.Phase``s: steps at their flow
    time (``step_times``), a metric condition at the exact crossing of the flow observable (not at the next
    evaluation, as a trained run switches), ``plateau`` at the exact plateau crossing of ``[plateau]``."""
    (key, sched), = scheduled(cfg.task).items()
    d, T, B, p, _ = _linreg(cfg)
    vals = [v for _, v in sched.steps] if sched.steps else [sched.start, *sched.then]
    ends: list[Any] = [float(step_times(cfg, [s])[0]) for s, _ in sched.steps[1:]]
    for w in sched.when:
        c = parse_condition(w)
        if c[0] == "plateau":
            obs = PLATEAU_OBSERVABLES.get(cfg.plateau.metric)
            if obs is None:
                raise ValueError(f"task.{key}: 'plateau' needs a plateau.metric the flow computes")
            ends.append((obs, *_plateau_level(cfg, obs)))
        else:
            if c[1] not in PLATEAU_OBSERVABLES:
                raise ValueError(f"task.{key}: the flow does not compute {c[1]!r}")
            ends.append((PLATEAU_OBSERVABLES[c[1]], c[3], +1 if c[2][0] == ">" else -1))
    ends.append(None)
    return key, [dynamics.Phase(B=v if key == "B" else B, p=v if key == "p" else p, until=e)
                 for v, e in zip(vals, ends)]


def _simulate_switched(cfg: Any, times: np.ndarray, obs: str, level: float, direction: int, notes: list[str]
                       ) -> tuple[dict, float | None, int]:
    key, phases = _phases(cfg)
    d, T, _, _, test_B = _linreg(cfg)
    tr, switches = dynamics.switched_trajectory(times, d, T, phases, test_B=test_B, **_tol(cfg), event=obs,
                                                level=level, direction=direction)
    metrics = _metrics(tr)
    metrics["toy/w_tilde"] = tr.w_tilde
    k = np.searchsorted(np.asarray(switches), times, side="right")  # switches done by each evaluation
    metrics[f"sched/{key}"] = np.array([getattr(phases[i], key) for i in k], dtype=float)
    notes.append(f"task.{key} switched at flow time(s) {', '.join(f'{t:.6g}' for t in switches) or 'never'}")
    return metrics, tr.plateau, tr.steps


def simulate_run(cfg: Any) -> OdeRun:
    """Integrate the reduced dynamics for ``cfg`` (a ``presets.RunConfig`` with a linreg task) and return its
    metrics at the evaluation steps and the exact plateau step (tolerances: ``_tol``). A repetition schedule
    (repetition.py) is followed by ``dynamics.switched_trajectory``."""
    p = _linreg(cfg)[3]
    steps = np.array(eval_steps(cfg), dtype=np.int64)
    times = step_times(cfg, steps)
    notes: list[str] = []
    if cfg.train.optimizer != "sgd" or cfg.train.momentum or cfg.train.weight_decay:
        notes.append("the flow is plain gradient descent in the small-step limit; optimizer settings are ignored")

    metric = cfg.plateau.metric
    obs = PLATEAU_OBSERVABLES.get(metric)
    exact = obs is not None
    if exact:
        level, direction = _plateau_level(cfg, obs)
    else:
        obs, level, direction = "test_loss", -np.inf, -1  # never fires
        notes.append(f"plateau metric {metric!r} is not computed by the flow; no exact plateau")

    if scheduled(cfg.task):
        metrics, pt, n_steps = _simulate_switched(cfg, times, obs, level, direction, notes)
        pt = pt if exact else None
    else:
        tr = _trajectory(cfg, times, event=obs, level=level, direction=direction)
        metrics, pt, n_steps = _metrics(tr), (tr.plateau if exact else None), tr.steps
        if p > 0:
            metrics["toy/w_tilde"] = tr.w_tilde
    ps = None if pt is None else _time_to_step(cfg, pt)
    if ps is not None and ps > cfg.train.steps:  # numerical safety: crossing must lie within the run
        ps, pt = None, None
    return OdeRun(steps=steps, metrics=metrics, plateau_step=ps, plateau_time=pt, plateau_exact=exact,
                  integrator_steps=n_steps, notes=notes)


def ode_curve(cfg: Any, steps: Sequence[float], metric: str = "test/loss") -> np.ndarray:
    """The theory curve of ``metric`` (default the test loss) at ``steps`` for the linreg task of ``cfg``, with flow
    time from ``step_times`` (for overlaying on toy / linreg runs; ``cfg.model`` may be any kind)."""
    _linreg(cfg)  # a linreg task, even for no steps
    steps = np.asarray(steps, dtype=float)
    if steps.size == 0:
        return np.zeros(0)
    table = _metrics(_trajectory(cfg, step_times(cfg, steps)))
    if metric not in table:
        raise ValueError(f"ode_curve: unknown metric {metric!r}; one of {', '.join(table)}")
    return table[metric]


def recorded_curve(cfg: RunConfig | None, total_steps: int | None, points: int = 300
                   ) -> tuple[list[float], list[float]] | None:
    """The reduced dynamics' test loss (arXiv 2505.17863 Eqs. 12-14 and 17-21) for a recorded linreg run (toy, ode or
    transformer), from its typed config (``RunRecord.run_config``), at ``points`` + 1 evenly spaced steps up to
    ``total_steps``: the console's theory overlay (numpy only, no torch). None for other tasks, for a config that no
    longer validates (None), or when the config has no theory curve."""
    if cfg is None or cfg.task.kind != "linreg":
        return None
    try:
        total = int(total_steps or cfg.train.steps)
        steps = [round(i * total / points) for i in range(points + 1)]
        return [float(s) for s in steps], [float(v) for v in ode_curve(cfg, steps)]
    except Exception:  # noqa: BLE001 - no theory curve for this run; the plot says nothing then
        return None
