"""Atlas entries: Ziming Liu's blog reproductions (2026) and the two ideas they propose.

* Blog 3, "Sparse attention 3 – inefficiency of extracting similar content": one attention layer between an
  embedding and an unembedding (no MLP, no positions) asked for the context token numerically closest to the last
  one; perplexity against V, C and n_embd; the embedding geometry; the proposal of Euclidean attention.
* Blog 6, "Sparse attention 6 – In-context associative recall": a 2-layer attention-only Transformer on associative
  recall; the Goldilocks range of N, N = 80 made to work by data × lr, the suggested phase diagram, the learning-rate
  warm-up hypothesis.

The blogs state no plateau threshold: each preset names its own (``[plateau]``), so no entry carries one. Every
preset here is CPU-sized (the blogs' models are small); none has a GPU preset yet.
"""

from __future__ import annotations

from sparse_tui.atlas import ENTRIES_PKG as E
from sparse_tui.atlas import Entry

BLOG3 = "Sparse attention 3 – inefficiency of extracting similar content (Ziming Liu, 2026)"
BLOG6 = "Sparse attention 6 – In-context associative recall (Ziming Liu, 2026)"
NEAREST = ("Our choices (the blog is silent): no skip connection (the blog's 'only' embedding, attention, "
           "unembedding), Adam lr 1e-2, batch 128, online data, distinct context tokens, ties to the lower number.")
RECALL = ("Our choices (the blog is silent): batch 128, PyTorch's default init, values drawn uniformly, learned "
          "positions 0.1 N(0, 1), no biases, one head (docs/REPRODUCTION.md: the three choices that decide it).")
# Headings of the records in docs/REPRODUCTION.md
R_B3CN = "Blog 3: perplexity against C and n_embd (`blog3_C`, `blog3_nembd`)"

