"""The sweep scheduler: plans per device, grouping by shape, splitting by a (fake) memory budget."""

from __future__ import annotations

import pytest

from sparse_tui.presets.loading import RunSpec
from sparse_tui.presets.resources import n_params, step_bytes
from sparse_tui.presets.schema import RunConfig
from sparse_tui.training import scheduler as sch

BASE = {
    "task": {"kind": "recall", "n_tokens": 64, "n_pairs": 32},
    "model": {"kind": "transformer", "n_layers": 2, "n_heads": 1, "d_model": 32},
    "train": {"lr": 1e-2, "batch_size": 128, "steps": 100, "device": "cpu"},
}


def cfg(seed=0, d_model=32, **train) -> RunConfig:
    raw = {**BASE, "seed": seed, "model": {**BASE["model"], "d_model": d_model}, "train": {**BASE["train"], **train}}
    return RunConfig.model_validate(raw)


def specs(cfgs):
    return [RunSpec("p", "p.toml", c, {"seed": c.seed}) for c in cfgs]


def test_plan_cpu_uses_one_single_thread_process_per_core():
    sw = specs([cfg(s, d) for d in (8, 16) for s in (0, 1)])
    p = sch.plan(sw, "auto", device="cpu", cores=2, idle=2, speedup=1.3)
    assert (p.schedule, p.workers, p.threads, p.group) == ("processes", 2, 1, 1)
    assert "x1.30" in p.describe()
    assert sch.plan(sw, "auto", device="cpu", cores=8, idle=8, speedup=2.0).workers == 4  # never more than runs
    assert sch.plan(sw[:1], "auto", device="cpu", cores=2, idle=2).schedule == "sequential"
    assert sch.plan(sw, "auto", device="cpu", cores=1, idle=1).workers == 1
    busy = sch.plan(sw, "auto", device="cpu", cores=2, idle=0)  # other processes keep the cores busy
    assert (busy.schedule, busy.workers, busy.threads) == ("sequential", 1, 1)
    assert 0 <= sch.idle_cores(2) <= 2


def test_plan_cpu_keeps_one_multithreaded_process_when_threads_pay():
    """Models that use the threads well (measured: the paper's d_model 256 model runs 1.88x faster on 2 threads)
    train faster in one process with a thread per idle core than in one single-thread process per core, above
    all when the runs do not split evenly over the workers (9 runs on 2 workers: the last one runs alone)."""
    nine = specs([cfg(s) for s in range(9)])
    p = sch.plan(nine, "auto", device="cpu", cores=2, idle=2, speedup=1.88)
    assert (p.schedule, p.workers, p.threads) == ("sequential", 1, 2)
    # ceil(9 / 2) = 5 rounds of single-thread runs against 9 / S rounds: processes win below S = 1.8
    assert sch.plan(nine, "auto", device="cpu", cores=2, idle=2, speedup=1.75).schedule == "processes"
    sixteen = specs([cfg(s) for s in range(16)])
    assert sch.plan(sixteen, "auto", device="cpu", cores=2, idle=2, speedup=1.64).schedule == "processes"
    assert sch.plan(sixteen, "auto", device="cpu", cores=2, idle=2, speedup=1.99).schedule == "processes"
    assert sch.plan(sixteen, "auto", device="cpu", cores=2, idle=2, speedup=2.0).schedule == "sequential"


def test_thread_speedup_is_measured_on_a_real_step_and_leaves_no_trace():
    import torch

    c = cfg(0, 8, steps=50)
    threads, rng = torch.get_num_threads(), torch.get_rng_state()
    t1, t2 = sch.measure_thread_speedup(c, 2, steps=1, rounds=1)
    assert 0 < t1 < 5 and 0 < t2 < 5
    assert torch.get_num_threads() == threads and torch.equal(torch.get_rng_state(), rng)
    # the auto plan on 2 idle cores times that step itself and says what it measured
    p = sch.plan(specs([cfg(s, 8, steps=50) for s in range(4)]), "auto", device="cpu", cores=2, idle=2)
    assert p.schedule in ("processes", "sequential") and "ms on 1 thread" in p.reason


