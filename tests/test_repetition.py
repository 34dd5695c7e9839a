"""Repetition schedules (sparse_tui/science/repetition.py, issue 33): task.p / task.B as a constant, steps, or a switch
set off
by the run's own metrics; validated like every key, logged as sched/p / sched/B, kept in checkpoints, per member of a
stack."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
from conftest import StopAfter

from sparse_tui.lifecycle import runner
from sparse_tui.presets.errors import PresetError
from sparse_tui.presets.loading import expand, load_preset, validate_preset_data
from sparse_tui.science.repetition import Schedule, Switcher
from sparse_tui.store import RunStore
from sparse_tui.training.checkpoint import has_checkpoint

BASE = {"task": {"kind": "recall", "n_tokens": 8, "n_pairs": 3},
        "model": {"kind": "transformer", "n_layers": 2, "n_heads": 1, "d_model": 16},
        "train": {"lr": 1e-2, "batch_size": 16, "steps": 60, "device": "cpu"},
        "eval": {"every": 5, "test_size": 32},
        "plateau": {"metric": "test/acc", "mode": "above", "value": 0.5}}


def _cfg(**task):
    raw = copy.deepcopy(BASE)
    raw["task"].update(task)
    return expand(validate_preset_data(raw, "x.toml"))[0]


def _err(**task) -> str:
    with pytest.raises(PresetError) as e:
        _cfg(**task)
    assert len(e.value.lines) == 1, e.value.lines
    return e.value.lines[0]


def test_constant_is_todays_syntax_and_table_equals_string():
    assert _cfg(p=0.25).config.task.p == 0.25 and _cfg(p=0.25).params["task.p"] == 0.25
    table = _cfg(p={"start": 0.9, "then": 0.0, "when": "test/acc >= 0.05"})
    text = _cfg(p="0.9 -> 0 when test/acc >= 0.05")
    assert table.config.task.p == text.config.task.p
    assert table.params["task.p"] == "0.9 -> 0 when test/acc >= 0.05"  # stored as one value
    steps = _cfg(B={"steps": [[0, 3], [20, 1]]})
    assert steps.params["task.B"] == "steps 0:3 20:1" and steps.config.task.B == _cfg(B="steps 0:3 20:1").config.task.B
    multi = _cfg(p={"start": 0.0, "then": [0.9, 0.0], "when": ["stuck 3", "plateau"]})
    assert str(multi.config.task.p) == "0 -> 0.9 when stuck 3 -> 0 when plateau"
    # the stored form reads back (a run's config is rebuilt from its JSON)
    from sparse_tui.presets.loading import config_from_json
    again = config_from_json(multi.config.model_dump(mode="json"))
    assert again.task.p == multi.config.task.p


@pytest.mark.parametrize("task, key, words", [
    ({"p": "1.5 -> 0 when plateau"}, "task.p", "must be <= 1 (schedule 1.5 -> 0 when plateau)"),
    ({"p": {"start": 0.9}}, "task.p", "needs start, then and when"),
    ({"p": "0.9 -> 0 when foo/bar >= 1"}, "task.p", "'foo/bar' is not logged"),
    ({"p": "0.9 -> 0 when stuck 0"}, "task.p", "K >= 1"),
    ({"p": "0.9 -> 0 whenever"}, "task.p", "expected 'VALUE when CONDITION'"),
    ({"p": True}, "task.p", "must be a number"),
    ({"B": {"steps": [[5, 2]]}}, "task.B", "first entry must be at step 0"),
    ({"B": "4 -> 1 when plateau"}, "task.B", "must be <= n_pairs (schedule 4 -> 1 when plateau)"),
    ({"p": "0.9 -> 0 when plateau", "train_size": 100}, "task.p", "needs train_size = 0"),
])
def test_bad_schedules_are_one_line_naming_the_key(task, key, words):
    line = _err(**task)
    assert line.startswith(f"x.toml: {key}") and words in line, line


def test_linreg_B_schedule_must_be_integers():
    raw = {"task": {"kind": "linreg", "d": 4, "T": 8, "B": "2.5 -> 1 when plateau"}, "model": {"kind": "toy"}}
    with pytest.raises(PresetError) as e:
        validate_preset_data(raw, "x.toml")
    assert e.value.lines == ["x.toml: task.B: must be an integer, got 2.5 (schedule 2.5 -> 1 when plateau)"]


def test_cli_refuses_a_bad_schedule_with_exit_2(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('[task]\nkind = "recall"\nn_tokens = 8\nn_pairs = 3\np = "0.9 -> 0 when nothing"\n')
    r = subprocess.run([sys.executable, "-m", "sparse_tui", "run", str(p), "--dry-run"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "task.p" in r.stderr and "Traceback" not in r.stderr + r.stdout


def test_sweep_over_schedules_and_constants(tmp_path):
    raw = copy.deepcopy(BASE)
    raw["sweep"] = {"task.p": [0.0, 0.9, "0.9 -> 0 when test/acc >= 0.3"]}
    specs = expand(validate_preset_data(raw, "x.toml"))
    assert [s.params["task.p"] for s in specs] == [0.0, 0.9, "0.9 -> 0 when test/acc >= 0.3"]
    raw["sweep"] = {"task.p": [0.0, "2 -> 0 when plateau"]}
    with pytest.raises(PresetError) as e:
        validate_preset_data(raw, "x.toml")
    assert any("sweep.task.p[1]" in line and "must be <= 1" in line for line in e.value.lines), e.value.lines


def test_switcher_rules():
    # a metric crossing: fires at the first evaluation where it holds, acts from the next step
    sw = Switcher(Schedule.model_validate("0.9 -> 0 when test/acc >= 0.05"))
    assert sw.value(1) == 0.9
    assert not sw.observe(0, {"test/acc": 0.01}) and not sw.observe(20, {"test/acc": 0.049})
    assert sw.observe(40, {"test/acc": 0.05}) and sw.fired == [40]
    assert sw.value(40) == 0.0 and sw.value(41) == 0.0
    assert not sw.observe(60, {"test/acc": 0.9})  # nothing armed after the last switch
    # stuck: K evaluations without a new best (higher is better for the accuracy watched by [plateau] 'above')
    sw = Switcher(Schedule.model_validate("0 -> 0.9 when stuck 2 -> 0 when plateau"), "test/acc", True)
    hist = [(0, 0.1, False), (5, 0.2, False), (10, 0.2, False), (15, 0.15, False), (20, 0.3, True), (25, 0.3, False)]
    after = [(s, sw.observe(s, {"test/acc": a}, plateau=pl), sw.value(s + 1)) for s, a, pl in hist]
    assert [s for s, hit, _ in after if hit] == [15, 20]
    assert [v for *_, v in after] == [0, 0, 0, 0.9, 0, 0]
    # stuck on a loss: lower is better
    sw = Switcher(Schedule.model_validate("1 -> 0 when stuck 1 train/loss"))
    assert not sw.observe(0, {"train/loss": 2.0}) and not sw.observe(5, {"train/loss": 1.0})
    assert sw.observe(10, {"train/loss": 1.5}) and sw.fired == [10]
    # steps: entry [s, v] is in force from training step s + 1
    sw = Switcher(Schedule.model_validate({"steps": [[0, 4], [20, 1]]}))
    assert [sw.value(s) for s in (1, 20, 21, 60)] == [4, 4, 1, 1]


def _run(tmp_path, name, text_p, *extra, stop=None):
    preset = tmp_path / "sched.toml"
    lines = ["[task]", 'kind = "recall"', "n_tokens = 8", "n_pairs = 3", f"p = {text_p}",
             "[model]", 'kind = "transformer"', "n_layers = 2", "n_heads = 1", "d_model = 16",
             "[train]", "lr = 1e-2", "batch_size = 16", "steps = 60", 'device = "cpu"', "checkpoint_every = 20",
             "[eval]", "every = 5", "test_size = 32",
             "[plateau]", 'metric = "test/acc"', 'mode = "above"', "value = 0.5"]
    preset.write_text("\n".join(lines) + "\n")
    store = RunStore(tmp_path / name)
    batch, ids = store.create_runs(expand(load_preset(preset, list(extra))))
    runner.work(store, batch, should_stop=stop)
    return store, batch, ids


def test_a_switch_changes_the_data_and_is_logged(tmp_path):
    store, _, (rid,) = _run(tmp_path, "a", '"0.9 -> 0 when test/acc >= 0.2"', "seeds=[0]")
    m = store.metrics(rid)
    steps, vals = m["sched/p"]
    acc = dict(zip(*m["test/acc"]))
    first = next(s for s in steps if acc[s] >= 0.2)
    assert [v for s, v in zip(steps, vals) if s < first] == [0.9] * steps.index(first)
    assert all(v == 0.0 for s, v in zip(steps, vals) if s >= first)
    # the data changed: the same run with a constant p = 0.9 differs after the switch, not before
    const, _, (cid,) = _run(tmp_path, "c", "0.9", "seeds=[0]")
    c = dict(zip(*const.metrics(cid)["train/loss"]))
    s_ = dict(zip(*m["train/loss"]))
    assert all(c[k] == s_[k] for k in c if k <= first) and any(c[k] != s_[k] for k in c if k > first + 5)


def test_resumed_run_switches_at_the_same_step(tmp_path):
    """Interrupted between evaluations after the switch's stuck count began, resumed from its checkpoint: the same
    switch step and bit-identical metrics as the run never interrupted (the switch state is in the checkpoint)."""
    p = '"0.9 -> 0 when stuck 3 test/loss"'
    ref, _, (rref,) = _run(tmp_path, "ref", p, "seeds=[1]")
    sw = [s for s, v in zip(*ref.metrics(rref)["sched/p"]) if v == 0.0]
    assert sw and 10 < sw[0] < 60, sw  # the switch happens inside the run, after the stop below
    store, batch, (rid,) = _run(tmp_path, "cut", p, "seeds=[1]", stop=StopAfter(sw[0] - 4))
    assert store.get(rid).status == "interrupted" and has_checkpoint(store.runs_dir, rid) == sw[0] - 4
    assert runner.requeue_for_resume(store, batch, [rid]) == [rid]
    runner.work(store, batch)
    assert store.get(rid).status == "finished"
    assert store.metrics(rid) == ref.metrics(rref)


def test_stacked_members_follow_their_own_schedules(tmp_path):
    """Two schedules and a constant in one stack: each member's numbers are those it has trained alone."""
    from sparse_tui.training.loop import train_stack

    specs = expand(load_preset(_preset(tmp_path), ["sweep.task.p=[0.9, '0.9 -> 0 when stuck 2', 'steps 0:0 30:0.9']"]))
    cfgs = [s.config for s in specs]
    from sparse_tui.training.runlog import RunLogger

    class Keep(RunLogger):
        def __init__(self):
            super().__init__()
            self.rows = []

        def metrics(self, step, vals):
            self.rows.append((step, dict(vals)))

    together = [Keep() for _ in cfgs]
    train_stack(cfgs, loggers=together)
    for cfg, lg in zip(cfgs, together):
        alone = Keep()
        train_stack([cfg], loggers=[alone])
        assert [s for s, _ in alone.rows] == [s for s, _ in lg.rows]
        for (s, a), (_, b) in zip(alone.rows, lg.rows):
            assert a.get("sched/p") == b.get("sched/p")
            assert a["test/loss"] == pytest.approx(b["test/loss"], rel=1e-4, abs=1e-5), (cfg.task.p, s)
    assert [v for s, v in [(s, r["sched/p"]) for s, r in together[2].rows]] == [0.0] * 6 + [0.9] * 7


