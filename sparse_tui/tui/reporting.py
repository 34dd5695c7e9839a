"""How the console shows a problem: a notification; an error also a red line at the top of the panel on screen, an
entry with its traceback in RUNS_DIR/logs/console.log, and a record of the ``sparse_tui.tui`` logger (where tests and
embedders can watch). Exceptions raised on the UI thread once the app runs (``_handle_exception``), problems the
workers post (``Problem``) and failed workers all come here; the console goes on."""

from __future__ import annotations

import logging
import time
import traceback

from rich.text import Text
from textual.command import CommandPalette
from textual.css.query import NoMatches
from textual.widgets import Static, TabbedContent
from textual.worker import Worker, WorkerFailed, WorkerState

from sparse_tui.tui.messages import Problem

# Every problem the console shows is logged here too (RUNS_DIR/logs/console.log is written separately, per store);
# a NullHandler keeps Python's last-resort handler from printing over the screen.
LOG = logging.getLogger("sparse_tui.tui")
LOG.addHandler(logging.NullHandler())


class Reporting:
    """Mix into the App (before the Textual class). Needs ``runs_dir``."""

    def report(self, error: BaseException | str, severity: str = "error", exc: BaseException | None = None) -> None:
        """Show a problem: a notification; an error also a red line in the panel on screen, an entry (with the
        traceback of ``error`` or ``exc``) in RUNS_DIR/logs/console.log, and a record of the ``sparse_tui.tui``
        logger."""
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        exc = exc if isinstance(error, str) else error
        LOG.log(logging.ERROR if severity == "error" else logging.WARNING, text, exc_info=exc)
        if severity == "error":
            detail = text if exc is None else "".join(traceback.format_exception(exc))
            self.log.error(detail)
            self._log_to_file(detail)
            self._panel_error(text)
        self.notify(text, severity=severity, timeout=8, markup=False)

    def _log_to_file(self, text: str) -> None:
        try:
            path = self.runs_dir / "logs" / "console.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text.rstrip()}\n")
        except OSError:
            pass  # a read-only runs dir: the notification and Textual's log still have it

    def _panel_error(self, text: str) -> None:
        """A red line at the top of the panel on screen (it stays until the panel is shown again)."""
        try:
            pid = self.query_one("#panels", TabbedContent).active.removeprefix("tab-")
            panel = self.query_one(f"#{pid}")
        except Exception:  # noqa: BLE001 - not composed yet / torn down: the notification is enough
            return
        line = Text(f"⚠ {text} (logged; the console goes on)", style="bold red", no_wrap=True, overflow="ellipsis")
        old = panel.query(".panel-error")
        if old:
            old.first(Static).update(line)
        else:
            panel.mount(Static(line, classes="panel-error"), before=0)

    def _handle_exception(self, error: Exception) -> None:
        """Textual's handler for an exception raised on the UI thread (a message handler, an action, a render)
        exits the app. Once the app runs, this catch-all reports it instead (panel line, notification, log) and the
        console goes on; before that (startup) and while exiting, Textual's handling stands."""
        if (isinstance(error, WorkerFailed) and isinstance(error.error, NoMatches)
                and "CommandPalette" in str(error.error)):
            # the same closing-palette race as in on_worker_state_changed, for Textual's own command-gathering
            # worker (exit_on_error): it reaches the app's exception handler instead of a state change
            self.log.warning(f"closing command palette: {error!r}")
            return
        if getattr(self, "_running", False) and not self._exit and self.screen_stack:
            try:
                self.report(error)
                return
            except Exception:  # noqa: BLE001 - reporting failed too: give up the way Textual does
                pass
        super()._handle_exception(error)

    def on_problem(self, msg: Problem) -> None:
        self.report(msg.text, msg.severity, exc=msg.error)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state != WorkerState.ERROR:
            return

        node, error = event.worker.node, event.worker.error
        cause = getattr(error, "error", error)  # WorkerFailed wraps the exception
        if node is not self and (not getattr(node, "is_attached", True)
                                 or (isinstance(node, CommandPalette) and isinstance(cause, NoMatches))):
            # a worker of a dialog that is closing or closed: Textual 8.2.8's palette, closed (Enter, Esc) while it
            # gathers commands, queries its result list after the list is gone. Nothing is left to show or fix.
            self.log.warning(f"worker {event.worker.name} of closing {node!r}: {error!r}")
            return
        self.report(error or RuntimeError(f"worker {event.worker.name} failed"))
