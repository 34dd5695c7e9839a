"""Repetition schedules: ``task.p`` and ``task.B`` that change while a run trains (arXiv 2505.17863 §4, "Data
diversity as a path towards active learning?": "whenever an agent detects it is stuck on a task, it can decrease data
diversity to accelerate learning, then increase diversity after the critical transition occurs").

A repetition key is a number (a constant, as before) or a schedule, written as a TOML inline table or as one string
(the string is the stored form: a run's params keep ``task.p`` one value, and sweeps list schedules as strings)::

    p = 0.9                                                        # a constant
    p = {steps = [[0, 0.9], [2000, 0.0]]}                          # "steps 0:0.9 2000:0"
    p = {start = 0.9, then = 0.0, when = "test/acc >= 0.05"}       # "0.9 -> 0 when test/acc >= 0.05"
    p = {start = 0.0, then = [0.9, 0.0], when = ["stuck 5", "plateau"]}   # "0 -> 0.9 when stuck 5 -> 0 when plateau"

Conditions (``when``), checked at the run's evaluations, one switch at most per evaluation, in order:

* ``METRIC >= X`` / ``<= X`` / ``> X`` / ``< X``: a metric the run logs (``test/acc``, ``train/loss``, ...);
* ``stuck K [METRIC]``: METRIC (default ``plateau.metric``) has not improved on its best for K evaluations in a row
  since this switch was armed (improved = lower for a ``*loss``, higher otherwise): the agent-side "stuck" rule;
* ``plateau``: the run's own plateau detector (``[plateau]``) has fired.

A value is in force for the training steps *after* the step it was set at: ``steps`` entry ``[s, v]`` and a switch
that fires at evaluation step s both act from training step s + 1 on. The value in force after each evaluation is
logged as the metric ``sched/p`` / ``sched/B``. ``Switcher`` holds one run's switch state, which a checkpoint keeps.

Pure Python (pydantic only): presets.py, the training loop and the reduced dynamics (models/ode.py) share it.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, model_serializer, model_validator

from sparse_tui.base.parse import number, spend

REPEAT_KEYS = ("p", "B")  # the task keys that accept a schedule (recall and linreg)

# Numbers are read by base/parse.py (linear, finite, NaN refused); these patterns only split a condition into its
# parts, and each part's characters can be read one way only (no backtracking beyond one character).
_CMP = re.compile(r"^(?P<m>[A-Za-z][\w/]*)\s*(?P<op>>=|<=|>|<)\s*(?P<x>\S+)$")
_STUCK = re.compile(r"^stuck\s+(?P<k>\S+)(?:\s+(?P<m>[A-Za-z][\w/]*))?$")
MAX_STEP = 2**63 - 1  # a step or an evaluation count as the store keeps it


def _num(v: Any, what: str) -> float:
    if isinstance(v, str):  # a table's value is a TOML number; a text is the string form's business
        raise ValueError(f"{what} must be a finite number, got {v!r}")
    try:
        return float(number(v, what))
    except ValueError:
        raise ValueError(f"{what} must be a finite number, got {v!r}") from None


def parse_condition(text: str) -> tuple:
    """``("cmp", metric, op, x)``, ``("stuck", k, metric | None)`` or ``("plateau",)``; ValueError otherwise."""
    s = " ".join(str(text).split())
    spend(3 * len(s))  # the split and join above, and at most one of the two patterns below
    if s == "plateau":
        return ("plateau",)
    m = _STUCK.match(s)
    if m:
        try:
            k = number(m["k"], "stuck K", integer=True)
        except ValueError as e:
            raise ValueError(f"when {_short(s)}: {e}") from None
        if not 1 <= k <= MAX_STEP:
            raise ValueError(f"when {_short(s)}: stuck needs K >= 1 evaluations (and fewer than the run has)")
        return ("stuck", k, m["m"])
    m = _CMP.match(s)
    if m:
        try:
            x = float(number(m["x"], "the threshold"))
        except ValueError as e:
            raise ValueError(f"when {_short(s)}: {e}") from None
        return ("cmp", m["m"], m["op"], x)
    raise ValueError(f"when {_short(s)}: expected 'METRIC >= X' (or <=, >, <), 'stuck K [METRIC]' or 'plateau'")


def _short(s: str) -> str:
    """A condition or schedule for an error line: at most about 60 characters."""
    return repr(s if len(s) <= 60 else f"{s[:40]}…{s[-10:]}")


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


class Schedule(BaseModel):
    """A repetition schedule (see the module doc): ``steps`` [[step, value], ...] from step 0, or ``start`` and one
    ``then`` value per ``when`` condition."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: float | None = None
    then: tuple[float, ...] = ()
    when: tuple[str, ...] = ()
    steps: tuple[tuple[int, float], ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any) -> Any:
        if isinstance(data, str):
            return _parse_string(data)
        if not isinstance(data, Mapping):
            raise ValueError("must be a number, a schedule table or a schedule string")
        data = dict(data)
        unknown = sorted(set(data) - {"start", "then", "when", "steps"})
        if unknown:
            raise ValueError(f"unknown schedule key {unknown[0]!r} (use steps, or start, then and when)")
        if "steps" in data:
            if set(data) != {"steps"}:
                raise ValueError("a schedule has either steps or start/then/when, not both")
            st = data["steps"]
            if not isinstance(st, list) or not st or not all(isinstance(e, list) and len(e) == 2 for e in st):
                raise ValueError("steps must be a list of [step, value] pairs, e.g. [[0, 0.9], [2000, 0.0]]")
            pairs = []
            for s, v in st:
                if isinstance(s, bool) or not isinstance(s, int) or s < 0:
                    raise ValueError(f"steps: a step must be an integer >= 0, got {s!r}")
                pairs.append((s, _num(v, "steps: a value")))
            return {"steps": tuple(pairs)}
        if "start" not in data or "then" not in data or "when" not in data:
            raise ValueError("a schedule needs start, then and when (or steps)")
        then, when = data["then"], data["when"]
        then = then if isinstance(then, list) else [then]
        when = when if isinstance(when, list) else [when]
        if not then or len(then) != len(when):
            raise ValueError("then and when must have the same number of entries")
        for w in when:
            if not isinstance(w, str):
                raise ValueError(f"when must be a condition string, got {w!r}")
            parse_condition(w)
        return {"start": _num(data["start"], "start"), "then": tuple(_num(v, "then") for v in then),
                "when": tuple(" ".join(w.split()) for w in when)}

    @model_validator(mode="after")
    def _order(self) -> "Schedule":
        if not self.steps and self.start is None:
            raise ValueError("a schedule needs steps, or start, then and when")
        for w in self.when:
            parse_condition(w)
        if self.steps:
            s = [p[0] for p in self.steps]
            if s[0] != 0:
                raise ValueError("steps: the first entry must be at step 0 (the value the run starts with)")
            if any(b <= a for a, b in zip(s, s[1:])):
                raise ValueError("steps: the steps must increase")
        return self

    @model_serializer
    def _text(self) -> str:
        return str(self)

    def __str__(self) -> str:
        if self.steps:
            return "steps " + " ".join(f"{s}:{_fmt(v)}" for s, v in self.steps)
        return _fmt(self.start) + "".join(f" -> {_fmt(v)} when {w}" for v, w in zip(self.then, self.when))

    def values(self) -> list[float]:
        """Every value the schedule can take (for range checks)."""
        return [v for _, v in self.steps] if self.steps else [self.start, *self.then]

    @property
    def initial(self) -> float:
        return self.steps[0][1] if self.steps else self.start

    def metrics(self) -> list[str]:
        """The metrics its conditions read (``stuck`` without a metric reads ``plateau.metric``: None here)."""
        out = []
        for w in self.when:
            c = parse_condition(w)
            if c[0] == "cmp" or (c[0] == "stuck" and c[2]):
                out.append(c[1] if c[0] == "cmp" else c[2])
        return out


