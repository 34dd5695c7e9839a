"""Atlas entries: the associative-recall half of arXiv 2505.17863 (§3, App. C; Figs. 4, 5, 16, 17).

Issue 22 rebuilds these (CPU presets, records); until then they say what exists. Threshold (App. D.1): 5% test
accuracy.
"""

from __future__ import annotations

from sparse_tui.atlas import Entry, Threshold

PAPER = "arXiv 2505.17863"
ACC = Threshold("test/acc", "above", 0.05)  # App. D.1, associative recall
LATER = "not built yet (issue 22)"

ENTRIES = [
    Entry("fig4_left", "Fig. 4 left/middle", PAPER, "§3.2, App. C.1", "recall emerges later with more pairs",
          "curves", {"gpu": "paper_fig4_recall"}, threshold=ACC,
          notes="No CPU preset yet; the GPU preset was never run (no GPU).", measured=""),
    Entry("fig4_right", "Fig. 4 right", PAPER, "§3.2, App. D.2", "emergence time vs N_tokens and N_pairs: a power law",
          "law", {"gpu": "paper_fig4_recall_small"}, fit_vars=("n_tokens", "n_pairs"), law="fig4", threshold=ACC,
          notes="GPU grid not run. A CPU-sized variant (2 attention-only layers, d_model 32, 60% accuracy "
                "threshold: not the paper's setting) is in the preset's header.",
          record="Paper Fig. 3 and Fig. 4 right on small grids (`paper_fig3_linreg_small`, `paper_fig4_recall_small`)",
          measured="2026-11-26, CPU variant only: N_tokens −0.10, N_pairs +1.37 (paper +0.79, +2.25)"),
    Entry("fig5_left", "Fig. 5 left", PAPER, "§3.3", "in-context repetition B speeds up recall, then overfits",
          "curves", built=LATER),
    Entry("fig5_right", "Fig. 5 right", PAPER, "§3.3", "cross-sample repetition p speeds up recall, then overfits",
          "curves", built=LATER),
    Entry("fig16", "Fig. 16", PAPER, "App. C.2", "training-set counterpart of Fig. 5: repetition only speeds up",
          "curves", built=LATER),
    Entry("fig17", "Fig. 17", PAPER, "App. C.2", "recall emerges with the copy and selection attention",
          "curves", built=LATER),
]
