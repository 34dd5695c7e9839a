"""The one family of number formatters (sparse_tui/base/numbers.py) used by the CLI, the reports and the console."""

import math

from sparse_tui.base.numbers import fmt_age, fmt_num, fmt_or, fmt_short


def test_fmt_or_marks_what_is_missing_or_not_finite():
    assert fmt_or(0.123456) == "0.1235"
    assert fmt_or(3, "g") == "3"
    assert fmt_or(0.5, ".3f") == "0.500"
    assert [fmt_or(v) for v in (None, math.nan, math.inf)] == ["-", "-", "-"]
    assert fmt_or(None, missing="—") == "—"


def test_fmt_num_spells_out_what_is_not_finite():
    assert fmt_num(None) == "-"
    assert (fmt_num(math.nan), fmt_num(math.inf), fmt_num(-math.inf)) == ("nan", "inf", "-inf")
    assert fmt_num(2.0, "g") == "2" and fmt_num(0.012345) == "0.0123"


def test_fmt_short_fits_narrow_columns():
    assert [fmt_short(v) for v in (0.221, 2.5e-6, 21500, 1_200_000, 1234)] == ["0.221", "2.5e-6", "21.5k", "1.2M",
                                                                               "1234"]


def test_fmt_age():
    assert [fmt_age(s) for s in (None, 12, 300, 7500, 3 * 86400)] == ["-", "12s", "5m", "2h05", "3d"]


def test_fmt_duration_says_seconds_minutes_and_hours():
    from sparse_tui.base.numbers import fmt_duration

    assert [fmt_duration(s) for s in (0.4, 89.4, 90, 725, 5399, 5400, 7530)] == [
        "0 s", "89 s", "1 min 30 s", "12 min 05 s", "89 min 59 s", "1 h 30 min", "2 h 05 min"]