def _parse_string(text: str) -> dict:
    """The string form, read in one pass: words split by str.split, each number by base/parse.py."""
    s = " ".join(text.split())
    spend(3 * len(s))  # the split and join above, and the split / partition of its words below
    if s.startswith("steps"):
        pairs = []
        for item in s[len("steps"):].split():
            step, colon, value = item.partition(":")
            if not colon:
                raise ValueError(f"schedule {_short(s)}: expected 'steps STEP:VALUE STEP:VALUE ...'")
            try:
                pairs.append([number(step, "a step", integer=True, lo=0, hi=MAX_STEP),
                              float(number(value, f"the value at step {step}"))])
            except ValueError as e:
                raise ValueError(f"schedule {_short(s)}: {e}") from None
        return {"steps": tuple(tuple(p) for p in pairs)} if pairs else {"steps": ()}
    parts = [p.strip() for p in s.split("->")]
    if len(parts) < 2:
        raise ValueError(f"schedule {_short(s)}: expected 'START -> VALUE when CONDITION [-> ...]' or 'steps 0:V S:V'")
    try:
        start = float(number(parts[0], "the start value"))
    except ValueError as e:
        raise ValueError(f"schedule {_short(s)}: {e}") from None
    then, when = [], []
    for seg in parts[1:]:
        value, sep, cond = seg.partition(" when ")
        if not sep or not cond.strip():
            raise ValueError(f"schedule {_short(s)}: expected 'VALUE when CONDITION' after '->', got {_short(seg)}")
        try:
            then.append(float(number(value, "a value after '->'")))
        except ValueError as e:
            raise ValueError(f"schedule {_short(s)}: {e}") from None
        when.append(cond.strip())
    return {"start": start, "then": then, "when": when}


