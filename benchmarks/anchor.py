"""An independent plain-PyTorch anchor for the benchmarks: the blog's associative-recall model written the most
ordinary way (nn.Module, nn.Linear, torch.optim.Adam, F.scaled_dot_product_attention), sharing no code with
sparse_tui, trained on random recall sequences made on the device. What one such model costs per step on this
machine, eagerly and with its whole step captured as a CUDA graph: the yardstick the project's own loop is compared
with (benchmarks/sweep_bench.py prints it beside the plain loop and the scheduler).

    python benchmarks/anchor.py --device cuda [--d-model 48] [--steps 300]

Model (blog "Sparse attention 6 - In-context associative recall", presets/blog_nembd.toml): vocabulary 64, 32
pairs (65 positions), 2 attention-only layers, one head, learned positions, no biases, batch 128, Adam lr 1e-2.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F
from torch import nn

V, P, B = 64, 32, 128
L = 2 * P + 1


class Block(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        a = F.scaled_dot_product_attention(self.q(h), self.k(h), self.v(h), is_causal=True)
        return h + self.o(a)


class Model(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.embed = nn.Embedding(V, d)
        self.pos = nn.Parameter(0.1 * torch.randn(L, d))
        self.blocks = nn.ModuleList([Block(d), Block(d)])
        self.out = nn.Linear(d, V, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) + self.pos
        for b in self.blocks:
            h = b(h)
        return self.out(h[:, -1])


def batch(device, gen):
    keys = torch.rand(B, V, device=device, generator=gen).argsort(1)[:, :P]
    values = torch.randint(0, V, (B, P), device=device, generator=gen)
    x = torch.empty(B, L, dtype=torch.long, device=device)
    x[:, 0:2 * P:2], x[:, 1:2 * P:2] = keys, values
    pick = torch.randint(0, P, (B, 1), device=device, generator=gen)
    x[:, -1] = keys.gather(1, pick).squeeze(1)
    return x, values.gather(1, pick).squeeze(1)


def measure(device: str = "cuda", d_model: int = 48, steps: int = 300) -> dict:
    dev = torch.device(device)
    torch.manual_seed(0)
    model = Model(d_model).to(dev)
    cuda = dev.type == "cuda"
    opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(1e-2, device=dev) if cuda else 1e-2,
                           capturable=cuda)
    gen = torch.Generator(device=dev).manual_seed(0)

    def step():
        x, y = batch(dev, gen)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def timed(fn, n):
        for _ in range(5):
            fn()
        if cuda:
            torch.cuda.synchronize(dev)
        t = time.perf_counter()
        for _ in range(n):
            fn()
        if cuda:
            torch.cuda.synchronize(dev)
        return (time.perf_counter() - t) / n

    out = {"d_model": d_model, "eager_ms": 1e3 * timed(step, steps)}
    if cuda:
        s = torch.cuda.Stream(dev)
        s.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream(dev).wait_stream(s)
        g = torch.cuda.CUDAGraph()
        g.register_generator_state(gen)
        with torch.cuda.graph(g):
            step()
        out["graph_ms"] = 1e3 * timed(g.replay, steps)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--d-model", type=int, default=48)
    ap.add_argument("--steps", type=int, default=300)
    a = ap.parse_args()
    print(json.dumps(measure(a.device, a.d_model, a.steps)))
