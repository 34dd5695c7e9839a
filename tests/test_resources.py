"""One memory model (issue 23): ``resources.step_bytes`` is what the scheduler packs into a stack and what the
preflight's estimate is built on, and ``resources.MEMORY_FRACTION`` is the one share of a device's memory either
plans to use (0.7, the value the scheduler's stacks were measured with)."""

from __future__ import annotations

import pytest
import torch

from sparse_tui.models import build_model
from sparse_tui.presets import resources
from sparse_tui.presets.schema import RunConfig
from sparse_tui.tasks import make_task
from sparse_tui.training import scheduler

CONFIGS = {
    "recall transformer": {"task": {"kind": "recall", "n_tokens": 32, "n_pairs": 8},
                           "model": {"kind": "transformer", "n_layers": 2, "d_model": 32, "mlp": True}},
    "nearest transformer": {"task": {"kind": "nearest", "vocab": 16, "context": 12},
                            "model": {"kind": "transformer", "d_model": 8}},
    "linreg transformer": {"task": {"kind": "linreg", "d": 8, "T": 16}, "model": {"kind": "transformer"}},
    "linreg toy": {"task": {"kind": "linreg", "d": 8, "T": 16}, "model": {"kind": "toy"}},
    "linreg ode": {"task": {"kind": "linreg", "d": 8, "T": 16}, "model": {"kind": "ode"}},
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_preflight_and_the_scheduler_count_the_same_bytes(name):
    cfg = RunConfig.model_validate(CONFIGS[name])
    est = resources.estimate(cfg)
    assert est.state_bytes + est.batch_bytes == resources.step_bytes(cfg) == scheduler.stack_member_bytes([cfg])
    assert est.params == resources.n_params(cfg)
    assert est.total_bytes == resources.step_bytes(cfg) + est.eval_bytes + est.schedule_bytes
    if cfg.model.kind == "ode":  # integrated on the host: nothing on the device
        assert resources.step_bytes(cfg) == 0 and est.params == 0
    else:
        assert est.params == sum(p.numel() for p in build_model(cfg, make_task(cfg, "cpu")).parameters())
        assert est.state_bytes == 16 * est.params  # float32 parameters, gradients, two optimiser states


def test_a_vector_input_is_counted_as_float32_vectors_and_token_ids_as_int64():
    """The scheduler counted every input as int64 ids (8 bytes a position); a linreg batch is float32 vectors."""
    lin = RunConfig.model_validate(CONFIGS["linreg transformer"])
    ids = RunConfig.model_validate(CONFIGS["recall transformer"])
    assert resources._input(ids) == (2 * 8 + 1, 8)
    assert resources._input(lin) == (16 * resources.dims(lin)["in_dim"], 4)


def _fake_cuda(monkeypatch, free: int, total: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, total))


def test_one_memory_fraction_for_the_preflight_and_the_stacks(monkeypatch):
    _fake_cuda(monkeypatch, free=60 * 2**30, total=80 * 2**30)
    assert resources.MEMORY_FRACTION == 0.7
    assert scheduler.device_budget(torch.device("cuda", 0)) == int(60 * 2**30 * 0.7)
    assert resources.available_bytes("cuda:0")[0] == int(80 * 2**30 * 0.7)


def test_the_preflight_refuses_a_run_over_the_fraction(monkeypatch):
    """A run that needs 75% of the card is refused (the preflight's old 0.8 let it through, and the scheduler
    would have planned for 0.7); one that needs 65% is accepted."""
    cfg = RunConfig.model_validate(CONFIGS["recall transformer"])
    need = resources.estimate(cfg).total_bytes
    _fake_cuda(monkeypatch, free=int(need / 0.75), total=int(need / 0.75))
    with pytest.raises(resources.ResourceError, match="x.toml: a run needs about .* more than cuda:0 can hold"):
        resources.check([cfg], "cuda:0", "x.toml")
    _fake_cuda(monkeypatch, free=int(need / 0.65), total=int(need / 0.65))
    resources.check([cfg], "cuda:0", "x.toml")