def coerce(v: Any) -> Any:
    """A repetition key's value as written: a number stays a number (booleans and non-finite numbers are
    refused), a table or a string becomes a ``Schedule``."""
    if isinstance(v, Schedule):
        return v
    if isinstance(v, bool):
        raise ValueError(f"must be a number or a schedule, got {'true' if v else 'false'}")
    if isinstance(v, (int, float)):
        number(v, "value")  # NaN and infinity refused; a huge int compared exactly (no OverflowError)
        return v
    if isinstance(v, (str, Mapping)):
        return Schedule.model_validate(v)
    raise ValueError("must be a number or a schedule (a table or a string)")


def initial(v: Any) -> float:
    """The value a repetition key starts a run with (the number itself for a constant)."""
    return v.initial if isinstance(v, Schedule) else v


def all_values(v: Any) -> list[float]:
    return v.values() if isinstance(v, Schedule) else [v]


def scheduled(task: Any) -> dict[str, Schedule]:
    """The repetition keys of a task config that follow a schedule: {"p": Schedule, ...}."""
    return {k: getattr(task, k) for k in REPEAT_KEYS if isinstance(getattr(task, k, None), Schedule)}


def _better(metric: str, new: float, best: float | None, higher: bool) -> bool:
    return best is None or (new > best if higher else new < best)


class Switcher:
    """One schedule's live state for one run: ``observe`` at each evaluation (fires at most one switch), ``value``
    of the training step about to run. ``plateau_metric`` / ``plateau_higher``: what ``stuck`` reads by default."""

    def __init__(self, sched: Schedule, plateau_metric: str = "test/loss", plateau_higher: bool = False):
        self.sched, self.pm, self.ph = sched, plateau_metric, plateau_higher
        self.fired: list[int] = []  # the evaluation step of each switch that fired, in order
        self.best: float | None = None  # stuck: the best value since the armed switch began
        self.since = 0  # stuck: evaluations since that best

    def value(self, step: int) -> float:
        """The value for training step ``step`` (1-based; step 0 = the start value)."""
        if self.sched.steps:
            v = self.sched.steps[0][1]
            for s, x in self.sched.steps:
                if s < step:
                    v = x
            return v
        return self.sched.then[len(self.fired) - 1] if self.fired else self.sched.start

    def observe(self, step: int, vals: Mapping[str, float], plateau: bool = False) -> bool:
        """Check the armed condition at evaluation ``step``; True when a switch fired."""
        if self.sched.steps or len(self.fired) >= len(self.sched.when):
            return False
        cond = parse_condition(self.sched.when[len(self.fired)])
        hit = False
        if cond[0] == "plateau":
            hit = plateau
        elif cond[0] == "cmp":
            x = vals.get(cond[1], math.nan)
            if math.isfinite(x):
                op, t = cond[2], cond[3]
                hit = x >= t if op == ">=" else x <= t if op == "<=" else x > t if op == ">" else x < t
        else:
            metric = cond[2] or self.pm
            higher = self.ph if cond[2] is None else not metric.endswith("loss")
            x = vals.get(metric, math.nan)
            if math.isfinite(x):
                if _better(metric, x, self.best, higher):
                    self.best, self.since = x, 0
                else:
                    self.since += 1
                hit = self.since >= cond[1]
        if hit:
            self.fired.append(step)
            self.best, self.since = None, 0
        return hit

    def state_dict(self) -> dict:
        return {"fired": list(self.fired), "best": self.best, "since": self.since}

    def load_state_dict(self, st: Mapping) -> None:
        self.fired, self.best, self.since = [int(s) for s in st["fired"]], st["best"], int(st["since"])
