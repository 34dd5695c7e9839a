"""Fig. 17 (arXiv 2505.17863 App. C.2): recall emerges with the copy and selection attention."""

from __future__ import annotations

import re
from typing import Any, Sequence

from sparse_tui.atlas import Entry
from sparse_tui.reports.base import (
    RECALL_LEVEL,
    Claim,
    Report,
    Runs,
    _colours,
    _crossing,
    _fig,
    _num,
    figure_writer,
    make_report,
)


def _at(series: dict, name: str, step: float | None) -> float | None:
    """The last logged value of ``name`` at or before ``step`` (None without one)."""
    if step is None or name not in series:
        return None
    steps, vals = series[name]
    return next((v for st, v in zip(reversed(steps), reversed(vals)) if st <= step and v is not None), None)


def _probe_layer(series: dict, kind: str) -> str | None:
    """The ``attn/L{l}/{kind}`` series whose final value is the largest: the layer that learned the probe's
    attention (Fig. 17: the copy in one layer, the selection in a later one)."""
    names = [n for n in series if n.startswith("attn/L") and n.endswith(f"/{kind}") and n.count("/") == 2]
    return max(names, key=lambda n: series[n][1][-1] if series[n][1] else float("-inf"), default=None)


def per_layer(series: dict) -> dict[str, dict[str, Any]]:
    """Each layer's copy and selection probes at the end (``attn/L{l}/{kind}``: the mean over heads), each head's
    (``attn/L{l}/H{h}/{kind}``) and their spread (max - min): App. C.2's per-head and per-layer claims (issue 42)."""
    def last(name: str) -> float | None:
        vals = [v for v in series.get(name, ([], []))[1] if v is not None]
        return vals[-1] if vals else None

    layers = sorted({int(m.group(1)) for n in series if (m := re.fullmatch(r"attn/L(\d+)/(copy|select)", n))})
    out: dict[str, dict[str, Any]] = {}
    for li in layers:
        cell: dict[str, Any] = {}
        for kind in ("copy", "select"):
            heads = [v for n in sorted(series) if re.fullmatch(rf"attn/L{li}/H\d+/{kind}", n)
                     and (v := last(n)) is not None]
            cell[kind], cell[f"{kind}_heads"] = last(f"attn/L{li}/{kind}"), heads
            cell[f"{kind}_spread"] = (max(heads) - min(heads)) if heads else None
        out[str(li)] = cell
    return out


def per_layer_line(li: str, cell: dict[str, Any]) -> str:
    """One layer's probes at the end, each with its heads' values."""
    return f"layer {li}: " + "  ".join(
        f"{k} {_num(cell[k], '.3f')} (heads " + ("/".join(f"{h:.2f}" for h in cell[f'{k}_heads']) or "—") + ")"
        for k in ("copy", "select"))


def probes_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Fig. 17 (App. C.2): per run, the copy probe (attention from the relevant value to its key, in the layer
    that learns it) and the selection probe (query to the relevant value, in its layer) at the start, at half the
    plateau, at the plateau (App. D.1's threshold), when test accuracy first reaches 60% (recall proper) and at
    the end. The paper shows both rising together with accuracy, without numbers."""
    lines = [f"  {len(run_ids)} run(s); paper: curves only (both probes rise with accuracy, copy in layer 3 and "
             "selection in layer 4 of its 4-layer model); measured: the probes at step 0 / plateau÷2 / plateau / "
             "60% accuracy / end"]
    out = []
    for rid in run_ids:
        rec = store.get(rid)
        series = store.metrics(rid)
        pl = rec.plateau_step
        acc = series.get("test/acc", ([], []))
        recall = _crossing(acc, RECALL_LEVEL)
        end = float(acc[0][-1]) if acc[0] else None
        points = {"start": 0.0, "half": None if pl is None else pl / 2, "plateau": pl, "acc60": recall, "end": end}
        row = {"run_id": rid, "label": rec.label, "plateau": pl, "acc60": recall}
        lines.append(f"  {rec.label}: plateau {_num(pl, 'g')}, 60% accuracy at {_num(recall, 'g')}")
        for kind in ("copy", "select"):
            name = _probe_layer(series, kind)
            vals = {k: _at(series, name, st) for k, st in points.items()} if name else {}
            row[kind] = {"metric": name, **vals}
            lines.append(f"    {kind:<6} {name or '—':<16} " + "  ".join(
                f"{k} {_num(vals.get(k), '.3f')}" for k in points))
        row["acc"] = {k: _at(series, "test/acc", st) for k, st in points.items()}
        lines.append("    acc    test/acc         " + "  ".join(f"{k} {_num(v, '.3f')}" for k, v in row["acc"].items()))
        row["layers"] = per_layer(series)  # per layer and per head at the end (App. C.2; issue 42)
        lines.extend(f"    {per_layer_line(li, cell)}" for li, cell in row["layers"].items())
        out.append(row)
    return make_report(entry, run_ids, lines, Runs(out))


@figure_writer()
def fig17_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None) -> Any:
    """Fig. 17 (arXiv 2505.17863 App. C.2): test accuracy (left), the copy probe (attention from the relevant value
    to its key, ``attn/L{l}/copy``, middle) and the selection probe (query to the relevant value,
    ``attn/L{l}/select``, right) of every layer that logs them, against the step; one colour per run, one line
    style per layer."""
    recs = sorted((store.get(r) for r in run_ids), key=lambda r: (r.label or "", r.seed or 0))
    styles = ("-", "--", ":", "-.")
    fig, axes = _fig(3, 3.3, 2.8)
    for j, (rec, c) in enumerate(zip(recs, _colours(len(recs)))):
        series = store.metrics(rec.run_id)
        if "test/acc" in series:
            axes[0].plot(*series["test/acc"], color=c, label=rec.label)
        for ax, kind in zip(axes[1:], ("copy", "select")):
            names = sorted(n for n in series if re.fullmatch(rf"attn/L\d+/{kind}", n))
            for i, name in enumerate(names):  # the layers are named once (line styles), the runs by colour
                ax.plot(*series[name], color=c, ls=styles[i % len(styles)],
                        label=f"layer {name.split('/')[1][1:]}" if j == 0 else None)
    for ax, head in zip(axes, ("test accuracy", "copy: relevant value -> its key",
                               "selection: query -> relevant value")):
        ax.set_xlabel("step")
        ax.set_title(head)
        ax.set_ylim(-0.02, 1.02)
    for ax in axes if recs else ():
        ax.legend()
    fig.suptitle(title or "Fig. 17: attention probes during recall's emergence")
    return fig


def _check_fig17(store, rep):
    ok, vals = True, []
    for r in rep.data.runs:
        for kind in ("copy", "select"):
            v = r.get(kind, {})
            s, a, e = v.get("start"), v.get("acc60"), v.get("end")
            ok = ok and None not in (s, a, e) and a > s and e > s
            vals.append(f"{kind} {s or 0:.2f}→{a or 0:.2f}→{e or 0:.2f}")
    return ("reproduced" if ok else "not reproduced"), "start → 60% accuracy → end: " + ", ".join(vals)


CLAIM = Claim("copy and selection attention rise with accuracy (App. C.2)", _check_fig17, probes_report, fig17_figure)
