"""A hypothesis of arXiv 2505.17863 §3.2, beyond the paper (issue 42): "the lower exponent for N_tokens stems from
the fact that most of the feedforward processing can be handled by residual connections". Fig. 4 right's CPU grid
with the residual stream on and off and with and without an MLP (``model.residual``, ``model.mlp``): each of the
four models fitted as Fig. 4 right's law (``library.law_report`` on its runs). Held: without the residual stream the
N_tokens exponent is higher than with it by more than the law entries' target (0.15), with and without the MLP; in
kind: higher, by less, or in one of the two; not reproduced: not higher."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from sparse_tui.atlas import Entry
from sparse_tui.reports import verdict as verdicts
from sparse_tui.reports.base import Claim, Report, make_report, run_config


@dataclass
class HypData:
    fits: list[dict[str, Any]]  # per model: residual, mlp, runs, exponents {variable: measured}, ci, r2


def _model(rec: Any) -> tuple[bool, bool]:
    m = run_config(rec).model
    return m.residual, m.mlp


def hyp_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    from sparse_tui.reports.library import law_report

    groups: dict[tuple[bool, bool], list[str]] = {}
    for rid in run_ids:
        groups.setdefault(_model(store.get(rid)), []).append(rid)
    lines = ["  paper (§3.2, a hypothesis): residual connections keep the N_tokens exponent low (paper: +0.79, "
             "N_pairs +2.25); each model fitted as Fig. 4 right's law",
             f"  {'residual':>8} {'MLP':>5} {'runs':>5} {'N_tokens':>9} {'95% CI':>18} {'N_pairs':>8} {'R²':>6}"]
    fits = []
    for (res, mlp), ids in sorted(groups.items(), reverse=True):
        rep = law_report(store, entry, ids)
        ex = {r["variable"]: r["measured"] for r in rep.data.rows}
        ci = {r["variable"]: list(r["ci"]) for r in rep.data.rows}
        r2 = rep.fit.result.r2
        fits.append({"residual": res, "mlp": mlp, "runs": len(ids), "exponents": ex, "ci": ci, "r2": r2,
                     "censored": rep.fit.result.n_censored})
        lines.append(f"  {str(res):>8} {str(mlp):>5} {len(ids):>5} {ex.get('n_tokens', float('nan')):>+9.3f} "
                     f"{'[%+.3f, %+.3f]' % tuple(ci.get('n_tokens', (float('nan'),) * 2)):>18} "
                     f"{ex.get('n_pairs', float('nan')):>+8.3f} {r2:>6.3f}"
                     + (f"  ({rep.fit.result.n_censored} censored)" if rep.fit.result.n_censored else ""))
    return make_report(entry, run_ids, lines, HypData(fits))


def check_hyp(store: Any, rep: Any) -> tuple[str, str]:
    by = {(f["residual"], f["mlp"]): f["exponents"].get("n_tokens") for f in rep.data.fits}
    tol = verdicts.DEFAULT_TARGET
    rises = []
    for mlp in (False, True):
        on, off = by.get((True, mlp)), by.get((False, mlp))
        if on is not None and off is not None:
            rises.append((mlp, off - on))
    if not rises:
        return "not reproduced", "no pair of models with and without the residual stream"
    why = "; ".join(f"{'with' if mlp else 'without'} MLP: N_tokens {by[(True, mlp)]:+.2f} with the residual stream, "
                    f"{by[(False, mlp)]:+.2f} without ({d:+.2f})" for mlp, d in rises)
    word = ("reproduced" if all(d > tol for _, d in rises) else
            "in kind" if any(d > 0 for _, d in rises) else "not reproduced")
    return word, why + f" (held: higher without it by more than {tol:g} in both)"


CLAIM = Claim("§3.2's hypothesis: the N_tokens exponent is low because residual connections handle the feedforward "
              "processing (held: without the residual stream it rises by more than 0.15, with and without an MLP; "
              "ours)", check_hyp, hyp_report)
