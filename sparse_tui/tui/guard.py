"""The console's catch-all: an exception raised while a widget handles a message (a key, an action, a worker's
message, a timer) is reported (a red line in the panel on screen, a notification, RUNS_DIR/logs/console.log) and the
widget goes on handling messages.

Textual's own handling exits the app, and its message loop stops the widget that raised (``break``), so catching it
later in ``App._handle_exception`` would leave a dead widget behind. ``Guarded`` catches it one level lower, in
``_dispatch_message``, on the app and on every panel. Compose and Mount errors still go to Textual: a console that
cannot start should say so and exit."""

from __future__ import annotations

import functools
from asyncio import CancelledError
from typing import Any, Callable

from textual import events
from textual.app import ScreenStackError
from textual.css.query import NoMatches


class Guarded:
    """Mix into an App or a Widget (before the Textual class) to survive exceptions in its message handlers."""

    async def _dispatch_message(self, message) -> None:  # type: ignore[override]
        try:
            await super()._dispatch_message(message)  # type: ignore[misc]
        except CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - the catch-all that keeps the console alive
            if isinstance(message, (events.Compose, events.Mount)):
                raise
            app = self if hasattr(self, "report") else getattr(self, "app", None)
            if app is None or not hasattr(app, "report") or getattr(app, "_exit", False):
                raise
            app.report(error)


def guarded(fn: Callable) -> Callable:
    """For the main screen's handlers of worker messages: a message that arrives while the panels are not all mounted
    (the app still composing, a Lazy panel not mounted yet, or the app tearing down with a poll in flight) has
    nothing to update (logged and ignored); any other exception is reported and the console goes on."""

    @functools.wraps(fn)
    def wrapper(self, *a: Any, **kw: Any) -> Any:
        try:
            return fn(self, *a, **kw)
        except (NoMatches, ScreenStackError) as e:
            if self.app._exit or not self.panels_mounted():
                self.log.warning(f"{fn.__name__}: {e} (panels not mounted; ignored)")
                return None
            self.app.report(e)
            return None
        except Exception as e:  # noqa: BLE001 - the catch-all that keeps the console alive
            self.app.report(e)
            return None

    return wrapper
