"""The one parser of user-typed numbers: schedules (``task.p`` / ``task.B`` strings), thresholds (``--threshold``, a
schedule's ``METRIC >= X``, ``stuck K``), timeouts (``export --timeout``), sizes (``show --size``), grids
(``theory --grid``) and filters (``fit --where``, the console's ``acc>0.9``); ``values`` splits their typed lists.
TOML numbers (presets, ``--set``) are tomllib's, then checked here where a schedule holds them. Issue 45: a schedule's
number pattern backtracked quadratically (a 30,000-digit number hung validation), ``float()`` let NaN into a schedule,
and an integer above 1e308 raised OverflowError in the filter.

Bounded time by design: a text longer than ``MAX_CHARS`` is refused on its length alone (a float has 17
significant digits; no number anyone means needs more), so every regular expression and ``float()`` / ``int()``
call below sees at most ``MAX_CHARS`` characters, and the pattern is unambiguous (one way to match each character,
so no backtracking beyond one character). ``ops`` counts the characters each call hands to those primitives: the
fuzz test (tests/test_hostile_numbers.py) asserts that it stays within a constant times the input's length, an
operation budget rather than a clock. NaN is never a number here; infinity only where the caller says it means
something (``infinite=True``); the value lies within ``[lo, hi]``, the consumer's range.
"""

from __future__ import annotations

import math
import re
from typing import Any

MAX_CHARS = 100
MAX_VALUES = 1000  # items in one typed list: a filter's alternatives, a grid's values
# One way to read each character: digits, an optional fraction, an optional exponent (no `\d+\.?\d*`, whose two
# digit runs can split a long number in n ways).
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INF = re.compile(r"[+-]?inf(?:inity)?", re.IGNORECASE)
_DIGITS = re.compile(r"[+-]?\d+")
ops = 0  # characters handed to a regular expression, float() or int() since import (the fuzz test's counter)


def spend(n: int) -> None:
    """Count ``n`` characters handed to a linear primitive (str.split, an unambiguous pattern, float()): the
    operation counter the fuzz test budgets."""
    global ops
    ops += n + 1


def _shown(text: str) -> str:
    """The text for an error line: at most 40 characters, control characters escaped."""
    s = text if len(text) <= 40 else f"{text[:20]}…{text[-10:]} ({len(text)} characters)"
    return repr(s)


def _range_text(lo: float, hi: float, integer: bool) -> str:
    def f(x: float) -> str:
        return str(int(x)) if float(x).is_integer() and abs(x) < 1e20 else f"{x:g}"

    kind = "an integer" if integer else "a number"
    if lo > -math.inf and hi < math.inf:
        return f"{kind} between {f(lo)} and {f(hi)}"
    if lo > -math.inf:
        return f"{kind} >= {f(lo)}"
    if hi < math.inf:
        return f"{kind} <= {f(hi)}"
    return kind


def number(v: Any, what: str = "value", *, lo: float = -math.inf, hi: float = math.inf, integer: bool = False,
           infinite: bool = False, above: bool = False) -> float | int:
    """``v`` (a text as typed, or a number from TOML/JSON) as a number within ``[lo, hi]`` (``above``: ``> lo``),
    an ``int`` where ``integer``; ValueError in one line naming ``what`` otherwise. NaN is always refused,
    infinity unless ``infinite``."""
    if isinstance(v, bool):
        raise ValueError(f"{what}: must be {_range_text(lo, hi, integer)}, got {'true' if v else 'false'}")
    if isinstance(v, str):
        x = _text_number(v, what, integer, lo, hi)
    elif isinstance(v, int):
        x = v
    elif isinstance(v, float):
        if math.isnan(v):
            raise ValueError(f"{what}: must be {_range_text(lo, hi, integer)}, got nan")
        x = v
    else:
        raise ValueError(f"{what}: must be {_range_text(lo, hi, integer)}, got {type(v).__name__}")
    if isinstance(x, float) and math.isinf(x) and not infinite:
        raise ValueError(f"{what}: must be a finite number, got {x}")
    if integer and isinstance(x, float):
        if not x.is_integer():
            raise ValueError(f"{what}: must be an integer, got {x:g}")
        x = int(x)
    # int/float comparisons are exact in Python (no float() of a huge int, so no OverflowError)
    if x < lo or x > hi or (above and x == lo):
        shown = _shown(v) if isinstance(v, str) else (f"{x:g}" if isinstance(x, float) else _shown(str(x)))
        want = _range_text(lo, hi, integer).replace(">=", ">") if above else _range_text(lo, hi, integer)
        raise ValueError(f"{what}: must be {want}, got {shown}")
    return x


def _text_number(text: str, what: str, integer: bool, lo: float, hi: float) -> float | int:
    if len(text) > MAX_CHARS:  # refused on its length alone: nothing below ever sees a long text
        spend(0)
        raise ValueError(f"{what}: {_shown(text)} is too long to be a number (at most {MAX_CHARS} characters)")
    s = text.strip()
    spend(2 * len(s))
    if _DIGITS.fullmatch(s):
        spend(len(s))
        return int(s) if integer else float(s)  # an integer keeps its digits exactly
    if _NUMBER.fullmatch(s) or _INF.fullmatch(s):
        spend(len(s))
        return float(s)
    raise ValueError(f"{what}: {_shown(text)} is not {'an integer' if integer else 'a number'}"
                     f"{' (nan is not a number here)' if s.lower().lstrip('+-') == 'nan' else ''}")


def values(text: str, what: str = "value") -> list[str]:
    """A typed comma-separated list (``d=16,32``, ``--grid d=16,32,64``, ``--where seed=0,1``), its empty items
    dropped; at most ``MAX_VALUES`` items, counted before the list is built (ValueError in one line otherwise)."""
    spend(len(text))
    if text.count(",") >= MAX_VALUES:
        raise ValueError(f"{what}: more than {MAX_VALUES} values")
    return [v for v in text.split(",") if v.strip()]


def maybe_number(v: Any) -> float | None:
    """``v`` as a finite float if it reads as one (a number, or a text of one), else None; never raises (the
    filter's comparisons: an int above 1e308 is None, not an OverflowError)."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        x = number(v, infinite=True)
        f = float(x)
    except (ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None
