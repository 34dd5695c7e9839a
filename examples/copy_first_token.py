"""A plain PyTorch training script, nanoGPT-style, logged into sparse-tui's run store through its logging API only.

Task: copy the first token. Each sequence is T random tokens over a vocabulary of V; the model reads it and must
output the first one at the last position. Nothing but attention carries position 0 to the end, and at
initialisation attention is spread evenly over the T positions, so the signal that teaches it to look at position 0
is about 1/T as strong: the loss sits on a plateau (log V, chance) whose length grows with T before the ability
emerges. This is the single-location mechanism of "The emergence of sparse attention" (arXiv 2505.17863, Sec. 3),
on a task and model written here. The sweep over T shows a plateau law: `sparse-tui fit --preset copy-first
--vars T` fits plateau ~ T^beta.

Run it (CPU, about a minute; each run stops once it has learned the task, --stop-acc):

    python examples/copy_first_token.py --runs-dir runs --lengths 16,32,64,128
    sparse-tui runs --runs-dir runs
    sparse-tui fit --runs-dir runs --preset copy-first --vars T
    sparse-tui --runs-dir runs          # the console: Runs, Curves, Attention, Fit

Only `sparse_tui.init`, `run.log`, `run.log_attention` and `run.finish` (through `with`) come from sparse-tui.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

import sparse_tui

# -- the model: a small GPT (nanoGPT's layout: token + position embeddings, pre-LayerNorm blocks of causal
#    self-attention and an MLP, a final LayerNorm and a linear head); it returns the attention maps too -------------


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int, block_size: int):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size)).bool())

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)  # [B, H, T, T]
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y), att


class Block(nn.Module):
    def __init__(self, d_model: int, n_head: int, block_size: int):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, block_size)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        a, att = self.attn(self.ln_1(x))
        x = x + a
        return x + self.mlp(self.ln_2(x)), att


class GPT(nn.Module):
    def __init__(self, vocab: int, block_size: int, d_model: int, n_layer: int, n_head: int):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d_model), nn.Embedding(block_size, d_model)
        self.h = nn.ModuleList(Block(d_model, n_head, block_size) for _ in range(n_layer))
        self.ln_f, self.lm_head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
        maps = []
        for block in self.h:
            x, att = block(x)
            maps.append(att)
        return self.lm_head(self.ln_f(x[:, -1])), maps  # the prediction at the last position


# -- the task ---------------------------------------------------------------------------------------------------


def batch(n: int, T: int, vocab: int, gen: torch.Generator):
    x = torch.randint(0, vocab, (n, T), generator=gen)
    return x, x[:, 0]


def train(T: int, *, width: int, vocab: int, steps: int, lr: float, batch_size: int, seed: int, eval_every: int,
          runs_dir: str | None, group: str, threshold: float, stop_acc: float) -> None:
    torch.manual_seed(seed)
    model = GPT(vocab, T, width, n_layer=1, n_head=1)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    test_x, test_y = batch(512, T, vocab, torch.Generator().manual_seed(10_000 + seed))
    config = {"task": {"name": "copy-first", "T": T, "vocab": vocab},
              "model": {"d_model": width, "n_layer": 1, "n_head": 1},
              "train": {"lr": lr, "batch_size": batch_size, "steps": steps, "optimizer": "adamw"},
              "seed": seed}
    plateau = {"metric": "test/acc", "mode": "above", "value": threshold}
    with sparse_tui.init(name=f"T={T} seed={seed}", group=group, config=config, runs_dir=runs_dir,
                         plateau=plateau, tags=["example"], total_steps=steps, device="cpu") as run:
        for step in range(steps + 1):
            if step % eval_every == 0 or step == steps:
                model.eval()
                with torch.no_grad():
                    logits, maps = model(test_x)
                    att = maps[0][:, 0, -1]  # [n, T]: where the last position looks
                    acc = (logits.argmax(-1) == test_y).float().mean().item()
                    run.log({"test/loss": F.cross_entropy(logits, test_y).item(), "test/acc": acc,
                             "attn/L1/relevant": att[:, 0].mean().item()}, step=step)  # a probe: mass on position 0
                    if step == 0 or acc >= stop_acc:
                        run.log_attention({"L1": maps[0][:4].transpose(0, 1)}, step=step, tokens=test_x[:4],
                                          relevant=F.one_hot(torch.zeros(4, dtype=torch.long), T))
                model.train()
            if step == steps or acc >= stop_acc or run.should_stop:  # learned (or cancelled from the console)
                break
            x, y = batch(batch_size, T, vocab, gen)
            logits, _ = model(x)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            run.log({"train/loss": loss.item()}, step=step + 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs-dir", default=None, help="the run store's folder (default $SPARSE_TUI_RUNS or ./runs)")
    ap.add_argument("--lengths", default="16,32,64,128", help="sequence lengths T to sweep")
    ap.add_argument("--seeds", default="0", help="seeds, e.g. 0,1,2")
    ap.add_argument("--width", type=int, default=32, help="d_model")
    ap.add_argument("--vocab", type=int, default=16)
    ap.add_argument("--steps", type=int, default=2000, help="at most this many steps per run")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--threshold", type=float, default=0.5, help="plateau: test/acc at or above this")
    ap.add_argument("--stop-acc", type=float, default=0.95, help="a run ends when its test/acc reaches this")
    ap.add_argument("--group", default="copy-first")
    a = ap.parse_args()
    torch.set_num_threads(1)
    for seed in (int(s) for s in a.seeds.split(",")):
        for T in (int(t) for t in a.lengths.split(",")):
            train(T, width=a.width, vocab=a.vocab, steps=a.steps, lr=a.lr, batch_size=a.batch_size, seed=seed,
                  eval_every=a.eval_every, runs_dir=a.runs_dir, group=a.group, threshold=a.threshold,
                  stop_acc=a.stop_acc)


if __name__ == "__main__":
    main()
