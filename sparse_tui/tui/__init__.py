"""The Textual console (``sparse-tui`` with no command). The only package of sparse-tui that imports Textual."""
