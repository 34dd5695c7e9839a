"""A large run store, and how long `runs`, `runs --json`, `fit`, `reproduce --list` and the console's first Runs
draw take on it (issue 41: the forecast once refitted per run and made a 2,000-run store unusable).

The store is Fig. 1c's 20 runs (`presets/paper_fig1c_theory.toml`, the reduced flow: 15 s on a CPU), trained once,
then copied with SQL (runs and metric rows, new run ids), by default 100 times: 2,000 runs, 14M metric rows. Nothing
is trained but the 20.

    python benchmarks/large_store.py --dir /tmp/big [--copies 100] [--repeat 1] [--json]

``--dir`` keeps the stores between calls (built when missing): DIR/template (the 20 runs) and DIR/store (the
copies). Each command is timed on both, side by side, and the ratio printed. Times are wall seconds of each
command run as a user runs it (a fresh ``python -m sparse_tui`` process); the console's first draw is the time from
the app's start to a Runs table with every run, in a headless Textual app (``run_test``), in a fresh process too.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRESET = ROOT / "presets" / "paper_fig1c_theory.toml"


def copy_runs(db: Path, copies: int) -> tuple[int, int]:
    """Each run of the store copied ``copies - 1`` times (run id + a suffix), with its metric rows; returns the
    numbers of runs and metric rows after."""
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(runs)")]
    ids = [r[0] for r in con.execute("SELECT run_id FROM runs WHERE run_id NOT LIKE '%-%'")]
    mark = ",".join("?" * len(ids))
    with con:
        for k in range(1, copies):
            suffix = f"-{k:03d}"
            sel = ", ".join("run_id || ?" if c == "run_id" else ("batch_id || ?" if c == "batch_id" else c)
                            for c in cols)
            con.execute(f"INSERT OR IGNORE INTO runs ({', '.join(cols)}) SELECT {sel} FROM runs "
                        f"WHERE run_id IN ({mark})", (suffix, suffix, *ids))
            con.execute(f"INSERT OR IGNORE INTO metrics (run_id, name, step, value) SELECT run_id || ?, name, step, "
                        f"value FROM metrics WHERE run_id IN ({mark})", (suffix, *ids))
    n_runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    n_rows = con.execute("SELECT count(*) FROM metrics").fetchone()[0]
    con.close()
    return n_runs, n_rows


def build(path: Path, copies: int) -> tuple[Path, Path, int, int]:
    """DIR/template: Fig. 1c's 20 runs, trained; DIR/store: them copied ``copies`` times (skipped when done)."""
    template, store = path / "template", path / "store"
    if not (template / "runs.db").exists():
        subprocess.run([sys.executable, "-m", "sparse_tui", "run", str(PRESET), "--headless", "--runs-dir",
                        str(template)], check=True, capture_output=True)
    n20 = sqlite3.connect(template / "runs.db").execute("SELECT count(*) FROM runs").fetchone()[0]
    db = store / "runs.db"
    if db.exists():
        con = sqlite3.connect(db)
        n_runs, n_rows = (con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("runs", "metrics"))
        con.close()
        if n_runs == n20 * copies:
            return template, store, n_runs, n_rows
        db.unlink()
    store.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(template / "runs.db")
    dst = sqlite3.connect(db)
    src.backup(dst)
    src.close()
    dst.close()
    return (template, store, *copy_runs(db, copies))


def _timed(args: list[str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "200"})
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
    return dt


CONSOLE = """
import asyncio, sys, time
t0 = time.perf_counter()
from sparse_tui.tui.app import SparseTuiApp
async def go():
    app = SparseTuiApp(sys.argv[1], sys.argv[2], gpu=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        while len(app.query_one("RunsPanel").rows) < int(sys.argv[3]):
            if time.perf_counter() - t0 > 300:
                print("timeout"); return
            await pilot.pause(0.05)
        print(time.perf_counter() - t0)
asyncio.run(go())
"""


def console_first_draw(path: Path, n_runs: int) -> float:
    p = subprocess.run([sys.executable, "-c", CONSOLE, str(path), str(ROOT / "presets"), str(n_runs)],
                       capture_output=True, text=True)
    last = (p.stdout.strip().splitlines() or ["?"])[-1]
    if p.returncode != 0 or last == "timeout":
        raise SystemExit(f"console: {last} {p.stderr.strip()[-300:]}")
    return float(last)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, required=True, help="the store's folder (built when it has no store)")
    ap.add_argument("--copies", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=1, help="time each command this many times (the least is kept)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    t0 = time.perf_counter()
    template, store, n_runs, n_rows = build(a.dir, a.copies)
    built = time.perf_counter() - t0
    out = {"runs": n_runs, "metric_rows": n_rows, "build_s": round(built, 1), "load": os.getloadavg()[0],
           "s": {}, "s_20": {}}
    n20 = n_runs // a.copies
    for label, where, n in (("s", store, n_runs), ("s_20", template, n20)):  # side by side: 2,000 runs and the 20
        d = str(where)
        cmds = {
            "runs": ["runs", "--runs-dir", d],
            "runs --json": ["runs", "--json", "--runs-dir", d],
            "fit": ["fit", "--preset", "paper_fig1c_theory", "--vars", "d,T", "--runs-dir", d],
            "reproduce --list": ["reproduce", "--list", "--runs-dir", d],
        }
        for name, args in cmds.items():
            out[label][name] = round(min(_timed(args) for _ in range(a.repeat)), 2)
        out[label]["console: first Runs draw"] = round(min(console_first_draw(where, n) for _ in range(a.repeat)), 2)
    out["load_after"] = os.getloadavg()[0]
    if a.json:
        print(json.dumps(out))
        return
    print(f"{n_runs} runs, {n_rows:,} metric rows (built/checked in {built:.0f} s); load {out['load']:.1f} before, "
          f"{out['load_after']:.1f} after")
    print(f"  {'':<26} {n_runs:>7} runs  {n20:>5} runs  ratio")
    for name, s in out["s"].items():
        s20 = out["s_20"][name]
        print(f"  {name:<26} {s:7.2f} s  {s20:5.2f} s  {s / s20:5.1f}")


if __name__ == "__main__":
    main()
