"""The number formatters of the package, for the console and the command line: ``fmt_num`` (a format spec, "-" for
None, nan/inf spelled out), ``fmt_or`` (a format spec, one mark for None and nan/inf alike), ``fmt_plain`` (4.0 as
4), ``fmt_short`` (at most about 6 characters: 0.221, 2.5e-6, 21.5k), ``fmt_fit`` (in a given width, never cut),
``fmt_age`` (12s, 5m, 2h05, 3d) and ``fmt_duration`` (45 s, 12 min 05 s, 2 h 05 min)."""

from __future__ import annotations

import math
from typing import Any


def _special(v: Any) -> tuple[str | None, float]:
    """("-", "nan", "inf", "-inf" or the text of a non-number; nan) for what is not a finite number, else (None, v)."""
    if v is None:
        return "-", math.nan
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v), math.nan
    if not math.isfinite(f):
        return ("nan" if math.isnan(f) else ("inf" if f > 0 else "-inf")), f
    return None, f


def fmt_num(v: Any, spec: str = ".3g") -> str:
    text, f = _special(v)
    if text is not None:
        return text
    if f.is_integer() and abs(f) < 1e7 and spec == "g":
        return str(int(f))
    return format(f, spec)


def fmt_plain(v: Any, spec: str = "") -> str:
    """``v`` with an integral float written as an int (4.0 -> "4"), anything else in ``spec`` (default: as ``str``
    writes it): the presets' errors, the fit's filters, the figures' labels."""
    try:
        integral = not isinstance(v, (bool, str)) and float(v).is_integer()
    except (TypeError, ValueError):
        integral = False
    return str(int(v)) if integral else format(v, spec)


def fmt_or(v: Any, spec: str = ".4g", missing: str = "-") -> str:
    """``v`` in ``spec``, or ``missing`` for None and a float that is not finite (the CLI's tables and reports)."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return missing
    return format(v, spec)


def fmt_short(v: Any, digits: int = 3) -> str:
    """A number in at most about 6 characters for narrow columns: 0.221, 2.5e-6, 21.5k, 1.2M."""
    text, f = _special(v)
    if text is not None:
        return text
    a = abs(f)
    if a >= 1e6:
        return f"{f / 1e6:.{max(1, digits - 1)}g}M"
    if a >= 1e4:
        return f"{f / 1e3:.{digits}g}k"
    if a != 0 and a < 1e-3:
        m, e = f"{f:.{max(0, digits - 2)}e}".split("e")
        return f"{m.rstrip('0').rstrip('.')}e{int(e)}"
    return f"{f:.{digits}g}" if a < 1000 else str(int(round(f)))



def fmt_fit(v: Any, width: int, spec: str = "g") -> str:
    """A number in at most ``width`` characters, never cut (a cut ``100000`` reads ``1000``, a cut ``1.23e+03``
    reads ``1.23``): as ``fmt_num(v, spec)`` writes it when that fits, else with fewer digits or in a shorter form
    (``21.5k``, ``0.0012``, ``1.2e-5``, ``1e5``); the shortest of them when none fits."""
    text, f = _special(v)
    if text is not None:
        return text
    forms = [fmt_num(v, spec), fmt_short(f, 3), fmt_short(f, 2)]
    for digits in (2, 1, 0):
        m, e = f"{f:.{digits}e}".split("e")
        forms.append(f"{m.rstrip('0').rstrip('.') if '.' in m else m}e{int(e)}")
    forms = [t for t in forms if "e+" not in t or t == forms[0]]
    return next((t for t in forms if len(t) <= width), min(forms, key=len))

def fmt_age(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}"
    return f"{s // 86400}d"


def fmt_duration(seconds: float) -> str:
    """A duration in words: 45 s, 12 min 05 s, 2 h 05 min."""
    s = int(round(seconds))
    if s < 90:
        return f"{s} s"
    if s < 5400:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"
