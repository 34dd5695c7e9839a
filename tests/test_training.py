"""Plateau detection, learning-rate schedules, and the trainer on tiny configs (loss must fall)."""

from __future__ import annotations

import math

import pytest
import torch

from sparse_tui.presets.loading import eval_steps, expand, load_preset, validate_preset_data
from sparse_tui.science.schedule import lr_factor
from sparse_tui.store import RunStore
from sparse_tui.training.plateau import PlateauDetector, plateau_step
from sparse_tui.training.trainer import RunLogger, train_run


def cfg_of(raw: dict, overrides=None):
    return expand(validate_preset_data(raw, "t.toml", overrides))[0].config


def test_plateau_fraction_of_initial():
    # App. D.1: first evaluated step where the loss is <= 0.2 x its initial value
    steps = [0, 10, 20, 30, 40]
    assert plateau_step(steps, [0.5, 0.45, 0.2, 0.09, 0.01], "fraction", 0.2) == 30
    assert plateau_step(steps, [0.5, 0.45, 0.2, 0.11, 0.101], "fraction", 0.2) is None
    assert plateau_step(steps, [0.5, 0.45, 0.1, 0.2, 0.3], "fraction", 0.2) == 20  # first crossing is kept


def test_plateau_absolute_and_accuracy():
    assert plateau_step([0, 1, 2], [3.0, 1.0, 0.5], "below", 1.0) == 1
    assert plateau_step([0, 5, 10], [0.01, 0.04, 0.06], "above", 0.05) == 10
    assert plateau_step([0, 5], [0.0, 0.01], "above", 0.05) is None
    d = PlateauDetector("above", 0.05)
    assert d.update(0, float("nan")) is None and d.update(5, 0.9) == 5


def test_lr_schedules():
    base = {"task": {"kind": "recall"}, "train": {"steps": 100, "warmup_steps": 10}}
    c = cfg_of(base)
    assert lr_factor(5, c) == 0.5 and lr_factor(10, c) == 1.0 and lr_factor(100, c) == 1.0
    c = cfg_of(base, ["train.schedule=linear"])
    assert lr_factor(10, c) == 1.0 and lr_factor(100, c) == pytest.approx(0.0)
    assert lr_factor(55, c) == pytest.approx(0.5)
    c = cfg_of(base, ["train.schedule=cosine", "train.min_lr_ratio=0.1"])
    assert lr_factor(55, c) == pytest.approx(0.55) and lr_factor(100, c) == pytest.approx(0.1)


def test_eval_steps_include_first_and_last():
    c = cfg_of({"task": {"kind": "recall"}, "train": {"steps": 23}, "eval": {"every": 10}})
    assert eval_steps(c) == [0, 10, 20, 23]


LINREG_TOY = {
    "task": {"kind": "linreg", "d": 8, "T": 8},
    "model": {"kind": "toy"},
    "train": {"optimizer": "sgd", "lr": 1.0, "batch_size": 64, "steps": 400, "device": "cpu"},
    "eval": {"every": 50, "test_size": 256},
}


def test_toy_model_loss_falls_and_plateau_detected():
    """Toy model (Eq. 2) by SGD: starts at loss 0.5 with uniform attention, escapes the plateau, attends."""
    logs = []
    res = train_run(cfg_of(LINREG_TOY), logger=RunLogger(on_eval=lambda s, v: logs.append((s, v))))
    first, last = logs[0][1], logs[-1][1]
    assert first["test/loss"] == pytest.approx(0.5, rel=0.15)
    assert first["toy/alpha"] == pytest.approx(1 / 8) and first["toy/w"] == 0.0
    assert last["test/loss"] < 0.2 * first["test/loss"]
    assert last["toy/alpha"] > 0.5 and last["toy/w"] > 1.0
    assert last["attn/L1/relevant"] == pytest.approx(last["toy/alpha"], rel=1e-5)
    assert res.status == "finished" and res.plateau_step is not None and 0 < res.plateau_step <= 400
    assert last["attn/entropy/L1"] < first["attn/entropy/L1"] == pytest.approx(math.log(8), rel=1e-4)


