"""A large run store, and how long `runs`, `runs --json`, `fit`, `reproduce --list` and the console's first Runs
draw take on it (issue 41: the forecast once refitted per run and made a 2,000-run store unusable).

The store is Fig. 1c's 20 runs (`presets/paper_fig1c_theory.toml`, the reduced flow: 15 s on a CPU), trained once,
then copied with SQL (runs and metric rows, new run ids), by default 100 times: 2,000 runs, 14M metric rows. Nothing
is trained but the 20.

    python benchmarks/large_store.py --dir /tmp/big [--copies 100] [--repeat 1] [--json] [--baseline OLD]

``--dir`` keeps the stores between calls (built when missing): DIR/template (the 20 runs) and DIR/store (the
copies). Each command is timed on both, side by side, and the ratio printed. Times are wall seconds of each
command run as a user runs it (a fresh ``python -m sparse_tui`` process); the console's first draw is the time from
the app's start to a Runs table with every run, in a headless Textual app (``run_test``), in a fresh process too:
the panel's rows in the DataTable, then one more refresh (its layout of the rows).

``--baseline OLD``: OLD is a copy of other code (``mkdir OLD; git archive COMMIT | tar -x -C OLD``); every command
is then timed on the large store with OLD's code and this checkout's in turn, and the ratio this / OLD printed (a
loaded machine moves both alike), beside the CPU seconds each took (the steadier number under load).
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


def _env(src: Path) -> dict:
    return {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(src)}


def _timed(args: list[str], src: Path = ROOT) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "sparse_tui", *args], capture_output=True, text=True, cwd=src,
                       env=_env(src))
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
        while app.query_one("RunsPanel").table.row_count < int(sys.argv[3]):
            if time.perf_counter() - t0 > 300:
                print("timeout"); return
            await pilot.pause(0.05)
        await pilot.pause()
        print(time.perf_counter() - t0)
asyncio.run(go())
"""


def console_first_draw(path: Path, n_runs: int, src: Path = ROOT) -> float:
    p = subprocess.run([sys.executable, "-c", CONSOLE, str(path), str(ROOT / "presets"), str(n_runs)],
                       capture_output=True, text=True, cwd=src, env=_env(src))
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
    ap.add_argument("--baseline", type=Path, help="a checkout of other code: time both on the large store, in turn")
    a = ap.parse_args()
    t0 = time.perf_counter()
    template, store, n_runs, n_rows = build(a.dir, a.copies)
    built = time.perf_counter() - t0
    if a.baseline:
        return compare(a, store, n_runs, a.baseline.resolve())
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


def _child_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far: what a command cost, whatever the load."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def compare(a: argparse.Namespace, store: Path, n_runs: int, old: Path) -> None:
    """Each command on the large store with OLD's code and this checkout's, alternately, ``--repeat`` times each
    (the least kept); the ratio this / OLD."""
    d = str(store)
    cmds = {"runs": ["runs", "--runs-dir", d], "runs --json": ["runs", "--json", "--runs-dir", d]}
    out: dict = {"runs": n_runs, "load": os.getloadavg()[0], "old": {}, "new": {}}
    out["cpu_old"], out["cpu_new"] = {}, {}
    for name in [*cmds, "console: first Runs draw"]:
        times: dict[str, list[float]] = {"old": [], "new": []}
        cpu: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(a.repeat):
            for label, src in (("old", old), ("new", ROOT)):
                c0 = _child_cpu()
                times[label].append(_timed(cmds[name], src) if name in cmds else console_first_draw(store, n_runs, src))
                cpu[label].append(_child_cpu() - c0)
        for label in times:
            out[label][name] = round(min(times[label]), 2)
            out[f"cpu_{label}"][name] = round(min(cpu[label]), 2)
    out["load_after"] = os.getloadavg()[0]
    if a.json:
        print(json.dumps(out))
        return
    print(f"{n_runs} runs; {old} against this checkout, alternately; load {out['load']:.1f} before, "
          f"{out['load_after']:.1f} after")
    print(f"  {'':<26} {'old':>7}    {'new':>7}    new/old   CPU s: old    new    new/old")
    for name, s_old in out["old"].items():
        s_new, c_old, c_new = out["new"][name], out["cpu_old"][name], out["cpu_new"][name]
        print(f"  {name:<26} {s_old:7.2f} s  {s_new:7.2f} s  {s_new / s_old:5.2f}   {c_old:9.2f} {c_new:6.2f}  "
              f"{c_new / c_old:5.2f}")


if __name__ == "__main__":
    main()