def _preset(tmp_path):
    p = tmp_path / "stk.toml"
    p.write_text('seeds = [0]\n[task]\nkind = "recall"\nn_tokens = 8\nn_pairs = 3\n[model]\nkind = "transformer"\n'
                 'n_layers = 1\nn_heads = 1\nd_model = 16\n[train]\nlr = 1e-2\nbatch_size = 8\nsteps = 60\n'
                 'device = "cpu"\n[eval]\nevery = 5\ntest_size = 16\n[plateau]\nmetric = "test/acc"\nmode = "above"\n'
                 'value = 0.5\n')
    return p


# ---------------------------------------------------------------------------------------------------------------
# The theory of the switch: the reduced flow (Eqs. 12-14 / 17-21) with a time-varying p (dynamics.switched_trajectory)
# ---------------------------------------------------------------------------------------------------------------

D, T_ = 64, 512  # Fig. 10's setting (presets/paper_fig10_theory.toml): f(0.3, 64) = 2.5


def _flow(phases, times=None):
    import numpy as np

    from sparse_tui.science import dynamics as dyn

    times = np.linspace(0, 8000, 801) if times is None else times
    return dyn.switched_trajectory(times, D, T_, phases, test_B=1)


def test_one_phase_is_the_constant_flow():
    import numpy as np

    from sparse_tui.science import dynamics as dyn

    t = np.linspace(0, 8000, 401)
    for p in (0.0, 0.3):
        ref = dyn.trajectory(t, D, T_, 1, p, test_B=1)
        got, sw = _flow([dyn.Phase(1, p)], t)
        assert sw == [] and got.plateau == pytest.approx(ref.plateau, rel=1e-6)
        assert np.max(np.abs(got.test_loss - ref.test_loss)) < 1e-5


