"""Blog 3's proposal on the ordered 1-D line without the readout's self key: which tokens the wrong predictions are
(docs/REPRODUCTION.md, "Blog 3's proposal: Euclidean attention on the ordered 1-D embedding", the one-off check).

Trains one seed of ``presets/blog3_euclidean_ordered.toml`` (euclidean attention, ``model.readout_self_key =
false``) with sparse-tui's own task and model (``tasks.make_task``, ``models.build_model``) in a plain Adam loop
(the tool's training loop also logs and evaluates; the numbers differ from a stored run's by the test sample), then
evaluates a fresh test sample and splits the errors: the target ± 1, ± 2, the other earlier token.

    python benchmarks/euclidean_errors.py                       # seed 0, 8000 steps, 4096 test sequences (~15-60 s)
    python benchmarks/euclidean_errors.py --steps 32000 --seed 1

Prints one summary line; nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    import torch
    import torch.nn.functional as F

    from sparse_tui.models import build_model
    from sparse_tui.presets.loading import expand, load_preset
    from sparse_tui.tasks import make_task

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=8000)
    ap.add_argument("--test", type=int, default=4096)
    a = ap.parse_args()
    loaded = load_preset(ROOT / "presets" / "blog3_euclidean_ordered.toml",
                         ['model.attention="euclidean"', "model.readout_self_key=false", "sweep={}",
                          f"seeds=[{a.seed}]", f"train.steps={a.steps}"])
    cfg = expand(loaded)[0].config
    torch.manual_seed(a.seed)
    task = make_task(cfg)
    model = build_model(cfg, task)
    if getattr(model, "frozen_embedding", False):
        model.embed.weight.requires_grad_(False)  # the ordered line never moves (models/stack.py masks its gradient)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=cfg.train.lr,
                           betas=(cfg.train.beta1, cfg.train.beta2))
    for _ in range(a.steps):
        b = task.train_batch(cfg.train.batch_size)
        logits, _ = model(b.x)
        loss = F.cross_entropy(logits, b.y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        b = task.test_sample(a.test, torch.Generator().manual_seed(10_000 + a.seed))
        logits, attns = model(b.x)
        pred = logits.argmax(-1)
        ok = pred == b.y
        wrong = ~ok
        off = (pred - b.y).abs()[wrong]
        x = b.x.long()
        other = torch.zeros_like(wrong)
        for j in range(x.shape[1] - 1):  # a wrong prediction that is another earlier token of the context
            other |= (pred == x[:, j]) & (x[:, j] != b.y)
        attn_last = attns[-1]
        target_attn = None
        if attn_last is not None:
            rel = b.relevant.float()  # [N, C]
            target_attn = float((attn_last[:, :, -1, :].mean(1) * rel).sum(-1).mean())
    n_wrong = int(wrong.sum())
    print(f"seed {a.seed}, {a.steps} steps, {a.test} test sequences: accuracy {float(ok.float().mean()):.3f}, "
          f"attention on the target {target_attn if target_attn is None else format(target_attn, '.3f')}; of the "
          f"{n_wrong} wrong predictions {float((off == 1).float().mean()):.0%} are the target ± 1, "
          f"{float((off <= 2).float().mean()):.0%} within ± 2, {float(other[wrong].float().mean()):.0%} the other "
          f"earlier token")


if __name__ == "__main__":
    main()
