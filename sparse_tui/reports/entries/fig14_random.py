"""Fig. 14's fourth configuration (arXiv 2505.17863 App. B.3): no relevant-token feature and a random position,
where "the network cannot solve the task". A curves entry (the generic report and figure) with its own check: no run
without the feature reaches the plateau threshold, while the control (the same point with the feature, Fig. 14
left's configuration) does. Issue 42."""

from __future__ import annotations

from typing import Any

from sparse_tui.reports.base import Claim, run_config


def check_fig14_random(store: Any, rep: Any) -> tuple[str, str]:
    """Fig. 14's fourth configuration: without the relevant-token feature and with a random position the network
    "cannot solve the task" (App. B.3). Held: no run without the feature reaches the plateau threshold, and every
    run of the control (the same point with the feature, Fig. 14 left's configuration) does; in kind: none without
    the feature does, but the control fails in some seed (the budget cannot tell); not reproduced: a run without the
    feature solves it."""
    recs = [store.get(r) for r in rep.run_ids]

    def feature(r: Any) -> bool:
        return bool(getattr(run_config(r).task, "indicator", True))

    def cell(rs: list) -> str:
        got = [str(int(r.plateau_step)) for r in rs if r.plateau_step is not None]
        return f"{len(got)} of {len(rs)} reach it" + (f" (steps {', '.join(got)})" if got else "") + (
            f", trained to step {max(r.step for r in rs)}" if rs else "")

    without = [r for r in recs if not feature(r)]
    control = [r for r in recs if feature(r)]
    why = f"without the feature {cell(without)}; with it (control) {cell(control)}"
    if not without:
        return "not reproduced", "no run without the feature"
    if any(r.plateau_step is not None for r in without):
        return "not reproduced", why
    return ("reproduced" if control and all(r.plateau_step is not None for r in control) else "in kind"), why


CLAIM = Claim("without the relevant-token feature and with a random position the network 'cannot solve the task' "
              "(App. B.3; held: no run reaches the threshold while the control with the feature does)",
              check_fig14_random)