def test_transformer_recall_loss_falls(tiny_preset):
    """The smoke configuration: an induction head forms and recall emerges after a plateau (paper §3, Fig. 17)."""
    over = ["task.n_tokens=16", "task.n_pairs=4", "model.d_model=32", "train.batch_size=64", "train.steps=600"]
    cfg = expand(load_preset(tiny_preset, over + ["eval.every=50", "eval.test_size=256"]))[0].config
    logs = []
    res = train_run(cfg, logger=RunLogger(on_eval=lambda s, v: logs.append(v)))
    assert res.status == "finished"
    assert logs[0]["test/loss"] == pytest.approx(math.log(16), rel=0.1)  # near-uniform logits at init
    assert logs[-1]["test/loss"] < 0.5 * logs[0]["test/loss"]
    assert logs[-1]["test/acc"] > 0.8 and res.plateau_step is not None
    # the induction head: query -> relevant value (select) and value -> its key (copy) become sparse
    assert logs[-1]["attn/L2/select"] > 0.5 and logs[-1]["attn/L1/copy"] > 0.5
    for key in ("test/acc", "test/ppl", "attn/L1/select", "attn/L2/select", "attn/L1/H0/copy", "attn/entropy/L2", "lr"):
        assert key in logs[-1], key
    assert 0.0 <= logs[-1]["attn/L2/select"] <= 1.0


def test_divergence_is_recorded(tiny_preset, runs_dir):
    cfg = expand(load_preset(tiny_preset, ["train.lr=1e30", "train.optimizer=sgd", "train.steps=50"]))[0].config
    store = RunStore(runs_dir)
    batch, (rid,) = store.create_runs(expand(load_preset(tiny_preset)))
    store.claim_runs([rid], device="cpu", versions={})
    res = train_run(cfg, logger=RunLogger(store, rid))
    assert res.status == "diverged" and "non-finite" in res.reason
    assert store.metrics(rid)["test/loss"][0][0] == 0  # what was logged before divergence is kept


def test_stop_request_ends_run_with_status(tiny_preset):
    cfg = expand(load_preset(tiny_preset, ["train.steps=1000"]))[0].config
    calls = {"n": 0}

    def should_stop():
        calls["n"] += 1
        return "interrupted" if calls["n"] >= 7 else None

    res = train_run(cfg, should_stop=should_stop)
    assert res.status == "interrupted" and res.step == 7


def test_same_seed_same_curve(tiny_preset):
    cfg = expand(load_preset(tiny_preset))[0].config
    a, b = [], []
    train_run(cfg, logger=RunLogger(on_eval=lambda s, v: a.append(v["test/loss"])))
    train_run(cfg, logger=RunLogger(on_eval=lambda s, v: b.append(v["test/loss"])))
    assert a == b
    cfg2 = expand(load_preset(tiny_preset, ["seeds=[1]"]))[0].config
    c = []
    train_run(cfg2, logger=RunLogger(on_eval=lambda s, v: c.append(v["test/loss"])))
    assert c != a


def test_linreg_transformer_and_nearest_run():
    lin = cfg_of(
        {
            "task": {"kind": "linreg", "d": 4, "T": 6, "position": "random", "indicator": True},
            "model": {"kind": "transformer", "d_model": 16, "n_heads": 2, "pos_enc": "sinusoidal", "mlp": True},
            "train": {"steps": 30, "batch_size": 16, "device": "cpu"},
            "eval": {"every": 10, "test_size": 16},
        }
    )
    out = []
    assert train_run(lin, logger=RunLogger(on_eval=lambda s, v: out.append(v))).status == "finished"
    assert "attn/L2/H1/relevant" in out[-1] and "test/acc" not in out[-1]
    near = cfg_of(
        {
            "task": {"kind": "nearest", "vocab": 10, "context": 3},
            "model": {"kind": "transformer", "n_layers": 1, "d_model": 8, "pos_enc": "none"},
            "train": {"steps": 20, "batch_size": 16, "device": "cpu"},
            "eval": {"every": 10, "test_size": 16},
        }
    )
    assert train_run(near).status == "finished"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_same_code_on_cuda(tiny_preset):
    cfg = expand(load_preset(tiny_preset, ["train.device=cuda"]))[0].config
    assert train_run(cfg, device="cuda").status == "finished"


