"""The package's version, the one place it is written (``sparse-tui --version`` prints it; pyproject.toml reads it;
each run records it). Here, in the base layer, so that every layer can name it: the package's ``__init__`` is its
public face and sits above them all (tests/test_import_graph.py)."""

__version__ = "0.1.0"
