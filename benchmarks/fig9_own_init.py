"""Fig. 9 (arXiv 2505.17863 App. A.3.4): the reduced flow started from each SGD run's own random initialisation, and
the 60-seed check that the initial overlap w(0) is not biased (docs/REPRODUCTION.md, Fig. 9).

The reduced flow (Eqs. 13-14) assumes W = 0 (Asm. 4). With W ~ N(0, init_scale²) it is extended by one variable,
q = ||W||² - w² (the part of W orthogonal to W*): with u = W*/||W*|| (||W*||² = d), s = ||W||² and the attention α on
the relevant token, the loss of Eq. 2 is

    L = 1/2 [ (d - 2 α √d w + α² s) / d + (1 - α)² s / (d (T - 1)) ]

(the reduced loss Eq. 12 at q = 0, plus 1/2 q (α² + (1 - α)²/(T - 1)) / d). Gradient flow in W gives dw/dt = α/√d -
2 w g, dq/dt = -4 g q with g = (α² + (1 - α)²/(T - 1)) / (2 d), and dΔa/dt = -α(1 - α) dL/dα as in
``theory.rhs_eq12``. The plateau is App. D.1's: the first time L <= 0.2 × L(0).

    # the own-init flow of every toy run of a store (w(0), α(0) from its step-0 metrics; ||W||² from its init)
    python benchmarks/fig9_own_init.py --runs-dir /tmp/fig9
    # the flow from given initial values (the record's table: seed 0 had w(0) = -0.127, Δa(0) = -0.015)
    python benchmarks/fig9_own_init.py --w0 -0.127 --da0 -0.015 --d 256 --T 256
    # the 60-seed check: w(0) over seeds 0..59 at d = 64, init_scale 1/16, drawn by sparse-tui's own task and model
    python benchmarks/fig9_own_init.py --seeds 60 --d 64

Prints one line per run or a summary; nothing is written.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def alpha_of(da: float, T: float) -> float:
    return 1.0 / ((T - 1) * math.exp(-da) + 1.0)


def loss(w: float, da: float, q: float, d: float, T: float) -> float:
    a = alpha_of(da, T)
    s = q + w * w
    return 0.5 * ((d - 2 * a * math.sqrt(d) * w + a * a * s) / d + (1 - a) ** 2 * s / (d * (T - 1)))


def rhs(t: float, y: np.ndarray, d: float, T: float) -> list[float]:
    w, da, q = y
    a = alpha_of(da, T)
    s = q + w * w
    g = (a * a + (1 - a) ** 2 / (T - 1)) / (2 * d)
    dL_dalpha = (a * s - math.sqrt(d) * w) / d - (1 - a) * s / (d * (T - 1))
    return [a / math.sqrt(d) - 2 * w * g, -a * (1 - a) * dL_dalpha, -4 * g * q]


def plateau(w0: float, da0: float, q0: float, d: float, T: float, t_max: float = 1e6) -> float | None:
    """The first t with L <= 0.2 × L(0) (App. D.1), located by the integrator's event finder."""
    target = 0.2 * loss(w0, da0, q0, d, T)

    def ev(t, y, *_):
        return loss(y[0], y[1], y[2], d, T) - target

    ev.terminal, ev.direction = True, -1
    sol = solve_ivp(rhs, (0.0, t_max), [w0, da0, q0], args=(d, T), method="LSODA", events=ev, rtol=1e-8, atol=1e-10)
    return float(sol.t_events[0][0]) if sol.t_events[0].size else None


