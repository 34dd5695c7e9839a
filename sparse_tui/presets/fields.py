"""What every preset section shares (presets/schema.py): the limits a preset is held to, the ``_Section`` base
(unknown keys refused, numbers checked by kind) and the repetition keys' types (a number or a schedule)."""

from __future__ import annotations

import math
import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator

from sparse_tui.base.numbers import fmt_plain
from sparse_tui.science.repetition import Schedule, all_values, coerce

# Integers are stored in SQLite (signed 64-bit); larger values are refused when the preset is read.
INT64_MAX = 2**63 - 1
# A preset's runs (sweep product x seeds), evaluations per run and attention snapshots per run are capped so that a
# typo (a 1,000-value sweep, eval.every = 1) is a one-line error, not hours of work or a full disk.
MAX_RUNS = 10_000
MAX_EVALS = 100_000
MAX_SNAPSHOTS = 10_000
# A preset file is read only up to this size (``run /dev/zero`` must not fill the memory), a name and a description
# are stored with every run and shown in every listing, and a preset with thousands of problems shows the first few.
MAX_PRESET_BYTES = 1 << 20
MAX_NAME = 100
MAX_DESCRIPTION = 500
MAX_PROBLEM_LINES = 20


def _number_kinds(annotation: Any) -> set:
    """{int}, {float} or {int, float} for a field's annotation (``int | None`` -> {int}), else empty."""
    args = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)
    return {a for a in args if a in (int, float)}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    @model_validator(mode="before")
    @classmethod
    def _strict_numbers(cls, data: Any) -> Any:
        """Integers are strict (no booleans, no floats, within 64 bits); floats are finite numbers."""
        if not isinstance(data, dict):
            return data
        for name, v in data.items():
            field_info = cls.model_fields.get(name)
            kinds = _number_kinds(field_info.annotation) if field_info is not None else set()
            if not kinds or v is None or (isinstance(v, (str, dict)) and _schedulable(field_info.annotation)):
                continue
            if kinds == {int}:
                if isinstance(v, str):
                    raise ValueError(f"{name}: must be an integer")
                if isinstance(v, bool) or not isinstance(v, int):
                    raise ValueError(f"{name}: must be an integer, got {_show(v)}")
                if abs(v) > INT64_MAX:
                    raise ValueError(f"{name}: must be an integer below 2^63, got {v}")
                continue
            if isinstance(v, str):
                raise ValueError(f"{name}: must be a number")
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"{name}: must be a number, got {_show(v)}")
            try:
                finite = math.isfinite(float(v))
            except OverflowError:
                finite = False
            if not finite:
                raise ValueError(f"{name}: must be a finite number, got {_show(v)}")
        return data


def _show(v: Any) -> str:
    """A value as the user wrote it in TOML, shortened for a one-line message."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "a list"
    text = repr(v) if isinstance(v, str) else str(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _schedulable(annotation: Any) -> bool:
    return Schedule in get_args(annotation)


# A repetition key (task.p, task.B): a number, or a schedule (repetition.py: a table or a string).
Repeat = Annotated[Union[float, Schedule], BeforeValidator(coerce)]
RepeatInt = Annotated[Union[int, Schedule], BeforeValidator(coerce)]
_SCHED_HELP = (" A schedule instead of a number: {steps = [[0, 0.9], [2000, 0]]}, or {start = 0.9, then = 0, when ="
               " \"test/acc >= 0.05\"} (also 'stuck K [METRIC]', 'plateau'), or the same as one string"
               " (\"0.9 -> 0 when test/acc >= 0.05\"); docs/THEORY.md, \"Repetition schedules\".")


def _check_repeat(task: Any, key: str, lo: float, hi: float, hi_name: str = "", integer: bool = False) -> None:
    """Every value task.<key> can take (its schedule's too) lies in [lo, hi] (and is an integer)."""
    v = getattr(task, key)
    where = f" (schedule {v})" if isinstance(v, Schedule) else ""
    for x in all_values(v):
        if integer and float(x) != int(x):
            raise ValueError(f"{key}: must be an integer, got {fmt_plain(x)}{where}")
        if x < lo:
            raise ValueError(f"{key}: must be >= {fmt_plain(lo)}{where}")
        if x > hi:
            raise ValueError(f"{key}: must be <= {hi_name or fmt_plain(hi)}{where}")