def test_plan_gpu_stacks_same_shape_runs():
    sw = specs([cfg(s) for s in range(4)])
    p = sch.plan(sw, "auto", device="cuda")
    assert p.schedule == "stacked" and p.workers == 1 and p.group > 1
    widths = specs([cfg(0, d) for d in (8, 16)])  # widths are padded inside one stack (models/stack.py)
    assert sch.plan(widths, "auto", device="cuda").schedule == "stacked"
    distinct = specs([cfg(0, 8), cfg(0, 8, batch_size=64)])
    assert sch.plan(distinct, "auto", device="cuda").schedule == "sequential"


def test_plan_explicit_schedules_and_bad_name():
    sw = specs([cfg(s) for s in range(3)])
    assert sch.plan(sw, "sequential", device="cpu").workers == 1
    assert sch.plan(sw, "processes", device="cpu", cores=2, idle=0).workers == 2
    assert sch.plan(sw, "stacked", device="cpu").group > 1
    with pytest.raises(ValueError):
        sch.plan(sw, "warp")


def test_grouping_by_shape_keeps_order_and_separates_shapes():
    cfgs = [cfg(s, d, lr=lr) for d in (8, 16) for s in (0, 1) for lr in (1e-2, 1e-3)]
    cfgs.append(cfg(0, 8, batch_size=64))  # other batch size: other shapes
    assert sch.group_runs(cfgs) == [[0, 1, 2, 3, 4, 5, 6, 7], [8]]  # widths share a stack (padded exactly)
    assert sch.group_runs(cfgs, max_group=3) == [[0, 1, 2], [3, 4, 5], [6, 7], [8]]
    # with a padding cap, a width twice another is not padded to (x1.6 its FLOPs here)
    assert sch.padding_overhead(cfgs[:8]) > 1.25
    assert sch.group_runs(cfgs, cap=1.25) == [[0, 1, 2, 3], [4, 5, 6, 7], [8]]


def _preset(name):
    from pathlib import Path

    from sparse_tui.presets.loading import expand, load_preset

    return [s.config for s in expand(load_preset(Path(__file__).parent.parent / "presets" / name))]


def test_stacks_are_planned_by_the_work_padding_wastes():
    """The FLOP model gives the issue's figures (blog_nembd: 20 GFLOP per step of its own, 59 padded to width 80;
    Fig. 4: 171 against 292 padded to length 65); the plan is the one predicted fastest (per stack its padded FLOPs
    plus STACK_OVERHEAD_FLOPS), which on the H100 measurements behind that constant is one stack for the blog sweep
    and, for Fig. 4, never one stack padded to length 65; with a cap, every stack stays within it."""
    blog, fig4 = _preset("blog_nembd.toml"), _preset("paper_fig4_recall.toml")
    own = lambda cs: sum(sch.step_flops(c) for c in cs)  # noqa: E731
    assert len(blog) == 24 and own(blog) / 1e9 == pytest.approx(20.4, abs=0.1)
    assert sch.stack_flops(blog) / own(blog) == pytest.approx(2.9, abs=0.05)
    assert own(fig4) / 1e9 == pytest.approx(171, abs=1) and sch.stack_flops(fig4) / 1e9 == pytest.approx(292, abs=1)
    assert sch.group_runs(blog) == [list(range(24))]
    plan = sch.group_runs(fig4)
    price = lambda cs, gs: sum(sch.STACK_OVERHEAD_FLOPS + sch.stack_flops([cs[i] for i in g]) for g in gs)  # noqa
    per_length = [[i for i, c in enumerate(fig4) if c.task.n_pairs == n] for n in (8, 16, 32)]
    assert len(plan) > 1 and price(fig4, plan) <= min(price(fig4, per_length), price(fig4, [list(range(9))]))
    for cfgs in (blog, fig4):
        groups = sch.group_runs(cfgs, cap=1.25)
        assert sorted(i for g in groups for i in g) == list(range(len(cfgs)))
        for g in groups:
            members = [cfgs[i] for i in g]
            assert sch.stack_flops(members) <= 1.25 * own(members) * (1 + 1e-9)
            assert len({c.seed for c in members}) == 3  # the seeds of a sweep point share its stack
    # the plan is the cheapest predicted: no other split of the blog sweep by width is cheaper
    cost = lambda gs: price(blog, gs)  # noqa: E731
    widths = sorted({c.model.d_model for c in blog})
    for cut in range(1, len(widths)):
        lo = [i for i, c in enumerate(blog) if c.model.d_model <= widths[cut - 1]]
        hi = [i for i, c in enumerate(blog) if c.model.d_model > widths[cut - 1]]
        assert cost([list(range(24))]) <= cost([lo, hi])