def from_store(runs_dir: Path) -> None:
    from sparse_tui.science.theory import delta_a_of_alpha
    from sparse_tui.store import RunStore

    store = RunStore(runs_dir)
    flows = {}
    toys = []
    for rec in store.runs(status=["finished"]):
        m, t = rec.config.get("model", {}), rec.config.get("task", {})
        if m.get("kind") == "ode":
            flows[(rec.seed, t.get("d"), t.get("T"))] = rec.plateau_step
        elif m.get("kind") == "toy":
            toys.append(rec)
    print(f"{'seed':>4} {'init':>6} {'w(0)':>7} {'Δa(0)':>7} {'SGD plateau':>11} {'÷ flow from 0':>13} "
          f"{'own-init flow':>13} {'SGD ÷ own':>9}")
    for rec in sorted(toys, key=lambda r: r.seed):
        m, t = rec.config["model"], rec.config["task"]
        d, T = float(t["d"]), float(t["T"])
        series = store.metrics(rec.run_id, ["toy/w", "toy/alpha"])
        w0 = series["toy/w"][1][0]
        da0 = float(delta_a_of_alpha(series["toy/alpha"][1][0], T))
        n_in = d + (1 if t.get("indicator") else 0)
        norm2 = d * n_in * float(m.get("init_scale") or 0.0) ** 2  # E||W0||² of the init
        q0 = max(norm2 - w0 * w0, 0.0)
        own = plateau(w0, da0, q0, d, T) / float(rec.config["train"]["lr"])
        zero = flows.get((rec.seed, t["d"], t["T"]))
        pl = rec.plateau_step
        print(f"{rec.seed:>4} {m.get('init', 'zero'):>6} {w0:>+7.3f} {da0:>+7.3f} {pl or float('nan'):>11.0f} "
              f"{(pl / zero) if (pl and zero) else float('nan'):>13.3f} {own:>13.0f} "
              f"{(pl / own) if pl else float('nan'):>9.3f}")


def seeds_check(n: int, d: int, T: int, init_scale: float) -> None:
    from sparse_tui.models import build_model
    from sparse_tui.presets.loading import expand, load_preset
    from sparse_tui.tasks import make_task
    from sparse_tui.training.metrics import toy_metrics

    preset = Path(__file__).resolve().parents[1] / "presets" / "paper_fig9_sgd.toml"
    loaded = load_preset(preset, [f"task.d={d}", f"task.T={T}", f"seeds={list(range(n))}", "sweep={}",
                                  f'model={{kind="toy", init="normal", init_scale={init_scale}}}'])
    ws = []
    for spec in expand(loaded):
        task = make_task(spec.config)
        ws.append(toy_metrics(build_model(spec.config, task), task)["toy/w"])
    ws = np.array(ws)
    print(f"w(0) over {n} seeds (d = {d}, T = {T}, init_scale {init_scale:g}): mean {ws.mean():+.3f}, std "
          f"{ws.std(ddof=1):.3f} (unbiased: mean 0, std = init_scale = {init_scale:.4f}); negative in "
          f"{int((ws < 0).sum())} of {n}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs-dir", type=Path, help="a store holding paper_fig9_sgd's runs")
    ap.add_argument("--w0", type=float)
    ap.add_argument("--da0", type=float, default=0.0)
    ap.add_argument("--norm2", type=float, help="||W(0)||² (default d, the init's expectation)")
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--T", type=int, default=256)
    ap.add_argument("--seeds", type=int, help="the w(0) check over this many seeds")
    ap.add_argument("--init-scale", type=float, default=1 / 16)
    a = ap.parse_args()
    if a.runs_dir is not None:
        from_store(a.runs_dir)
    elif a.seeds:
        seeds_check(a.seeds, a.d, a.T, a.init_scale)
    else:
        w0 = a.w0 or 0.0
        q0 = (a.d if a.norm2 is None else a.norm2) - w0 * w0 if a.w0 is not None else 0.0
        print(f"d = {a.d}, T = {a.T}, w(0) = {w0:+.3f}, Δa(0) = {a.da0:+.3f}, q(0) = {q0:.1f}: plateau "
              f"{plateau(w0, a.da0, q0, a.d, a.T):.0f} (the flow from zero: {plateau(0.0, 0.0, 0.0, a.d, a.T):.0f})")


if __name__ == "__main__":
    main()
