"""Live emergence forecast: when will a run leave its plateau? (issue 33; the laws are arXiv 2505.17863's subject)

For a run whose preset belongs to an atlas entry with a law (``atlas.law_of_presets``), or a toy / ODE run, the
forecast plateau step with an interval, from the first source that applies:

* ``refit``: the power law refitted (App. D.2, ``fitting.fit_power_law``) on the preset's other runs that have left
  their plateau, when at least 3 have; on the entry's ``fit_vars`` that vary among them (none vary: their geometric
  mean); not when the run differs from them in a variable they do not vary (no slope for it: the next source).
  Interval: exp(+-2 s) around the fit, s the residual standard deviation of log plateau (at least 5%).
* ``paper``: the paper's law (``theory.PAPER_FITS``) scaled by the prefactor the preset measured: the geometric mean
  of plateau / law over the preset's runs that left their plateau (1 or 2 of them). Interval: exp(+-2 s) of those
  ratios (one run: x/÷ 2).
* ``theory``: a toy or ODE run trained by SGD / integrated: the reduced flow's time scale sqrt(d) T / (B f(p, d))
  (App. A.3.2, A.4.2, sqrt(dT) read as sqrt(d) T) x 1.39, divided by lr; interval x 1.27 .. 1.50, the range of
  integrated plateau / time scale over d 16-256, T 64-4096 (docs/THEORY.md, "Closed forms").

``eta_s``: seconds from the run's last heartbeat to the forecast step, at its speed so far (running runs). After the
plateau: ``ratio`` =
measured / forecast. ``loo`` measures the forecast's accuracy leave-one-out on a set of runs.

No torch, no textual; reads records (``store.RunRecord``-like: ``run_id``, ``preset``, ``params``, ``plateau_step``,
``status``, ``step``, ``started_at``, ``heartbeat_at``).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from sparse_tui import atlas
from sparse_tui.science.fitting import FitError, Resolver, fit_power_law
from sparse_tui.science.repetition import Schedule, initial
from sparse_tui.science.theory import PAPER_FITS, f_rep

MIN_REFIT = 3  # runs that left their plateau before the law is refitted on them
FLOW_RATIO = (1.27, 1.39, 1.50)  # integrated plateau / (sqrt(d) T / (B f)): low, mid, high (docs/THEORY.md)


def _row(rec: Any) -> dict:
    """A run as a fitting row; a repetition schedule (stored as its string) counts as its start value."""
    row = {f"params.{k}": v for k, v in rec.params.items()}
    for k in ("params.task.p", "params.task.B"):
        if isinstance(row.get(k), str):
            try:
                row[k] = Schedule.model_validate(row[k]).initial
            except ValueError:
                row.pop(k)
    return {**row, "plateau_step": rec.plateau_step}


def _value(row: dict, name: str) -> float:
    return Resolver([row]).value(row, name, 0)


def _law(rec: Any) -> tuple[str | None, tuple[str, ...]]:
    """The paper law's key and the fit variables of the atlas entry of the run's preset."""
    law, _ = atlas.law_of_presets([rec.preset])
    hits = atlas.entries_of_preset(rec.preset)
    fit_vars = next((e.fit_vars for e in hits if e.law == law and e.fit_vars), ())
    return law, tuple(fit_vars)


def _interval(center: float, s: float) -> tuple[float, float]:
    k = math.exp(2.0 * max(s, 0.05))
    return center / k, center * k


def _refit(row: dict, peers: list[dict], fit_vars: Sequence[str]) -> tuple[float, tuple[float, float]] | None:
    logs = [math.log(p["plateau_step"]) for p in peers]
    try:
        varying = [v for v in fit_vars if len({_value(p, v) for p in peers}) > 1]
        if any(_value(row, v) != _value(peers[0], v) for v in fit_vars if v not in varying):
            return None  # the run lies off the peers in a variable they do not vary: no slope for it (-> paper)
    except FitError:
        return None
    if len(peers) >= len(varying) + 2 and varying:
        try:
            fit = fit_power_law(peers, varying)
            center = fit.predict(**{v: _value(row, v) for v in varying})
            return center, _interval(center, fit.residual_std)
        except FitError:
            pass
    if varying and any(_value(row, v) != _value(peers[0], v) for v in varying):
        return None  # the run sits where the peers' variables vary, with too few of them for a law
    mean = sum(logs) / len(logs)
    s = math.sqrt(sum((x - mean) ** 2 for x in logs) / max(1, len(logs) - 1))
    return math.exp(mean), _interval(math.exp(mean), s)


def _paper(row: dict, peers: list[dict], law: str) -> tuple[float, tuple[float, float]] | None:
    fit = PAPER_FITS[law]
    try:
        x = {v: _value(row, v) if v != "f" else float(f_rep(_value(row, "p"), _value(row, "d")))
             for v in fit.exponents}
        ratios = []
        for p in peers:
            xp = {v: _value(p, v) if v != "f" else float(f_rep(_value(p, "p"), _value(p, "d"))) for v in fit.exponents}
            ratios.append(math.log(p["plateau_step"] / fit.predict(**xp)))
    except (FitError, KeyError, ValueError, ZeroDivisionError):
        return None
    c = math.exp(sum(ratios) / len(ratios))
    center = c * fit.predict(**x)
    if len(ratios) == 1:
        return center, (center / 2.0, center * 2.0)
    m = sum(ratios) / len(ratios)
    return center, _interval(center, math.sqrt(sum((r - m) ** 2 for r in ratios) / (len(ratios) - 1)))


def _flow(rec: Any) -> tuple[float, tuple[float, float]] | None:
    p = rec.params
    if p.get("model.kind") not in ("toy", "ode") or p.get("task.kind") != "linreg":
        return None
    if p.get("model.kind") == "toy" and p.get("train.optimizer") != "sgd":
        return None
    try:
        d, T, lr = float(p["task.d"]), float(p["task.T"]), float(p["train.lr"])
        B, rep = float(initial(p.get("task.B", 1))), float(initial(p.get("task.p", 0.0)))
    except (KeyError, TypeError, ValueError):
        return None
    scale = math.sqrt(d) * T / (B * float(f_rep(rep, d))) / lr
    return scale * FLOW_RATIO[1], (scale * FLOW_RATIO[0], scale * FLOW_RATIO[2])


_CACHE: dict[tuple, tuple | None] = {}  # (run, its params, its peers' plateaus) -> (step, interval, source, n)


def _predict(rec: Any, others: Iterable[Any]) -> tuple | None:
    peer_recs = [o for o in others if o.preset == rec.preset and o.run_id != rec.run_id and o.status == "finished"
                 and o.plateau_step is not None and o.plateau_step > 0]
    key = (rec.run_id, rec.preset, repr(sorted(rec.params.items())),
           tuple(sorted((o.run_id, o.plateau_step) for o in peer_recs)))
    if key in _CACHE:
        return _CACHE[key]
    peers, row = [_row(o) for o in peer_recs], _row(rec)
    law, fit_vars = _law(rec)
    got, source = None, None
    if len(peers) >= MIN_REFIT and law is not None:
        got, source = _refit(row, peers, fit_vars), "refit"
    if got is None and peers and law is not None:
        got, source = _paper(row, peers, law), "paper"
    if got is None:
        got, source = _flow(rec), "theory"
    out = None if got is None else (got[0], got[1], source, len(peers) if source != "theory" else 0)
    if len(_CACHE) > 20_000:
        _CACHE.clear()
    _CACHE[key] = out
    return out


def forecasts(recs: Sequence[Any]) -> dict[str, dict | None]:
    """``forecast`` of every run of ``recs`` from the others (the console's Runs table, ``runs``). Each run is given
    only its own preset's runs (the only peers ``_predict`` uses), so a store of n runs costs O(n), not O(n²), per
    refresh of the table."""
    by_preset: dict[Any, list[Any]] = {}
    for r in recs:
        by_preset.setdefault(r.preset, []).append(r)
    return {r.run_id: forecast(r, by_preset[r.preset]) for r in recs}


def forecast(rec: Any, others: Iterable[Any]) -> dict | None:
    """The forecast of run ``rec`` from ``others`` (any runs; the finished runs of its preset that left their
    plateau are used, never itself), or None when no source applies. Keys: ``step``, ``low``, ``high``, ``source``,
    ``n``
    (runs it used), and ``eta_s`` (running, before its plateau) or ``ratio`` (after it)."""
    got = _predict(rec, others)
    if got is None:
        return None
    step, (lo, hi), source, n = got
    out = {"step": step, "low": lo, "high": hi, "source": source, "n": n}
    if rec.plateau_step is not None:
        out["ratio"] = rec.plateau_step / step
    elif rec.status == "running" and rec.step and rec.started_at is not None and rec.heartbeat_at is not None:
        # at the speed of the run so far, as of its last heartbeat (when its step was written)
        speed = rec.step / max(1e-9, rec.heartbeat_at - rec.started_at)
        out["eta_s"] = max(0.0, (step - rec.step) / speed)
    return out


def loo(recs: Sequence[Any]) -> list[tuple[Any, float | None]]:
    """Leave-one-out: each run that left its plateau, forecast from the others, with measured / forecast."""
    out = []
    for r in recs:
        if r.plateau_step is None:
            continue
        blind = _Blind(r)
        f = forecast(blind, [o for o in recs if o is not r])
        out.append((r, None if f is None else r.plateau_step / f["step"]))
    return out


class _Blind:
    """A run as its forecast sees it before its plateau (the plateau hidden)."""

    def __init__(self, rec: Any):
        self.run_id, self.preset, self.params, self.status = rec.run_id, rec.preset, rec.params, "finished"
        self.plateau_step, self.step, self.started_at, self.heartbeat_at = None, rec.step, None, None


def _steps(x: float) -> str:
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def short(f: dict | None) -> str:
    """The forecast step alone, '~1.2k' (the console's plateau cell before the plateau), or '-'."""
    return "-" if f is None else "~" + _steps(f["step"])


def detail(f: dict) -> str:
    """One phrase for the console's detail line: the forecast with its interval, source and ETA, or after the
    plateau measured / forecast."""
    src = {"refit": f"refit on {f['n']} runs", "paper": f"paper's law × {f['n']} run(s)",
           "theory": "√d·T/(B·f)"}[f["source"]]
    if "ratio" in f:
        return f"plateau {f['ratio']:.2f}× its forecast {_steps(f['step'])} ({src})"
    eta = f.get("eta_s")
    when = "" if eta is None else f", in {eta / 60:.0f} min" if eta >= 60 else f", in {eta:.0f} s"
    return f"forecast plateau ~{_steps(f['step'])} ({_steps(f['low'])}–{_steps(f['high'])}, {src}{when})"


def cell(f: dict | None) -> str:
    """The Runs table's cell: '~1.2k' (forecast, running), '0.93x' (measured / forecast), or '-'."""
    if f is None:
        return "-"
    if "ratio" in f:
        return f"{f['ratio']:.2f}x"
    step = f["step"]
    text = f"~{step / 1000:.1f}k" if step >= 1000 else f"~{step:.0f}"
    eta = f.get("eta_s")
    if eta is not None:
        text += f" {eta / 60:.0f}m" if eta >= 60 else f" {eta:.0f}s"
    return text
