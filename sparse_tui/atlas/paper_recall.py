"""Atlas entries: the associative-recall half of arXiv 2505.17863 (§3, App. C; Figs. 4, 5, 16, 17).

Issue 22 rebuilds these (CPU presets, records). Threshold (App. D.1): 5% test accuracy. Fig. 16 (App. C.2) is the
training-data counterpart of Fig. 5: its entries name Fig. 5's presets, so ``reproduce fig16`` reuses Fig. 5's runs
and reads their ``train/loss``.
"""

from __future__ import annotations

from sparse_tui.atlas import ENTRIES_PKG as E
from sparse_tui.atlas import Entry, Threshold

PAPER = "arXiv 2505.17863"
ACC = Threshold("test/acc", "above", 0.05)  # App. D.1, associative recall
R_FIG5 = "Fig. 5 — in-context and cross-sample repetition on recall (`paper_fig5_B_cpu`, `paper_fig5_p_cpu`)"
FIG5 = ("GPU presets not run. CPU: 2 attention-only layers, 1 head, d_model 32, lr 3e-3, PyTorch's default init, "
        "N_tokens 128 x N_pairs 6 (the paper: Table 1's model at 256 x 32); test set B = 1, p = 0. ")
R_FIG16 = "Fig. 16 — repetition on the training data (`paper_fig5_B_cpu`, `paper_fig5_p_cpu`)"
# Fig. 16's emergence on the training data: the first logged train/loss <= this (ours: the paper shows the curves
# without a threshold). Below ln(N_pairs) = 1.79 at N_pairs 6, the loss of copying a uniformly chosen value of the
# context, so crossing it needs the query's own value, not just "some value of the context".
FIG16_TRAIN_LOSS = 1.0
FIG16 = (f"Emergence on the training data (with repetition, fresh batches): the first train/loss <= "
         f"{FIG16_TRAIN_LOSS:g} (ours; the paper shows curves only); speed-up = the seed's B = 1, p = 0 run's "
         "step over this run's. ")

