"""Fig. 17's per-head and per-layer claims (arXiv 2505.17863 App. C.2): "all heads in the same layer have similar
attention to relevant tokens, and [...] the copying mechanism (to group together the key and the value) only occurs
in layer 3 and the selection mechanism only in layer 4" (of Table 1's 4-layer, 4-head model). Per run, at the end:
each layer's copy and selection probes (``attn/L{l}/copy``, ``attn/L{l}/select``: the mean over heads) and their
spread over the heads of the layer (``attn/L{l}/H{h}/...``: max - min). Issue 42."""

from __future__ import annotations

from typing import Any, Sequence

from sparse_tui.atlas import Entry
from sparse_tui.reports.base import Claim, Report, Runs, make_report
from sparse_tui.reports.entries.fig17 import fig17_figure, per_layer, per_layer_line

ALIKE = 0.2  # heads of a layer "attend alike": the probe's spread over them at most this (ours)
ONLY = 0.5  # a mechanism "only" in a layer: every other layer's probe at most this x that layer's (ours)
KINDS = ("copy", "select")


def heads_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    lines = [f"  {len(run_ids)} run(s); paper: heads of a layer attend alike; copy only in layer 3, selection only "
             "in layer 4 (4-layer model); measured at the end: each layer's probe (mean over heads) and each head's"]
    out = []
    for rid in run_ids:
        rec = store.get(rid)
        series = store.metrics(rid)
        acc = [v for v in series.get("test/acc", ([], []))[1] if v is not None]
        row = {"run_id": rid, "label": rec.label, "acc": acc[-1] if acc else None, "layers": per_layer(series)}
        lines.append(f"  {rec.label}: final test accuracy {row['acc'] or 0:.3f}")
        lines.extend(f"    {per_layer_line(li, cell)}" for li, cell in row["layers"].items())
        out.append(row)
    return make_report(entry, run_ids, lines, Runs(out))


def check_heads(store: Any, rep: Any) -> tuple[str, str]:
    """Held: in every run the copy probe peaks in an earlier layer than the selection probe, each "only" there
    (every other layer at most ``ONLY`` x its peak), and the heads of each of those two layers attend alike (spread
    at most ``ALIKE``); in kind: the copy layer before the selection layer in every run, the rest not; not
    reproduced otherwise."""
    parts, order_all, rest_all = [], True, True
    for r in rep.data.runs:
        layers = r["layers"]
        if not layers:
            return "not reproduced", f"{r['label']}: no per-layer probes logged"
        peak = {k: max(layers, key=lambda li: layers[li][k] or 0.0) for k in KINDS}
        order = int(peak["copy"]) < int(peak["select"])
        only = all((layers[li][k] or 0.0) <= ONLY * (layers[peak[k]][k] or 0.0)
                   for k in KINDS for li in layers if li != peak[k])
        alike = all(layers[peak[k]][f"{k}_spread"] is not None and layers[peak[k]][f"{k}_spread"] <= ALIKE
                    for k in KINDS)
        order_all, rest_all = order_all and order, rest_all and only and alike
        parts.append(f"{r['label']}: copy peaks in layer {peak['copy']} ({layers[peak['copy']]['copy'] or 0:.2f}, "
                     f"heads spread {layers[peak['copy']]['copy_spread'] or 0:.2f}), selection in layer "
                     f"{peak['select']} ({layers[peak['select']]['select'] or 0:.2f}, spread "
                     f"{layers[peak['select']]['select_spread'] or 0:.2f}); only there: {'yes' if only else 'no'}")
    word = "reproduced" if order_all and rest_all else "in kind" if order_all else "not reproduced"
    return word, "; ".join(parts) + f" (alike: spread ≤ {ALIKE:g}; only: other layers ≤ {ONLY:g} × the peak; ours)"


CLAIM = Claim("heads of a layer attend alike; copying in one layer only, selection only in a later one (App. C.2; "
              f"alike: spread over heads ≤ {ALIKE:g}, only: other layers ≤ {ONLY:g} × the peak, ours)", check_heads,
              heads_report, fig17_figure)
