"""Every user-typed number field fed 10,000 generated strings, up to 1 MB, under an operation budget (issue 45):
0 exceptions other than the field's one-line refusal, 0 inputs over budget, 0 hangs.

The budget is an operation count, not a clock: base/parse.py counts the characters each field hands to a linear
primitive (``parse.ops``; a text longer than ``parse.MAX_CHARS`` is refused on its length alone, and the patterns
are unambiguous), and each input may cost at most ``8 * len + 2000``. A hang (a primitive that is not linear after
all) is caught by a per-field alarm and counted as a timeout, so the test fails instead of stalling CI."""

from __future__ import annotations

import random
import signal
import zlib

import pytest

from sparse_tui.base import parse
from sparse_tui.cli.runs import figure_size, timeout_seconds
from sparse_tui.reports import fitreport, selection
from sparse_tui.science.dynamics import parse_grid
from sparse_tui.science.repetition import Schedule, parse_condition
from sparse_tui.tui.render import filters

N = 10_000
MB = 1 << 20
PIECES = ["0", "1", "9", "07", ".", "-", "+", "e", "E", "e-", "e+", "inf", "-inf", "nan", "NaN", "infinity", "x", " ",
          "\t", "_", ":", "->", " when ", "stuck ", "plateau", "test/acc", ">=", "<=", "<", ">", "=", ",", "1e999",
          "1e308", "99999999999999999999", "0x1f", "١", "\x1b[31m", "\x00", "é", "steps ", "0.5", "1_000", "Ⅻ"]


def _strings(seed: int, shape) -> list[str]:
    """N strings: most are short mixes of number-like pieces wrapped by ``shape`` (a field's syntax); 1% are long
    (a piece or a mix repeated up to 1 MB, 10 of them exactly 1 MB), 9% medium (up to 10 KB)."""
    rng = random.Random(seed)
    out = []
    for i in range(N):
        mix = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 8)))
        if i % 100 == 0:
            unit = rng.choice([mix, "1", "9" * 7, "1 ", "->", "0:1 ", "a" * 3, "1e"])
            size = MB if i % 1000 == 0 else rng.randint(10_000, MB)
            text = (unit * (size // len(unit) + 1))[:size - 1] + rng.choice("x1 .")
        elif i % 11 == 0:
            text = mix * rng.randint(1, 10_000 // max(1, len(mix)))
        else:
            text = mix
        out.append(shape(rng, text)[:MB])
    return out


def _filter(text: str) -> None:
    q = filters.parse(text, {"task.d", "train.lr"})
    if q.errors:  # the filter's refusal: one line per condition it cannot read
        raise ValueError(q.errors[0])
    row = type("R", (), {"params": {"task.d": 10**400, "train.lr": 0.01}, "text": "", "tags": (), "step": 5})()
    for c in q.conds:
        filters._holds(c, row.params["task.d"])


def _where(text: str) -> None:
    for w in selection.parse_where([text]):
        for v in (10**400, 0.5):
            selection._match(v, w)


FIELDS = {
    # field: (callable, the syntax wrapped around a generated number)
    "schedule steps": (Schedule.model_validate, lambda r, t: f"steps 0:{t}" if r.random() < 0.8 else f"steps {t}"),
    "schedule start/then": (Schedule.model_validate, lambda r, t: r.choice([f"{t} -> 0 when plateau",
                                                                            f"0.5 -> {t} when plateau", t])),
    "schedule threshold": (parse_condition, lambda r, t: f"test/acc >= {t}"),
    "schedule stuck K": (parse_condition, lambda r, t: f"stuck {t}"),
    "export --timeout": (timeout_seconds, lambda r, t: t),
    "show --size": (figure_size, lambda r, t: r.choice([f"{t}x4", f"7x{t}", t])),
    "filter value": (_filter, lambda r, t: r.choice([f"d>{t}", f"lr<={t}", f"d={t},{t}", f"d!={t}"])),
    "fit/reproduce --threshold": (fitreport.parse_threshold, lambda r, t: t),
    "fit --where": (_where, lambda r, t: r.choice([f"task.d>{t}", f"seed={t},{t}", f"task.B <= {t}", f"x!={t}"])),
    "theory --grid": (parse_grid, lambda r, t: r.choice([f"d={t}", f"T=64,{t}", f"p={t}"])),
}


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang


@pytest.mark.parametrize("field", list(FIELDS))
def test_every_number_field_survives_10000_generated_strings(field):
    fn, shape = FIELDS[field]
    inputs = _strings(zlib.crc32(field.encode()), shape)
    assert len(inputs) == N and max(map(len, inputs)) <= MB
    assert sum(len(s) >= MB - 64 for s in inputs) >= 10
    crashes, over, timeouts, refused = [], [], 0, 0
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(120)  # a hang guard for the whole field, not a timing threshold (it takes about a second)
    try:
        for text in inputs:
            before = parse.ops
            try:
                fn(text)
            except ValueError:  # the field's refusal (pydantic's ValidationError is one)
                refused += 1
            except _Hang:
                timeouts += 1
                break
            except Exception as e:  # noqa: BLE001 - anything else is a defect this test counts
                crashes.append(f"{type(e).__name__}: {text[:40]!r}")
            if parse.ops - before > 8 * len(text) + 2000:
                over.append((len(text), parse.ops - before))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert (crashes, over, timeouts) == ([], [], 0)
    assert 0 < refused < N  # the generator reaches both sides of every field


def test_fit_where_compares_an_integer_above_1e308_without_overflow():
    (w,) = selection.parse_where(["task.d>5"])
    assert selection._match(10**400, w) is False  # not a finite number: no match, no OverflowError
    (w,) = selection.parse_where([f"task.d={10**400}"])
    assert selection._match(10**400, w) is True and selection._match(5, w) is False
    with pytest.raises(ValueError, match="more than 1000 values"):
        selection.parse_where(["seed=" + "1," * 5000])


def test_an_integer_beyond_4300_digits_in_a_preset_or_set_is_one_line(tmp_path):
    """Found while fixing issue 45: tomllib raises Python's int() limit as a bare ValueError (a traceback, exit 1)."""
    from conftest import TINY_PRESET

    from sparse_tui.presets.errors import PresetError
    from sparse_tui.presets.loading import load_preset

    big = "1" + "0" * 5000
    p = tmp_path / "big.toml"
    p.write_text(TINY_PRESET.replace("steps = 20", f"steps = {big}"))
    with pytest.raises(PresetError, match="big.toml: an integer of more than 4300 digits"):
        load_preset(p)
    p.write_text(TINY_PRESET)
    with pytest.raises((PresetError, ValueError), match="more than 4300 digits"):
        load_preset(p, [f"task.n_pairs={big}"])
