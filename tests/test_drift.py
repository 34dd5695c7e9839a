"""The drift check (issue 42): every record that reruns in under about 30 s on the CPU is rerun here, as a reader
would (`sparse-tui reproduce KEY --size cpu --json`), and each number its record states (``atlas.records.PINS``) is
compared: the same text at the record's precision where the number is bit-stable, within the pin's stated tolerance
elsewhere; the verdict word must be the record's too. A change that moves a recorded number fails here.

The pins are bound to the records: each stated number must appear in its entry's section of docs/REPRODUCTION.md,
so a record rewritten without its pin (or a pin without its record) fails as well."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparse_tui import atlas
from sparse_tui.atlas.records import PINS, Pin, environment, pick

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "REPRODUCTION.md"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def section(heading: str) -> str:
    """The text of docs/REPRODUCTION.md under ``heading`` (to the next heading of its level or above), with the
    typographic minus written as ASCII."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.lstrip("#").strip() == heading and line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body = []
            for nxt in lines[i + 1:]:
                if nxt.startswith("#") and len(nxt) - len(nxt.lstrip("#")) <= level:
                    break
                body.append(nxt)
            return "\n".join(body).replace("−", "-")
    raise AssertionError(f"docs/REPRODUCTION.md has no heading {heading!r}")


def summary_row(entry) -> str:
    """The summary table's row that names ``reproduce KEY``."""
    rows = [r for r in DOC.read_text(encoding="utf-8").splitlines() if f"`reproduce {entry.key}`" in r
            or f"`reproduce {entry.key.split('_')[0]}`" in r]
    return "\n".join(rows).replace("−", "-")


@pytest.mark.parametrize("key", sorted(PINS))
def test_every_pin_is_stated_in_its_record(key):
    (entry,) = atlas.find(key)
    text = section(entry.record) + "\n" + summary_row(entry)
    for pin in PINS[key]:
        assert pin.stated in text, f"{key}: the record does not state {pin.stated} ({pin.describe()})"
    assert environment(key)["torch"], f"{key}: a pinned record states its environment"


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(PINS))
def test_a_rerun_gives_the_records_numbers(key, tmp_path):
    (entry,) = atlas.find(key)
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "reproduce", key, "--size", "cpu", "--runs-dir",
                        str(tmp_path / "runs"), "--workers", "1", "--json"], capture_output=True, text=True,
                       timeout=900, env=ENV, cwd=tmp_path, check=False)  # a hang, not a timing
    assert r.returncode == 0, r.stderr[-2000:]
    (data,) = json.loads(r.stdout)
    moved = [f"{p.describe()}: measured {format(p.measured(data), p.spec)}" for p in PINS[key]
             if not p.holds(p.measured(data))]
    assert not moved, f"{key}: a recorded number moved: " + "; ".join(moved)
    assert data["verdict"] == entry.verdict, f"{key}: verdict {data['verdict']!r}, the record's {entry.verdict!r}"


def test_a_pin_fails_on_a_moved_number():
    """The comparison itself: exact pins compare the text at the record's precision, tolerant ones the distance;
    paths select by index, by key=value (joined by &) and over every item."""
    data = {"rows": [{"variable": "d", "measured": 0.4994}, {"variable": "T", "measured": 0.97520}],
            "runs": [{"p": 0.0, "seed": 0, "x": [1.0, 2.0]}, {"p": 0.5, "seed": 0, "x": [3.0, 4.0]},
                     {"p": 0.5, "seed": 1, "x": [5.0, 6.0]}]}
    assert Pin("rows/variable=d/measured", "0.499").holds(pick(data, "rows/variable=d/measured"))
    assert not Pin("rows/variable=d/measured", "0.500").holds(0.4994)
    assert not Pin("rows/variable=T/measured", "0.975").holds(0.9755)  # one digit further: moved
    assert Pin("x", "-0.07", ".2f", tol=0.1).holds(-0.16) and not Pin("x", "-0.07", ".2f", tol=0.1).holds(-0.18)
    assert pick(data, "runs/p=0.5&seed=1/x/1") == 6.0
    assert Pin("runs/*/seed", "1", ".0f", agg="max").measured(data) == 1
    with pytest.raises(KeyError, match="2 items"):
        pick(data, "runs/p=0.5/x")