def test_switch_is_bounded_by_the_constant_flows_and_follows_the_carried_state():
    """A switch p = 0.3 -> 0 at flow time t_s: the plateau lies between the constant flows that bound it (p = 0.3:
    2158; p = 0: 5319), falls as t_s grows, and in the linear regime (t_s <= 3/4 of p's plateau) is
    t_s + t_0 - ln(1 + da_s + w_s) sqrt(d) T within 6% (docs/THEORY.md, "The switch")."""
    import numpy as np

    from sparse_tui.science import dynamics as dyn

    t0 = _flow([dyn.Phase(1, 0.0)])[0].plateau
    tp = _flow([dyn.Phase(1, 0.3)])[0].plateau
    assert t0 == pytest.approx(5319.3, abs=0.5) and tp == pytest.approx(2157.6, abs=0.5)
    prev = t0
    for frac in (0.25, 0.5, 0.75):
        ts = frac * tp
        tr, sw = _flow([dyn.Phase(1, 0.3, ts), dyn.Phase(1, 0.0)], np.array([ts, 8000.0]))
        assert sw == [pytest.approx(ts)] and tp < tr.plateau < prev
        prev = tr.plateau
        a0 = 1 + tr.delta_a[0] + tr.w[0]
        assert tr.plateau == pytest.approx(ts + t0 - np.log(a0) * np.sqrt(D) * T_, rel=0.06)
    # switched after the plateau's end: the same plateau as p = 0.3, and the loss falls to 1e-3 sooner than with
    # p = 0.3 kept (2300 vs 2370) and than with no repetition at all (5470); the end is the same (W = W*)
    after, sw = _flow([dyn.Phase(1, 0.3, ("test_loss", 0.1, -1)), dyn.Phase(1, 0.0)])
    keep, none = _flow([dyn.Phase(1, 0.3)])[0], _flow([dyn.Phase(1, 0.0)], np.linspace(0, 16000, 1601))[0]
    assert sw == [pytest.approx(tp, rel=1e-6)] and after.plateau == pytest.approx(tp, rel=1e-6)

    def reach(tr, level=1e-3):
        return tr.t[np.argmax(tr.test_loss <= level)]

    assert (reach(after), reach(keep), reach(none)) == (2300, 2370, 5470)
    assert after.test_loss[-1] == pytest.approx(keep.test_loss[-1], rel=1e-3)


