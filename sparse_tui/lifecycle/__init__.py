"""A run's life outside the training loop: the runner (preflight, claims, headless and detached batches), progress,
time estimates, annotations (notes, tags, archive, delete) and ``doctor``."""
