"""Ctrl-C, SIGTERM and SIGHUP in a process that trains (lifecycle/runner.py): the signal sets a ``StopFlag`` the
training loop polls between steps; a step or an evaluation that has not reached a stop check ``STOP_GRACE``
seconds later is cut short by an alarm (``StopNow``), so the process always ends within about 2 s."""

from __future__ import annotations

import signal
from dataclasses import dataclass

# Seconds the training loop has, after Ctrl-C / SIGTERM, to stop at a step boundary before an alarm cuts the step
# or evaluation short (docs: SIGTERM and Ctrl-C are honoured within 2 s).
STOP_GRACE = 1.0
_training = False  # True while this process is inside a run's training loop (the alarm may interrupt it)


class StopNow(KeyboardInterrupt):
    """Raised by the alarm when a step or evaluation did not reach a stop check within ``STOP_GRACE``."""


@dataclass
class StopFlag:
    """Set by signal handlers; polled by the training loop between steps."""

    status: str | None = None

    def __call__(self) -> str | None:
        return self.status


def install_signal_handlers(flag: StopFlag) -> None:
    """Ctrl-C, SIGTERM and SIGHUP set ``flag``; if training has not stopped ``STOP_GRACE`` s later, ``StopNow`` is
    raised in it. A second signal stops waiting at once."""

    def handler(signum, frame):  # noqa: ARG001
        if flag.status is None:
            flag.status = "interrupted"
            if _training and hasattr(signal, "setitimer"):
                signal.setitimer(signal.ITIMER_REAL, STOP_GRACE)
        else:  # a second Ctrl-C: stop waiting
            raise KeyboardInterrupt

    def alarm(signum, frame):  # noqa: ARG001
        if _training and flag.status:
            raise StopNow()

    for name, fn in (("SIGINT", handler), ("SIGTERM", handler), ("SIGHUP", handler), ("SIGALRM", alarm)):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), fn)


def _training_section(on: bool) -> None:
    global _training
    _training = on
    if not on and hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, 0)