def test_when_to_switch_during_the_escape():
    """Switching once the test loss has fallen 2-10% (0.49-0.45 of 0.5) gives a plateau shorter than keeping p
    (2114-2147 < 2158); switching at the first movement (0.4999) loses most of the speed-up (4179)."""
    from sparse_tui.science import dynamics as dyn

    got = {lv: _flow([dyn.Phase(1, 0.3, ("test_loss", lv, -1)), dyn.Phase(1, 0.0)])[0].plateau
           for lv in (0.4999, 0.49, 0.45)}
    assert got[0.4999] == pytest.approx(4179, abs=2)
    assert got[0.49] == pytest.approx(2147, abs=2) and got[0.45] == pytest.approx(2114, abs=2)


def test_an_ode_run_follows_its_schedule():
    """models/ode.py: a scheduled 'ode' run switches at the exact crossing and logs sched/p."""
    from sparse_tui.models.ode import simulate_run

    raw = {"task": {"kind": "linreg", "d": D, "T": T_, "position": "last", "p": "0.3 -> 0 when plateau"},
           "model": {"kind": "ode"}, "train": {"optimizer": "sgd", "lr": 1.0, "steps": 4000},
           "eval": {"every": 10}, "plateau": {"metric": "test/loss", "mode": "fraction", "value": 0.2}}
    run = simulate_run(expand(validate_preset_data(raw, "x.toml"))[0].config)
    assert run.plateau_step == pytest.approx(2157.6, abs=0.5)
    sched = dict(zip(run.steps.tolist(), run.metrics["sched/p"].tolist()))
    assert sched[2150] == 0.3 and sched[2160] == 0.0
    raw["task"]["p"] = "0.3 -> 0 when stuck 3"
    with pytest.raises(PresetError) as e:
        validate_preset_data(raw, "x.toml")
    assert "'stuck' never fires" in e.value.lines[0]


