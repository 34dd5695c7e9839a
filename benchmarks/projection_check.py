"""A preset's first minutes on a card against its projection (sparse_tui/lifecycle/estimate.py), read from the store.

    python benchmarks/projection_check.py PRESET --runs-dir DIR [--json FILE]
    python benchmarks/projection_check.py --atlas-plan

benchmarks/gpu_session.sh trains PRESET for a few minutes (stopped at its cap), then calls this: the model-steps its
runs reached (each run's last heartbeat step, or its end) over the wall time from the first run's start to the last
record, against the steps the projection puts in the same time (its start-up first, then its training and
evaluations at an even pace). Prints one line and writes the JSON: ``measured_fraction``, ``projected_fraction``,
``ratio`` (measured / projected pace: 1.0 = the projection held; the issue's target is within 20 %) and the
whole-preset time extrapolated from the measured pace, and whether that lies in the range ``estimate.project`` gives
on ``--card`` (default the lent H200; a name a calibration was recorded under works too).

``--atlas-plan``: one line ``KEY PRESET SECONDS`` per GPU-sized atlas entry, cheapest first by the projection; an
entry whose runs an earlier entry trains (the same configurations: reproduce reuses them) costs 0 s.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def atlas_plan() -> list[tuple[str, str, int]]:
    from sparse_tui import atlas
    from sparse_tui.lifecycle.estimate import project_h100
    from sparse_tui.presets.loading import expand, load_preset
    from sparse_tui.reports.planner import config_key

    rows = []
    for e in atlas.entries():
        p = e.preset("gpu")
        if not p or e.built:
            continue
        specs = expand(load_preset(ROOT / "presets" / f"{p}.toml"))
        pr = project_h100(specs)
        if pr is not None:
            rows.append((pr.seconds, e.key, p, frozenset(config_key(s.config.model_dump(mode="json")) for s in specs)))
    seen: set = set()
    out = []
    for s, key, p, runs in sorted(rows, key=lambda r: r[:3]):
        out.append((key, p, 0 if runs <= seen else round(s)))
        seen |= runs
    return out


def check(preset: str, runs_dir: str, card: str | None = None) -> dict:
    from sparse_tui.lifecycle.estimate import project, project_h100
    from sparse_tui.presets.loading import expand, load_preset
    from sparse_tui.store import RunStore

    specs = expand(load_preset(preset))
    total = sum(s.config.train.steps for s in specs)
    proj = project_h100(specs)
    store = RunStore(Path(runs_dir))
    try:
        recs = store.runs()
    finally:
        store.close()
    started = [r.started_at for r in recs if r.started_at]
    if not started:
        return {"preset": preset, "error": "no run started", "runs": len(recs)}
    last = max((r.ended_at or r.heartbeat_at or r.started_at) for r in recs if r.started_at)
    created = min(r.created_at for r in recs)
    elapsed = last - created  # the command's own start-up counts, as the projection's start_s does
    done = sum(min(r.step or 0, r.total_steps or r.step or 0) for r in recs)
    out = {"preset": preset, "runs": len(recs), "runs_in_preset": len(specs), "model_steps_total": total,
           "model_steps_done": done, "elapsed_s": round(elapsed, 2), "measured_fraction": done / total,
           "statuses": sorted({r.status for r in recs})}
    if proj is not None:
        work = proj.train_s + proj.eval_s
        pf = max(0.0, min(1.0, (elapsed - proj.start_s) / work)) if work > 0 else 1.0
        out.update(projected_s=round(proj.seconds, 1), projected_fraction=pf, projection=proj.source)
        if pf > 0 and done:
            out["ratio"] = out["measured_fraction"] / pf
            out["extrapolated_s"] = round(proj.start_s + max(0.0, elapsed - proj.start_s) / out["measured_fraction"], 1)
            out["within_20_percent"] = abs(out["ratio"] - 1) <= 0.2
    cp = project(specs, card)
    if cp is not None:
        out.update(card=cp.card, card_projection=cp.short(), card_range_s=[round(cp.low, 1), round(cp.high, 1)],
                   card_calibrated=cp.calibrated)
        if "extrapolated_s" in out:
            out["within_card_range"] = cp.low <= out["extrapolated_s"] <= cp.high
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("preset", nargs="?")
    ap.add_argument("--runs-dir", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--atlas-plan", action="store_true")
    ap.add_argument("--card", default=None, help="the card whose projected range is checked (default: the lent one)")
    args = ap.parse_args()
    if args.atlas_plan:
        for key, p, secs in atlas_plan():
            print(key, p, secs)
        return 0
    if not args.preset or not args.runs_dir:
        ap.error("PRESET and --runs-dir are needed (or --atlas-plan)")
    r = check(args.preset, args.runs_dir, args.card)
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1))
    if "error" in r:
        print(f"projection_check: {r['preset']}: {r['error']}")
        return 1
    line = (f"projection_check: {r['preset']}: {r['model_steps_done']} of {r['model_steps_total']} model-steps in "
            f"{r['elapsed_s']:.0f} s ({r['measured_fraction']:.1%})")
    if "ratio" in r:
        line += (f"; the projection ({r['projected_s']:.0f} s in all) put {r['projected_fraction']:.1%} there: "
                 f"pace x{r['ratio']:.2f}, whole preset about {r['extrapolated_s']:.0f} s at this pace")
    if "card_projection" in r:
        line += f"; {r['card_projection']} projected"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
