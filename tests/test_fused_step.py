"""``optim.FusedStep`` is ``torch.optim``'s ``fused=True`` Adam / AdamW / SGD, bit for bit (the same aten kernels,
called as torch.optim calls them), without importing ``torch._dynamo`` (seconds of start-up no run needs)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from sparse_tui.training.optim import FusedStep


@pytest.mark.parametrize("kind,momentum,wd", [("adam", 0.0, 0.0), ("adam", 0.0, 0.01), ("adamw", 0.0, 0.1),
                                              ("sgd", 0.9, 0.0), ("sgd", 0.0, 0.01), ("sgd", 0.5, 0.01)])
def test_same_update_as_torch_optim(kind, momentum, wd):
    g = torch.Generator().manual_seed(0)
    mine = [torch.randn(3, 5, generator=g), torch.randn(7, generator=g)]
    ref = [p.clone() for p in mine]
    fused = FusedStep(kind, mine, 0.05, (0.9, 0.98), wd, momentum)
    if kind == "sgd":
        torch_opt = torch.optim.SGD(ref, lr=0.05, momentum=momentum, weight_decay=wd, fused=True)
    else:
        cls = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
        torch_opt = cls(ref, lr=0.05, betas=(0.9, 0.98), weight_decay=wd, fused=True)
    for step in range(4):
        grads = [torch.randn(p.shape, generator=g) for p in mine]
        for a, b, gr in zip(mine, ref, grads):
            a.grad, b.grad = gr.clone(), gr.clone()
        fused.param_groups[0]["lr"] = torch_opt.param_groups[0]["lr"] = 0.05 / (step + 1)
        fused.step()
        torch_opt.step()
        for a, b in zip(mine, ref):
            assert torch.equal(a, b)
            for k, v in torch_opt.state[b].items():
                assert torch.equal(fused.state[a][k], v) and fused.state[a][k].dtype == v.dtype, k


def test_a_run_does_not_import_dynamo(tiny_preset):
    code = ("import sys; from sparse_tui.presets.loading import expand, load_preset; "
            "from sparse_tui.training.trainer import "
            f"train_run; train_run(expand(load_preset({str(tiny_preset)!r}, ['train.steps=5']))[0].config); "
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"
