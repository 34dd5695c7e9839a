"""Fig. 16 (arXiv 2505.17863 App. C.2): Fig. 5's runs read on their training data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from sparse_tui.atlas import Entry
from sparse_tui.atlas.paper_recall import FIG16_TRAIN_LOSS
from sparse_tui.reports.base import Claim, Report, _colours, _crossing, _fig, _fmt, _num, figure_writer, make_report
from sparse_tui.reports.entries.fig5 import _is_baseline, task_values, varied_task_key


@dataclass
class Fig16Data:
    level: float  # FIG16_TRAIN_LOSS
    runs: list[dict[str, Any]]
    only_faster: bool | None  # every run with repetition reaches the level sooner than its seed's baseline


def fig16_report(store: Any, entry: Entry, run_ids: Sequence[str]) -> Report:
    """Fig. 16 (App. C.2): Fig. 5's runs read on their training data (``train/loss``: fresh batches with the run's
    repetition). Per run the first step with train/loss <= ``FIG16_TRAIN_LOSS`` and the speed-up over the baseline
    (B = 1, p = 0) of the same seed, beside the test-set plateau (5%, no repetition) and final test accuracy that show
    the overfitting Fig. 5 sees. The paper: on training data repetition only speeds up (curves, no numbers)."""
    recs = [store.get(r) for r in run_ids]
    var = varied_task_key(recs) or "run"
    rows: list[dict[str, Any]] = []
    for rec in recs:
        value = task_values(rec).get(var)
        steps, vals = store.metrics(rec.run_id).get("train/loss", ([], []))
        cross = _crossing((steps, vals), FIG16_TRAIN_LOSS, above=False)
        rows.append({"run_id": rec.run_id, "variable": var, "value": value, "seed": rec.seed, "train_cross": cross,
                     "baseline": _is_baseline(rec), "final_train_loss": vals[-1] if vals else None,
                     "plateau": rec.plateau_step, "final_test_acc": (rec.final or {}).get("test/acc")})
    base = {r["seed"]: r["train_cross"] for r in rows if r["baseline"]}
    for r in rows:
        b, c = base.get(r["seed"]), r["train_cross"]
        r["speedup"] = b / c if (b and c) else None
    rows.sort(key=lambda r: (float(r["value"]) if isinstance(r["value"], (int, float)) else 0.0, r["seed"] or 0))
    rep_rows = [r for r in rows if not r["baseline"]]
    only_faster = (all(r["speedup"] is not None and r["speedup"] >= 1 for r in rep_rows) if rep_rows and base
                   else None)
    lines = [f"  {len(rows)} run(s); paper: on the training data repetition only speeds emergence up (curves, no "
             f"numbers); measured: first step with train/loss <= {FIG16_TRAIN_LOSS:g} (ours) and the speed-up over "
             "the same seed's B = 1, p = 0 run; test plateau (5%, no repetition) and final test accuracy beside",
             f"  {var:>6} {'seed':>4} {'train <= ' + format(FIG16_TRAIN_LOSS, 'g'):>11} {'speed-up':>8} "
             f"{'final train':>11} {'test plateau':>12} {'final test acc':>14}"]
    for r in rows:
        val = format(r["value"], "g") if isinstance(r["value"], (int, float)) else str(r["value"] or "—")
        lines.append(f"  {val:>6} {_num(r['seed'], '4g')} {_num(r['train_cross'], '11g')} "
                     f"{_num(r['speedup'], '8.2f')} {_num(r['final_train_loss'], '11.3g')} "
                     f"{_num(r['plateau'], '12g')} {_num(r['final_test_acc'], '14.3f')}")
    verdict = {True: "yes", False: "NO", None: "— (no baseline run or no crossing)"}[only_faster]
    lines.append(f"  every run with repetition reaches the training-loss level sooner than its seed's baseline: "
                 f"{verdict}")
    return make_report(entry, run_ids, lines, Fig16Data(FIG16_TRAIN_LOSS, rows, only_faster))


@figure_writer()
def fig16_figure(store: Any, run_ids: Sequence[str], *, title: str | None = None) -> Any:
    """Fig. 16 (arXiv 2505.17863 App. C.2), the training counterpart of Fig. 5: the training loss (fresh batches with
    the run's repetition; the emergence level ``atlas.paper_recall.FIG16_TRAIN_LOSS`` as a grey line) left, the test
    accuracy without repetition right (where Fig. 5 sees the overfitting); one colour per swept value (B or p), one
    line style per seed."""
    recs = [store.get(r) for r in run_ids]
    var = varied_task_key(recs)
    key = lambda rec: (var, task_values(rec).get(var))  # noqa: E731
    recs.sort(key=lambda r: (float(key(r)[1]) if isinstance(key(r)[1], (int, float)) else 0.0, r.seed or 0))
    values = list(dict.fromkeys(key(r) for r in recs))
    seeds = sorted({r.seed or 0 for r in recs})
    styles = ("-", "--", ":", "-.")
    fig, axes = _fig(2, 3.8, 2.9)
    colour = dict(zip(values, _colours(len(values))))
    for rec in recs:
        series = store.metrics(rec.run_id)
        k = key(rec)
        ls = styles[seeds.index(rec.seed or 0) % len(styles)]
        label = f"{k[0]} = {k[1]:g}" if (rec.seed or 0) == seeds[0] and isinstance(k[1], (int, float)) else None
        for ax, name in zip(axes, ("train/loss", "test/acc")):
            if name in series:
                ax.plot(*series[name], color=colour[k], ls=ls, lw=1.0, label=label)
    axes[0].axhline(FIG16_TRAIN_LOSS, color="0.55", lw=0.7)
    axes[0].set_yscale("log")
    axes[1].set_ylim(-0.02, 1.02)
    for ax, head in zip(axes, ("training data, with repetition (train loss)",
                               "test data, no repetition (accuracy)")):
        ax.set_xlabel("step")
        ax.set_title(head)
    axes[0].legend(title=("line style: seed " + ", ".join(map(str, seeds))) if len(seeds) > 1
                   else None)
    fig.suptitle(title or "Fig. 16: repetition on the training data")
    return fig


def _check_fig16(store, rep):
    runs = [r for r in rep.data.runs if not r["baseline"]]
    sp = [r["speedup"] for r in runs]
    word = "reproduced" if rep.data.only_faster else "not reproduced"
    return word, f"training loss ≤ {rep.data.level:g} sooner than the baseline in every run: {_fmt(sp)}×"


LEFT = Claim("on the training data B only speeds up (App. C.2)", _check_fig16, fig16_report, fig16_figure)
RIGHT = Claim("on the training data p only speeds up (App. C.2)", _check_fig16, fig16_report, fig16_figure)