def test_flush_denormal_is_on_while_a_cpu_run_trains_and_restored_after():
    """train.flush_denormal (default on): denormal floats are flushed to zero during training on CPU (unstable runs
    ran up to 3x faster), and the setting is put back afterwards; off, the arithmetic keeps them."""
    import torch

    from sparse_tui.training.precision import denormals_flushed

    seen = []
    for flush in (True, False):
        cfg = cfg_of(LINREG_TOY, ["train.steps=3", "eval.every=3", f"train.flush_denormal={str(flush).lower()}"])
        assert cfg.train.flush_denormal is flush
        before = denormals_flushed()
        train_run(cfg, on_step=lambda step: seen.append(denormals_flushed()))
        assert denormals_flushed() == before
        assert seen[-3:] == [flush] * 3
    torch.set_flush_denormal(False)


def test_plateau_stop_after_ends_a_run_after_its_plateau_and_spares_its_stack_mates():
    """plateau.stop_after = K: a run ends (finished) at the first evaluation K or more steps after its plateau;
    a run in the same stack that has not crossed trains on, with the curve it has alone."""
    from sparse_tui.training.loop import train_stack

    base = cfg_of(LINREG_TOY)
    assert base.plateau.stop_after == -1  # default: every step
    crossing = cfg_of(LINREG_TOY, ["plateau.stop_after=100"])
    never = cfg_of(LINREG_TOY, ["plateau.stop_after=100", "plateau.mode=below", "plateau.value=0.0"])
    full = train_run(base)
    alone_logs, alone_never = [], []
    stopped = train_run(crossing, logger=RunLogger(on_eval=lambda s, v: "test/loss" in v and alone_logs.append(s)))
    train_run(never, logger=RunLogger(on_eval=lambda s, v: "test/loss" in v
                                      and alone_never.append((s, v["test/loss"]))))
    p = full.plateau_step
    assert p is not None and stopped.plateau_step == p
    assert stopped.status == "finished" and stopped.step == p + 100 < 400  # evaluations every 50 steps
    assert stopped.summary["steps_done"] == p + 100 and "plateau.stop_after" in stopped.reason
    assert alone_logs[-1] == p + 100
    # in one stack: the crossing run stops, the other trains all 400 steps with the same curve as alone
    logs = {0: [], 1: []}
    loggers = [RunLogger(on_eval=lambda s, v, i=i: "test/loss" in v and logs[i].append((s, v["test/loss"])))
               for i in (0, 1)]
    res = train_stack([crossing, never], loggers=loggers)
    assert res[0].step == p + 100 and res[1].step == 400 and res[1].plateau_step is None
    assert [s for s, _ in logs[1]] == [s for s, _ in alone_never]
    assert [v for _, v in logs[1]] == pytest.approx([v for _, v in alone_never], rel=1e-5)


