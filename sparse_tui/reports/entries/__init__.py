"""One module per figure of the atlas (``sparse_tui.atlas``): its report, its figure and the claim its verdict checks
(docs/ARCHITECTURE.md, "A new figure"). An entry of a generic kind (a fitted law, learning curves) takes its kind's
report and figure from ``reports.library`` and needs a module here only for its claim."""
