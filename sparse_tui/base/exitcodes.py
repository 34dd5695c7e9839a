"""Exit codes of every sparse-tui command (documented in the README)."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # everything ran; diverged runs are results, not errors
    RUN_FAILED = 1  # at least one run crashed (status failed)
    USAGE = 2  # bad flag, bad preset, unknown run id, bad fit variables
    INTERRUPTED = 130  # Ctrl-C / SIGTERM: running runs recorded as interrupted