ENTRIES = [
    Entry("fig4_left", "Fig. 4 left/middle", PAPER, "§3.2, App. C.1", "recall emerges later with more pairs",
          "curves", {"cpu": "paper_fig4_left_cpu", "gpu": "paper_fig4_recall"}, threshold=ACC,
          notes="GPU preset (Table 1 model, N_tokens 256, N_pairs {8, 16, 32}) not run. CPU: 2 attention-only layers, "
                "1 head, d_model 32, lr 3e-3, PyTorch's default init, N_tokens 256 x N_pairs {4, 6, 8, 12} (ours). "
                "Recall proper: the first 60% test accuracy (ours).",
          record="Fig. 4 left/middle on CPU — learning curves as N_pairs grows (`paper_fig4_left_cpu`)",
          measured="2026-11-26, CPU: plateau (5%) 424 / 750 / 1349 / 3283 at N_pairs 4 / 6 / 8 / 12, "
                   "later in every seed, ∝ N_pairs^1.87 (Fig. 4 right: 2.25); rise to 60% sharper",
          claim=E + "fig4_left:CLAIM",
          verdict="reproduced", cpu_minutes=12.4),
    Entry("fig4_right", "Fig. 4 right", PAPER, "§3.2, App. D.2", "emergence time vs N_tokens and N_pairs: a power law",
          "law", {"cpu": "paper_fig4_recall_cpu", "gpu": "paper_fig4_recall_small"}, fit_vars=("n_tokens", "n_pairs"),
          # N_pairs held to ±0.3 (the record says why: the local exponent still rises with N_pairs, 1.41 -> 2.19 over
          # 4-12, the paper's grid reaches 32, and §3.2 ties the exponent to the number of attention layers)
          law="fig4", threshold=ACC, targets={"n_pairs": 0.3},
          notes="GPU grid not run. CPU preset: 2 attention-only layers, 1 head, d_model 32, lr 3e-3, PyTorch's "
                "default init, N_pairs {3, 4, 6} (not the paper's model; docs/REPRODUCTION.md).",
          record="Fig. 4 right on CPU — N_tokens × N_pairs (`paper_fig4_recall_cpu`)",
          measured="2026-11-26, CPU: N_tokens +0.95, N_pairs +1.29 (paper +0.79, +2.25); torch init, 5% threshold",
          verdict="in kind", cpu_minutes=1.6),
    Entry("fig5_left", "Fig. 5 left", PAPER, "§3.2", "in-context repetition B speeds up recall, then overfits",
          "curves", {"cpu": "paper_fig5_B_cpu", "gpu": "paper_fig5_B"}, threshold=ACC,
          notes=FIG5 + "B {1, 2, 4, 6} at N_pairs 6 (CPU), {1, 2, 4, 8} at 32 (GPU): ours, the paper lists none. "
                "In-context repetition: one query slot plus each other slot w.p. (B-1)/(N_pairs-1) (App. C.1: B/N "
                "per slot).",
          record=R_FIG5, measured="2026-11-26, CPU: B = 2 reaches 5% 1.8-2.1x, 60% 1.3-1.5x sooner; B = 4, 6 "
                                  "overfit (final test acc 0.52-0.84 below B = 1)",
          claim=E + "fig5:LEFT",
          verdict="in kind", cpu_minutes=1.5),
    Entry("fig5_right", "Fig. 5 right", PAPER, "§3.2", "cross-sample repetition p speeds up recall, then overfits",
          "curves", {"cpu": "paper_fig5_p_cpu", "gpu": "paper_fig5_p"}, threshold=ACC,
          notes=FIG5 + "p {0, 0.25, 0.5, 0.9} (CPU), {0, 0.25, 0.5, 0.75} (GPU): ours, the paper lists none.",
          record=R_FIG5, measured="2026-11-27, CPU: p = 0.25 reaches 30% 1.18-1.28x and 60% 1.05-1.18x sooner "
                                  "(4/4 runs, N_tokens 128 and 256; paper 2x: not reproduced), p = 0.1 no effect; "
                                  "p = 0.9 overfits (final test acc 0.39-0.49 below p = 0)",
          claim=E + "fig5:RIGHT",
          verdict="not reproduced", cpu_minutes=2.7),
    Entry("fig16_left", "Fig. 16 left", PAPER, "App. C.2", "on the training data in-context repetition B only speeds "
          "recall up (Fig. 5 left's runs)", "curves", {"cpu": "paper_fig5_B_cpu", "gpu": "paper_fig5_B"},
          notes=FIG16 + FIG5 + "B {1, 2, 4, 6} (CPU), {1, 2, 4, 8} (GPU).", record=R_FIG16,
          measured="2026-11-26, CPU: train loss <= 1 sooner in every run: 2.0-2.2x (B = 2), 7.7x (B = 4), "
                   "15.4-15.5x (B = 6)",
          claim=E + "fig16:LEFT",
          verdict="reproduced", cpu_minutes=1.5),
    Entry("fig16_right", "Fig. 16 right", PAPER, "App. C.2", "on the training data cross-sample repetition p only "
          "speeds recall up (Fig. 5 right's runs)", "curves", {"cpu": "paper_fig5_p_cpu", "gpu": "paper_fig5_p"},
          notes=FIG16 + FIG5 + "p {0, 0.25, 0.5, 0.9} (CPU), {0, 0.25, 0.5, 0.75} (GPU).", record=R_FIG16,
          measured="2026-11-27, CPU: train loss <= 1 sooner in every run: 1.06-1.08x (p = 0.25), 1.2-1.3x "
                   "(p = 0.5), 3.2-4.0x (p = 0.9)",
          claim=E + "fig16:RIGHT",
          verdict="reproduced", cpu_minutes=2.7),
    Entry("fig17", "Fig. 17", PAPER, "App. C.2", "recall emerges with the copy and selection attention",
          "curves", {"cpu": "paper_fig17_cpu", "gpu": "paper_fig17"}, threshold=ACC,
          notes="GPU preset not run. CPU preset: 2 attention-only layers, 1 head, d_model 32, lr 3e-3, PyTorch's "
                "default init, N_tokens 128 x N_pairs 6 (the paper: Table 1's 4-layer model at 256 x 32).",
          record="Fig. 17 — copy and selection attention during emergence (`paper_fig17_cpu`)",
          measured="2026-11-26, CPU: copy (L1) 0.21 -> 0.57 -> 0.75, selection (L2) 0.08 -> 0.57 -> 0.80 (step 0 -> "
                   "60% accuracy -> end)",
          claim=E + "fig17:CLAIM",
          verdict="reproduced", cpu_minutes=0.6),
]