ENTRIES = [
    Entry("blog3_V", "Blog 3, perplexity vs V", BLOG3, "Failure even for context length = 3",
          "perplexity converges near V/2 at n_embd = 2, C = 3, for V in {8, 16, 32, 64}", "curves",
          {"cpu": "blog3_nearest"}, notes=NEAREST + " 16000 steps.",
          record="Blog 3: nearest token (`presets/blog3_nearest.toml`)",
          measured="2026-11-26, CPU: converged at 0.63 / 0.73-0.79 / 0.74 / 0.71 × V/2 for V = 8 / 16 / 32 / 64",
          claim=E + "nearest:V",
          verdict="reproduced", cpu_minutes=5.0),
    Entry("blog3_C", "Blog 3, perplexity vs C", BLOG3, "Dependence on vocab size V",
          "perplexity against the context length C beside the blog's guess-a-context-token (C-2)/(C-1)·V", "curves",
          {"cpu": "blog3_C"}, notes=NEAREST + " V = 32, n_embd 2, 8000 steps.", record=R_B3CN,
          measured="2026-11-26, CPU, 3 seeds: not reproduced: ours falls with C (10.0-11.7 at C = 3, 5.6-7.0 at "
                   "C = 16) where the formula rises (16 to 29.9)",
          claim=E + "nearest:C",
          verdict="not reproduced", cpu_minutes=4.0),
    Entry("blog3_nembd", "Blog 3, best perplexity vs n_embd", BLOG3, "Dependence on embedding dimension",
          "the best perplexity falls with n_embd, faster than V/n_embd", "curves",
          {"cpu": "blog3_nembd"}, notes=NEAREST + " V = 32, C = 3, 8000 steps.", record=R_B3CN,
          measured="2026-11-26, CPU, 3 seeds: reproduced up to n_embd 8 (slope −1.16 from 1 to 8); at 16 the "
                   "perplexity is at its floor (1.24)",
          claim=E + "nearest:NEMBD",
          verdict="reproduced", cpu_minutes=4.0),
    Entry("blog3_geometry", "Blog 3, embedding geometry", BLOG3, "Failure even for context length = 3; "
          "Dependence on embedding dimension", "learned embeddings (first two principal components): numerically "
          "close tokens sit close", "curves", {"cpu": "blog3_geometry"},
          notes=NEAREST + " V = 32, C = 3, n_embd {2, 4, 8, 16}, 8000 steps; the final embedding (stored when a "
          "run ends), PCA above n_embd 2.", record="Blog 3: embedding geometry (`presets/blog3_geometry.toml`)",
          measured="2026-11-26, CPU: order of the embedding (Spearman rho of embedding vs value distance) 0.24 / "
                   "0.42 / 0.50 / 0.80 at n_embd 2 / 4 / 8 / 16",
          claim=E + "blog3_geometry:CLAIM",
          verdict="reproduced", cpu_minutes=4.9),
    Entry("euclidean", "Blog 3, proposal: Euclidean attention", BLOG3, "Questions / Ideas",
          "a distance score −‖q − k‖² in place of q·k: 'a 1D embedding would already be sufficient'", "curves",
          {"cpu": "blog3_euclidean"}, notes=NEAREST + " Softmax of −‖q − k‖²/√d (an exponential kernel; the blog "
          "mentions inverse-distance weights); learned embedding from a random start.",
          record="Blog 3's proposal: Euclidean attention (`model.attention = \"euclidean\"`), first measurement",
          measured="2026-11-26/27, CPU, 3 seeds: n_embd 1 stays above V/2 with either score (1.09-1.30 × V/2); "
                   "n_embd 2 within the seeds' spread; without the readout's self key n_embd 1 reaches 0.72-0.84 × "
                   "V/2, either score",
          claim=E + "nearest:EUCLIDEAN",
          verdict="not reproduced", cpu_minutes=49.0),
    Entry("euclidean_ordered", "Blog 3, proposal: Euclidean attention, 1-D", BLOG3, "Questions / Ideas",
          "distance vs dot attention on the blog's fixed ordered 1-D embedding (token v at v), with and without the "
          "current token among the readout's keys", "curves",
          {"cpu": "blog3_euclidean_ordered"},
          notes=NEAREST + " Frozen ordered embedding (model.embedding = 'ordered'), n_embd 1, V = 32, 8000 steps; "
          "the readout with and without its own token among the keys (model.readout_self_key).",
          record="Blog 3's proposal: Euclidean attention on the ordered 1-D embedding (`blog3_euclidean_ordered`)",
          measured="2026-11-27, CPU, 3 seeds: depends on the self key: with it euclidean acc 0.11-0.13 (dot "
                   "0.07-0.08); without it attention to the nearest token 0.99+, perplexity 0.23-0.25 x V/2, acc "
                   "0.57-0.65 (0.71-0.76 at 32000 steps; dot 0.05-0.28)",
          claim=E + "nearest:EUCLIDEAN",
          verdict="reproduced", cpu_minutes=6.2),
    Entry("blog6_nembd", "Blog 6, Goldilocks N", BLOG6, "Dependence on embedding dimension",
          "recall emerges fast only for a middle range of the embedding dimension N", "curves",
          {"cpu": "blog_nembd"}, notes=RECALL + " Plateau: test accuracy ≥ 0.5.",
          record="Blog 6: the n_embd sweep (`presets/blog_nembd.toml`)",
          measured="2026-11-26, CPU, 3 seeds: N = 24-48 reach 0.5 at steps 900-1500; N = 8, 16 never; N = 60, 80 "
                   "spike and collapse",
          claim=E + "blog6:NEMBD",
          verdict="reproduced", cpu_minutes=9.2),
    Entry("blog6_n80", "Blog 6, N = 80: data × lr", BLOG6, "How to make large embedding dimensions work",
          "N = 80 learns with more data and a smaller lr (training set {1e4, 1e5} × lr {1e-2, 1e-3})", "curves",
          {"cpu": "blog_n80"}, notes=RECALL + " Plateau: test accuracy ≥ 0.5.",
          record="Blog 6: N = 80 (`presets/blog_n80.toml`)",
          measured="2026-11-26, CPU: only 10^5 × 1e-3 learns (acc 0.5 at step 1400, final 1.000)",
          claim=E + "blog6:N80",
          verdict="reproduced", cpu_minutes=24.9),
    Entry("blog6_phase", "Blog 6, phase diagram", BLOG6, "How to make large embedding dimensions work",
          "the suggested phase diagram: N × lr (or N × data size), where recall emerges", "curves",
          {"cpu": "blog6_phase"}, notes=RECALL + " N {16, 40, 80} (ours) × lr {1e-3, 1e-2} (the blog's), one "
          "seed, 2000 steps. Plateau: test accuracy ≥ 0.5.",
          record="Blog 6: phase diagram N × lr (`presets/blog6_phase.toml`)",
          measured="2026-11-26, CPU, seed 0: recall emerges only at N = 40, lr 1e-2 (step 900, final 0.81); N = 80 "
                   "at 1e-2 peaks at 0.21 and diverges; nothing emerges at 1e-3 in 2000 steps",
          claim=E + "blog6_phase:CLAIM",
          verdict="no claim", cpu_minutes=18.0),  # the blog suggests the plane, claims nothing (issue 42)
    Entry("warmup", "Blog 6, hypothesis: lr warm-up", BLOG6, "Comment: Link to learning rate warmup",
          "a small early learning rate keeps large N stable while the induction head forms", "curves",
          {"cpu": "blog6_warmup"}, notes=RECALL + " Linear warm-up from 0 over 500 of 2000 steps.",
          record="Blog 6's hypothesis: learning-rate warm-up for large N, first measurement",
          measured="2026-11-26, CPU, 3 seeds: no run at N = 60 or 80 ends learned, with or without warm-up; a "
                   "1000-step warm-up makes N = 60 reach 0.5 in 3 of 3 seeds, all collapse after",
          claim=E + "blog6:WARMUP",
          verdict="not reproduced", cpu_minutes=26.0),
]