def test_ode_runs_never_stack():
    ode = RunConfig.model_validate({"task": {"kind": "linreg"}, "model": {"kind": "ode"}})
    assert sch.group_runs([ode, ode]) == [[0], [1]]


def test_grouping_by_memory_budget_splits_instead_of_overflowing():
    small, big = cfg(0, 8), cfg(0, 64)
    per_small, per_big = step_bytes(small), step_bytes(big)
    assert per_big > per_small > 0
    cfgs = [cfg(s, 8) for s in range(5)] + [cfg(s, 64) for s in range(3)]
    budget = int(2.5 * per_big)  # two big models fit, ten small ones do
    groups = sch.group_runs(cfgs, budget_bytes=budget)
    assert groups == [[0, 1, 2, 3, 4], [5, 6], [7]]
    for g in groups:  # every model of a stack costs the stack's largest shape
        assert len(g) * max(step_bytes(cfgs[i]) for i in g) <= budget
    # a budget smaller than one model still trains it (alone): a sweep that fits one at a time always runs
    assert sch.group_runs(cfgs[5:], budget_bytes=per_big // 2) == [[0], [1], [2]]


def test_memory_estimate_grows_with_batch_and_sequence():
    a = step_bytes(cfg(0, 32))
    assert step_bytes(cfg(0, 32, batch_size=256)) > 1.8 * a
    longer = RunConfig.model_validate({**BASE, "task": {"kind": "recall", "n_tokens": 64, "n_pairs": 64}})
    assert step_bytes(longer) > 2 * a


def test_param_count_matches_built_models():
    from sparse_tui.models import build_model
    from sparse_tui.tasks import make_task

    paper = RunConfig.model_validate(
        {
            "task": {"kind": "recall", "n_tokens": 64, "n_pairs": 8},
            "model": {"kind": "transformer", "n_layers": 4, "n_heads": 4, "d_model": 64, "d_qk": 16, "mlp": True,
                      "layernorm": True, "pos_enc": "sinusoidal"},
        }
    )
    toy = RunConfig.model_validate({"task": {"kind": "linreg", "d": 8, "T": 16}, "model": {"kind": "toy"}})
    lin = RunConfig.model_validate(
        {"task": {"kind": "linreg", "d": 8, "T": 16, "indicator": True}, "model": {"kind": "transformer"}}
    )
    bare = RunConfig.model_validate(
        {"task": {"kind": "recall", "n_tokens": 64, "n_pairs": 8},
         "model": {"kind": "transformer", "mlp": True, "bias": False, "pos_init_std": 0.1}}
    )
    bare_lin = lin.model_copy(update={"model": lin.model.model_copy(update={"bias": False})})
    tied = paper.model_copy(update={"model": paper.model.model_copy(update={"tie_embeddings": True})})
    for c in (cfg(), paper, toy, lin, bare, bare_lin, tied):
        model = build_model(c, make_task(c, "cpu"))
        assert n_params(c) == sum(p.numel() for p in model.parameters())


def test_cli_schedule_flag(tmp_path):
    from typer.testing import CliRunner

    from sparse_tui.cli import app

    preset = tmp_path / "s.toml"
    preset.write_text(
        'name = "s"\nseeds = [0, 1]\n[task]\nkind = "recall"\nn_tokens = 8\nn_pairs = 3\n'
        '[model]\nkind = "transformer"\nd_model = 8\n[train]\nsteps = 4\nbatch_size = 8\ndevice = "cpu"\n'
        "[eval]\nevery = 2\ntest_size = 8\n"
    )
    r = CliRunner().invoke(app, ["run", str(preset), "--headless", "--runs-dir", str(tmp_path / "r"),
                                 "--schedule", "stacked"])
    assert r.exit_code == 0, r.output
    assert "stacks of up to" in r.output
    r = CliRunner().invoke(app, ["run", str(preset), "--headless", "--schedule", "warp"])
    assert r.exit_code == 2 and "--schedule" in r.output

