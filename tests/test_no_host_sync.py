"""No training step waits for the host (issue: a sync inside the step costs a full stream synchronisation per step
on CUDA, and is illegal inside a CUDA graph capture). Checked on CPU: one ``step_fn`` of every task kind runs under
a dispatch mode that fails on every operation that synchronises on CUDA:

* reading a value back: ``.item()`` / ``float()`` (``_local_scalar_dense``), ``.tolist()``, ``.cpu()``;
* data-dependent shapes: ``nonzero``, ``masked_select``, boolean-mask indexing and ``index_put_`` with a mask;
* a host value written into a device tensor: ``copy_`` / ``index_put_`` / ``index_fill_`` / ``index`` with a
  tensor made from Python values (``torch.tensor(...)`` or a Python scalar, ``lift_fresh``), which on CUDA is a
  copy from pageable host memory followed by a stream synchronisation (measured on an H100 with torch 2.11:
  ``relevant[rows, pos] = True`` made one sync per batch; ``scatter_(1, pos, True)`` none).

A new task or model that brings a sync back fails here."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from sparse_tui.presets.schema import RunConfig
from sparse_tui.training.loop import Prepared

aten = torch.ops.aten
_READBACK = {aten._local_scalar_dense.default, aten.nonzero.default, aten.masked_select.default}
_WRITES = {aten.copy_.default, aten.index_put_.default, aten.index_put.default, aten._index_put_impl_.default,
           aten.index_fill_.int_Tensor, aten.index_fill_.int_Scalar, aten.index.Tensor,
           aten.index_select.default, aten.gather.default, aten.scatter_.src}


class HostSyncs(TorchDispatchMode):
    """Records every operation of the step that would synchronise with the host on CUDA."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []
        self._host: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat = list(args) + list(kwargs.values())
        tensors = [t for a in flat for t in (a if isinstance(a, (list, tuple)) else [a]) if isinstance(t, torch.Tensor)]
        if func in _READBACK:
            self.found.append(str(func))
        elif func in _WRITES and any(id(t) in self._host for t in tensors[1:]):
            self.found.append(f"{func} from host values")
        elif func in (aten.index.Tensor, aten.index_put_.default, aten.index_put.default) and any(
                t.dtype == torch.bool for t in tensors[1:2] + [i for i in (args[1] if len(args) > 1 else [])
                                                               if isinstance(i, torch.Tensor)]):
            self.found.append(f"{func} with a boolean mask")
        out = func(*args, **kwargs)
        if func is aten.lift_fresh.default:  # a tensor made from Python values: on CUDA it lives on the host
            self._host.add(id(out))
        return out


def _tolist_guard(monkeypatch, mode: HostSyncs):
    for name in ("tolist", "item", "cpu", "__float__", "__bool__"):
        real = getattr(torch.Tensor, name)

        def wrapped(self, *a, _real=real, _name=name, **kw):
            mode.found.append(f"Tensor.{_name}")
            return _real(self, *a, **kw)

        monkeypatch.setattr(torch.Tensor, name, wrapped)


TASKS = {
    "recall": {"kind": "recall", "n_tokens": 8, "n_pairs": 3},
    "recall_trainset": {"kind": "recall", "n_tokens": 8, "n_pairs": 3, "train_size": 64, "B": 2.0, "p": 0.2},
    "linreg_random": {"kind": "linreg", "d": 4, "T": 8, "B": 2, "p": 0.3, "position": "random", "indicator": True},
    "linreg_fixed": {"kind": "linreg", "d": 4, "T": 8, "position": "fixed"},
    "linreg_last": {"kind": "linreg", "d": 4, "T": 8},
    "nearest": {"kind": "nearest", "vocab": 8, "context": 4},
}


def _configs(task: dict, model: dict, n: int = 2) -> list[RunConfig]:
    return [RunConfig.model_validate({"seed": s, "task": task, "model": model,
                                      "train": {"lr": 1e-3 * (s + 1), "batch_size": 8, "steps": 4, "device": "cpu",
                                                "grad_clip": 1.0},
                                      "eval": {"every": 2, "test_size": 16}}) for s in range(n)]


CASES = [(name, {"kind": "transformer", "n_layers": 2, "d_model": 8}) for name in TASKS] + [
    ("linreg_last", {"kind": "toy"}),
    ("recall", {"kind": "transformer", "n_layers": 2, "n_heads": 2, "d_model": 8, "mlp": True, "layernorm": True}),
]


@pytest.mark.parametrize("task,model", CASES, ids=[f"{t}-{m['kind']}-{i}" for i, (t, m) in enumerate(CASES)])
def test_the_training_step_never_waits_for_the_host(task, model, monkeypatch):
    prep = Prepared(_configs(TASKS[task], model), torch.device("cpu"))
    prep.opt.set_lr(1, prep.lr_dev)
    prep.step_fn()  # lazy state (optimiser moments) is made outside the checked step, as in the trial
    mode = HostSyncs()
    _tolist_guard(monkeypatch, mode)
    with mode:
        prep.opt.set_lr(2, prep.lr_dev)
        prep.step_fn()
    assert mode.found == []


def test_the_detector_sees_what_syncs(monkeypatch):
    """The check itself: each kind of sync it names is caught (and the fix for linreg's is not)."""
    rel = torch.zeros(4, 3, dtype=torch.bool)
    rows, pos = torch.arange(4)[:, None], torch.zeros(4, 1, dtype=torch.long)
    x = torch.zeros(4)
    cases = {
        "relevant[rows, pos] = True": (lambda: rel.__setitem__((rows, pos), True), True),
        "loss_sum[i] = 0.0": (lambda: x.__setitem__(1, 0.0), True),
        ".item()": (lambda: x.sum().item(), True),
        "tolist": (lambda: x.tolist(), True),
        "mask indexing": (lambda: x[x > 0], True),
        "scatter_(1, pos, True)": (lambda: rel.scatter_(1, pos, True), False),
        "mul_ by a device mask": (lambda: x.mul_(torch.ones(4)), False),
    }
    for name, (fn, syncs) in cases.items():
        mode = HostSyncs()
        with monkeypatch.context() as m:
            _tolist_guard(m, mode)
            with mode:
                fn()
        assert bool(mode.found) == syncs, (name, mode.found)
