"""sparse-tui: a terminal experiment console for studying the emergence of sparse attention.

Science: Zucchet et al. 2025, "The emergence of sparse attention: impact of data distribution and benefits of
repetition" (shared/reference/002_cc8574166552f4e6.txt), and Ziming Liu's blog reproductions.

The package's face for your own training code (docs/LOGGING.md): ``run = sparse_tui.init(...)``, ``run.log({...},
step=...)``, ``run.finish()`` (``sparse_tui.track``). Importing ``sparse_tui`` imports nothing else; ``init`` loads
the logging API when it is called.
"""

from sparse_tui.base.version import __version__

__all__ = ["__version__", "init"]


def init(*args, **kwargs):
    """Start a run of your own training code in the run store: ``sparse_tui.track.init`` (its arguments)."""
    from sparse_tui.track import init as start

    return start(*args, **kwargs)
