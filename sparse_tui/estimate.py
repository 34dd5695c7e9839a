"""``run --dry-run``'s time estimate, from the sweep scheduler's calibration (a module of its own: the scheduler
imports ``resources``, and this needs the scheduler)."""

from __future__ import annotations

from sparse_tui.numbers import fmt_duration


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
