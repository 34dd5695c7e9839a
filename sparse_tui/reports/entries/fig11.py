"""Fig. 11 (arXiv 2505.17863 App. B.2): Transformer learning curves with sharp transitions."""

from __future__ import annotations

from sparse_tui.reports.base import Claim, _fmt


def _check_fig11(store, rep):
    ratio = [r["ratio"] for r in rep.data.runs]
    if any(x is None for x in ratio):
        return "not reproduced", "a run without a plateau"
    word = "reproduced" if all(x <= 0.25 for x in ratio) else "in kind"
    return word, f"drop ÷ plateau {_fmt(ratio)} (sharp: ≤ 0.25, ours)"


CLAIM = Claim("sharp transitions (App. B.2)", _check_fig11)
