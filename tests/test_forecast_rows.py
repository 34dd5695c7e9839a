"""One odd row must not take `runs`, `runs --json` or the console's poller down (issue 45, "The forecast"): the
forecast skips a row it cannot use and names it; JSON never carries NaN (null, with a reason)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.science.forecast import forecasts
from sparse_tui.store import RunStore

FIG15 = Path(__file__).parent.parent / "presets" / "paper_fig15_adam_cpu.toml"


def _store(tmp_path) -> tuple[Path, list[str]]:
    """Fig. 15's CPU preset: 4 finished runs on a law, 2 running (in this live process, so nothing reaps them)."""
    runs = tmp_path / "runs"
    store = RunStore(runs)
    specs = expand(load_preset(FIG15, ["seeds=[0]", 'sweep={"task.d" = [16, 32, 64], "task.T" = [16, 64]}']))
    _, ids = store.create_runs(specs)
    for rid in ids[:4]:
        r = store.get(rid)
        store.finish(rid, "finished", plateau_step=2.0 * r.params["task.d"] * r.params["task.T"] ** 0.5, step=6000)
    for rid in ids[4:]:
        store.con.execute("UPDATE runs SET status='running', step=500, started_at=1000, heartbeat_at=1100, pid=?, "
                          "host=? WHERE run_id=?", (os.getpid(), store._host, rid))
    store.con.commit()
    store.close()
    return runs, ids


def _edit(runs: Path, rid: str, sql: str, *args) -> None:
    store = RunStore(runs)
    store.con.execute(sql, (*args, rid))
    store.con.commit()
    store.close()


def _set_param(runs: Path, rid: str, key: str, value) -> None:
    store = RunStore(runs)
    params = json.loads(store.con.execute("SELECT params FROM runs WHERE run_id=?", (rid,)).fetchone()[0])
    if value is _MISSING:
        params.pop(key)
    else:
        params[key] = value
    store.con.execute("UPDATE runs SET params=? WHERE run_id=?", (json.dumps(params), rid))
    store.con.commit()
    store.close()


_MISSING = object()


def _no_nan(text: str):
    def refuse(c):
        raise AssertionError(f"{c} in the JSON")

    return json.loads(text, parse_constant=refuse)


def _cli(runs: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparse_tui", "runs", "--runs-dir", str(runs), *args],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, timeout=120)


def _odd(kind: str, runs: Path, ids: list[str]) -> str:
    """Makes one row odd; returns the odd run's id."""
    if kind == "d zero":  # a running run past its plateau: measured / forecast divided by zero
        _set_param(runs, ids[4], "task.d", 0)
        _edit(runs, ids[4], "UPDATE runs SET plateau_step=? WHERE run_id=?", 400.0)
        return ids[4]
    if kind == "d negative":
        _set_param(runs, ids[4], "task.d", -16)
        return ids[4]
    if kind == "key missing":
        _set_param(runs, ids[4], "task.d", _MISSING)
        return ids[4]
    if kind == "plateau text":
        _edit(runs, ids[0], "UPDATE runs SET plateau_step=? WHERE run_id=?", "soon")
        return ids[0]
    if kind == "plateau infinite":
        _edit(runs, ids[0], "UPDATE runs SET plateau_step=? WHERE run_id=?", float("inf"))
        return ids[0]
    raise AssertionError(kind)


KINDS = ["d zero", "d negative", "key missing", "plateau text", "plateau infinite"]


@pytest.mark.parametrize("kind", KINDS)
def test_one_odd_row_does_not_take_runs_down(tmp_path, kind):
    runs, ids = _store(tmp_path)
    odd = _odd(kind, runs, ids)
    js = _cli(runs, "--json")
    assert js.returncode == 0 and "Traceback" not in js.stderr, js.stderr
    rows = {r["run_id"]: r for r in _no_nan(js.stdout)}
    assert odd in js.stderr  # named on stderr
    if odd in rows:  # listed: its forecast is null with a reason
        f = rows[odd]["forecast"]
        assert f["step"] is None and f["reason"]
    # every other run still gets its forecast
    others = [r for rid, r in rows.items() if rid != odd]
    assert others and all(r["forecast"] and r["forecast"]["step"] for r in others)
    table = _cli(runs)
    assert table.returncode == 0 and "Traceback" not in table.stderr, table.stderr
    assert odd in table.stderr and ids[5] in table.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_one_odd_row_does_not_stop_the_poller_s_forecasts(tmp_path, kind):
    """The console's poller calls ``forecasts(store.runs(reap=False))``: no exception, the odd row named."""
    runs, ids = _store(tmp_path)
    odd = _odd(kind, runs, ids)
    store = RunStore(runs)
    recs = store.runs(reap=False)
    fc = forecasts(recs)
    named = any(odd in w for w in getattr(fc, "warnings", []) + store.warnings)
    assert named or (fc[odd]["step"] is None and fc[odd]["reason"])
    assert fc[ids[5]]["step"] > 0 and fc[ids[5]]["low"] < fc[ids[5]]["step"] < fc[ids[5]]["high"]
    store.close()


def test_runs_json_fits_once_per_preset_on_a_500_run_store(tmp_path, monkeypatch):
    """Issue 41: `runs --json` on a store of 500 runs (Fig. 15's 6 runs copied with SQL, as
    benchmarks/large_store.py builds its 2,000-run store) fits the law once per preset, not once per run; a second
    call with nothing changed fits nothing (cached by the peers' plateaus). Counted, not timed."""
    from typer.testing import CliRunner

    import sparse_tui.science.forecast as fmod
    from sparse_tui.cli import app

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from large_store import copy_runs

    runs, ids = _store(tmp_path)
    n_runs, _ = copy_runs(runs / "runs.db", 84)
    assert n_runs == 504
    store = RunStore(runs)  # the copies run "in" this process (their pid is ours): nothing reaps them
    store.con.execute("UPDATE runs SET pid=? WHERE status='running'", (os.getpid(),))
    store.con.commit()
    store.close()
    fmod._CACHE.clear()
    calls = []
    real = fmod.fit_law
    monkeypatch.setattr(fmod, "fit_law", lambda *a, **k: calls.append(1) or real(*a, **k))
    res = CliRunner().invoke(app, ["runs", "--json", "--runs-dir", str(runs)])
    assert res.exit_code == 0, res.output
    rows = _no_nan(res.stdout)
    assert len(rows) == 504 and all(r["forecast"]["step"] > 0 for r in rows)
    assert len(calls) == 1  # one preset, one fit
    res = CliRunner().invoke(app, ["runs", "--json", "--runs-dir", str(runs)])
    assert res.exit_code == 0 and len(calls) == 1
