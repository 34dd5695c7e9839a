"""The executor names and the one error an executor raises before a batch starts (executors/__init__.py)."""

from __future__ import annotations

EXECUTORS = ("local", "ray")
INSTALL_HINT = 'pip install "sparse-tui[ray]"'


class ExecutorError(Exception):
    """An executor that cannot be used (Ray missing, an unreachable address): one line, naming the flag."""
