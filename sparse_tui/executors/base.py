"""What the executors share: their one-line error and their constants. What an executor is (``runner.Executor``)
and the value that names it (``runner.ExecutorOptions``) are the runner's, which asks them of it (docs/ARCHITECTURE.md,
"A new executor"). Nothing here imports anything of sparse_tui, Ray, torch or Textual."""

from __future__ import annotations

INSTALL_HINT = 'pip install "sparse-tui[ray]"'
BEAT_SECONDS = 5.0  # how often a coordinator beats its heartbeat (what other hosts judge it by)


class ExecutorError(Exception):
    """An executor that cannot take a batch (Ray missing, an unreachable address, a device that is not there, a run
    too large for it): one line, naming the flag or the preset key; raised before anything is written."""
