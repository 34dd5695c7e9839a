"""Issue 43: one measured time per preset, with its load, from one place. `sparse-tui presets` listed blog_n80 at
24 min 53 s (its header), the README said `make run` takes 2 min 26 s and a newcomer measured 13 min at load 4-5.
Now every time shown is presets/timing.py's reading of the preset's own header, with load, machine and date, and
one rule says how load scales it; the README is held to that source here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from sparse_tui.presets.timing import LOAD_RULE, Timing, timing

ROOT = Path(__file__).resolve().parent.parent


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_readme_quotes_the_time_of_make_runs_preset_from_its_header():
    preset = re.search(r"^PRESET \?= (\S+)", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1)
    t = timing(ROOT / preset)
    assert t.duration != "-" and t.load and t.machine and t.date  # measured, with its load, machine and date
    readme = _flat((ROOT / "README.md").read_text())
    assert f"`make run` then {t.duration}." in readme
    assert f"{Path(preset).stem}: {t.text()}" in readme  # the same words as `sparse-tui presets`
    assert _flat(LOAD_RULE) in readme  # and the one rule for load


def test_presets_lists_the_headers_time_with_its_load_and_the_rule(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "presets"], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "250"}, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = {c[1]: c for c in ([x.strip() for x in line.split("│")[1:-1]] for line in r.stdout.splitlines()
                              if line.startswith("│"))}
    t = timing(ROOT / "presets" / "blog_n80.toml")
    assert rows["blog_n80"][3:] == [t.duration, t.context()]
    assert rows["blog_n80"][3:] == ["2 min 33 s", "load 0.7-1.9, quiet 2-core CPU, 2026-11-29"]
    assert rows["paper_fig11"][3:] == ["-", ""]  # GPU-sized: no CPU time, none invented
    assert _flat(LOAD_RULE) in _flat(r.stdout)


def test_the_load_machine_and_date_are_those_of_the_same_measurement(tmp_path):
    p = tmp_path / "x.toml"

    def read(line: str) -> Timing:
        p.write_text(f"# x.toml\n{line}\nname = \"x\"\n")
        return timing(p)

    # two measurements in one sentence: the load of the second is not the first's
    t = read("# Time: 9 min 10 s for the 24 runs on a quiet 2-core CPU (2026-11-26); 59 min 21 s when other jobs "
             "kept both cores busy (load average 5-8)")
    assert t == Timing("9 min 10 s", "quiet", "quiet 2-core CPU", "2026-11-26")
    assert t.text() == "9 min 10 s, quiet 2-core CPU, 2026-11-26"
    t = read("# Time: 8.4 s wall for the 20 runs on the shared 2-core CPU (load average 3.1; 2026-11-25). Earlier, "
             "at load average 8.5-9.4: 54 s.")
    assert t == Timing("8.4 s", "3.1", "shared 2-core CPU", "2026-11-25")
    assert t.text() == "8.4 s, load 3.1, shared 2-core CPU, 2026-11-25"
    t = read("# Time: 25 min wall for the 9 runs.")  # what it leaves out is said, never guessed
    assert t.text() == "25 min, load not stated, machine not stated, undated"
    assert read("# What you should see: a drop.").text() == "-"


def test_every_bundled_time_says_when_it_was_measured():
    """A time without its date cannot be told from one measured on today's code: every bundled preset that states a
    time dates it (the three undated ones now carry the date of the commit that recorded them)."""
    from sparse_tui.presets.catalog import bundled_dir

    timed = {p.stem: timing(p) for p in bundled_dir().glob("*.toml")}
    timed = {k: t for k, t in timed.items() if t.duration != "-"}
    assert len(timed) >= 40
    assert [k for k, t in timed.items() if not t.date] == []