def test_diversity_verdict():
    """reports/entries/diversity.py's check of the §4 entries (issue 42): a switch is judged at its last level
    against no repetition and the constant it starts from, and on its final value; reproduced when it is 1.5×
    sooner than none in every seed, in kind when only sooner, not reproduced otherwise (tests/test_claims.py: the
    records' own numbers)."""
    from types import SimpleNamespace

    from sparse_tui.reports.entries.diversity import CLAIM, DiversityData

    def run(setting, seed, at60, d):
        return {"setting": setting, "seed": seed, "cross": [100.0, at60], "final_vs_base": d, "higher": True,
                "levels": [0.05, 0.6]}

    check = CLAIM.check
    base = [run("no repetition", s, 1600.0, 0.0) for s in (0, 1)] + [run("B 4.0", s, None, -0.56) for s in (0, 1)]
    rep = lambda rows: SimpleNamespace(data=DiversityData(base + rows, {}))  # noqa: E731
    sw = "B 4 -> 1 when test/acc >= 0.05"
    assert check(None, rep([run(sw, 0, 1000.0, 0.01), run(sw, 1, 1050.0, -0.01)]))[0] == "reproduced"
    assert check(None, rep([run(sw, 0, 1100.0, 0.04), run(sw, 1, 1110.0, -0.015)]))[0] == "in kind"
    assert check(None, rep([run(sw, 0, 1100.0, 0.04), run(sw, 1, 1110.0, -0.05)]))[0] == "not reproduced"
    assert check(None, rep([run(sw, 0, 1100.0, 0.0), run(sw, 1, 1600.0, 0.0)]))[0] == "not reproduced"  # a tie
