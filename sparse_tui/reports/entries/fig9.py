"""Fig. 9 (arXiv 2505.17863 App. A.3.4): SGD on the toy model follows the reduced flow."""

from __future__ import annotations

from sparse_tui.reports.base import Claim, _fmt, run_config


def _check_fig9(store, rep):
    flows, sgd = {}, []
    for r in rep.data.runs:
        rec = store.get(r["run_id"])
        if run_config(rec).model.kind == "ode":
            flows[rec.seed] = r["plateau"]
        else:
            sgd.append((rec.seed, r["plateau"]))
    ratios = [pl / flows[s] if (pl and flows.get(s)) else None for s, pl in sgd]
    if not sgd or any(x is None for x in ratios):
        return "not reproduced", "an SGD run or its flow without a plateau"
    word = "reproduced" if all(abs(x - 1) <= 0.3 for x in ratios) else "in kind"
    return word, f"SGD plateau ÷ the flow's: {_fmt(ratios)} (held: within 30% in every seed, ours)"


CLAIM = Claim("SGD follows the reduced flow 'quite accurately' (App. A.3.4)", _check_fig9)