def test_recall_probes_read_copy_and_selection_from_a_hand_built_attention_pattern():
    """Fig. 17 of arXiv 2505.17863: ``attn/L{l}/copy`` is the attention from the relevant value to its key (the
    copy, middle panel), ``attn/L{l}/select`` from the query to the relevant value(s) (the selection, right panel).
    A stub model returns attention maps built by hand; the probes must read exactly the planted masses, per head
    and averaged over heads; a last layer that computes only the readout row has no copy probe."""
    from sparse_tui.tasks.base import Batch
    from sparse_tui.training.metrics import evaluate

    # Two sequences of 2 pairs + query (L = 5): the query's pair sits in slot 1 (value at 3) and slot 0 (value at 1).
    x = torch.tensor([[0, 5, 1, 6, 1], [2, 7, 3, 8, 2]])
    relevant = torch.zeros(2, 5, dtype=torch.bool)
    relevant[0, 3] = relevant[1, 1] = True
    batch = Batch(x=x, y=torch.tensor([6, 7]), relevant=relevant, copy_q=torch.tensor([3, 1]),
                  copy_k=torch.tensor([2, 0]))
    L1 = torch.full((2, 2, 5, 5), 0.0)
    L1[:, :, :, 0] = 1.0  # every row on position 0 by default
    L1[0, 0, 3] = torch.tensor([0.1, 0.0, 0.7, 0.2, 0.0])  # seq 0, head 0: value 3 -> key 2 with 0.7
    L1[0, 1, 3] = torch.tensor([0.0, 0.0, 0.3, 0.7, 0.0])  # head 1: 0.3
    L1[1, 0, 1] = torch.tensor([0.5, 0.5, 0.0, 0.0, 0.0])  # seq 1, head 0: value 1 -> key 0 with 0.5
    L1[1, 1, 1] = torch.tensor([0.9, 0.1, 0.0, 0.0, 0.0])  # head 1: 0.9
    L2 = torch.zeros(2, 2, 1, 5)  # the last layer computes the readout row only
    L2[0, :, 0] = torch.tensor([0.0, 0.2, 0.0, 0.8, 0.0])  # query -> relevant value 3: 0.8 (both heads)
    L2[1, 0, 0] = torch.tensor([0.0, 0.6, 0.0, 0.4, 0.0])  # query -> relevant value 1: 0.6
    L2[1, 1, 0] = torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0])  # head 1 looks elsewhere: 0

    class Stub(torch.nn.Module):
        n_layers, n_heads = 2, 2

        def forward(self, xb):
            n = xb.shape[0]
            return torch.zeros(n, 10), [L1[:n], L2[:n]]

    m = evaluate(Stub(), batch, "recall", classification=True)
    assert m["attn/L1/H0/copy"] == pytest.approx((0.7 + 0.5) / 2)
    assert m["attn/L1/H1/copy"] == pytest.approx((0.3 + 0.9) / 2)
    assert m["attn/L1/copy"] == pytest.approx((0.6 + 0.6) / 2)
    assert m["attn/L2/H0/select"] == pytest.approx((0.8 + 0.6) / 2)
    assert m["attn/L2/H1/select"] == pytest.approx((0.8 + 0.0) / 2)
    assert m["attn/L2/select"] == pytest.approx(0.55)
    assert m["attn/L1/select"] == pytest.approx(0.0)  # layer 1's readout row sits on position 0
    assert "attn/L2/copy" not in m


def test_ode_and_trained_runs_share_one_rule_for_best(monkeypatch):
    """An ODE run's summary is built by the trained runs' tracker (tracker.Tracker): "best" is the lowest finite
    value of every *loss and the highest finite value of every *acc, whoever computed the points (before, the ODE
    path had its own builder: min over every value, NaN included, and no accuracies)."""
    import numpy as np

    from sparse_tui.models import ode
    from sparse_tui.presets.schema import RunConfig
    from sparse_tui.training.tracker import Tracker

    cfg = RunConfig.model_validate({"task": {"kind": "linreg", "d": 8, "T": 16}, "model": {"kind": "ode"},
                                    "train": {"lr": 1.0, "steps": 30}, "eval": {"every": 10}})
    series = {"test/loss": np.array([0.5, float("nan"), 0.2, 0.3]), "test/acc": np.array([0.1, 0.7, 0.4, 0.5]),
              "toy/w": np.array([0.0, 1.0, 2.0, 3.0])}
    fake = ode.OdeRun(steps=np.array([0, 10, 20, 30]), metrics=series, plateau_step=17.5, plateau_time=1.0,
                      plateau_exact=True, integrator_steps=42, notes=[])
    monkeypatch.setattr(ode, "simulate_run", lambda c: fake)
    ended = []
    res = train_run(cfg, on_done=lambda i, r: ended.append((i, r)))
    assert ended == [(0, res)] and res.status == "finished" and res.step == 30
    assert res.summary["best"] == {"test/loss": 0.2, "test/acc": 0.7}
    assert res.summary["final"] == {"test/loss": 0.3, "test/acc": 0.5, "toy/w": 3.0}
    assert res.plateau_step == 17.5 and res.summary["integrator_steps"] == 42 and res.summary["steps_done"] == 30
    # a trained run: the same rule over its evaluations
    tr = Tracker(cfg, RunLogger())
    for step, vals in enumerate([{"test/loss": 0.5, "test/acc": 0.1}, {"test/loss": float("nan"), "test/acc": 0.7},
                                 {"test/loss": 0.2, "test/acc": float("nan")}]):
        tr.record(step, vals)
    assert tr.summary(2)["best"] == {"test/loss": 0.2, "test/acc": 0.7}
