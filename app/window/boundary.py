"""The window's exception boundary: an exception that nothing caught (in a Qt slot, a timer, a
signal handler, a worker thread, an asyncio task of the window's loop) is written with its
traceback to a log file in the platform's state folder, and the user reads one sentence about it
through the notice channel instead of a window that just stops doing what was asked.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import traceback
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import TracebackType

from app.window.notices import Notices
from core.redact import redact
from core.settings import state_dir
from core.store.errors import describe_os_error

LOG_NAME = "crash.log"
LOG_LIMIT = 1_000_000  # bytes: past this the log starts again (the previous one is kept once)

ExceptHook = Callable[[type[BaseException], BaseException, TracebackType | None], None]


def crash_log() -> Path:
    return state_dir() / LOG_NAME


def install(notices: Notices, log: Path | None = None) -> Callable[[], None]:
    """Make `sys.excepthook` (Qt hands exceptions raised in slots to it) and
    `threading.excepthook` the boundary; returns what puts the hooks they replaced back.
    Ctrl+C in the terminal still ends the app as before."""
    previous, previous_thread = sys.excepthook, threading.excepthook
    path = log or crash_log()

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None or issubclass(args.exc_type, SystemExit):
            previous_thread(args)
            return
        report(notices, path, args.exc_type, args.exc_value, args.exc_traceback)

    def hook(kind: type[BaseException], value: BaseException,
             tb: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            previous(kind, value, tb)
            return
        report(notices, path, kind, value, tb)

    def uninstall() -> None:
        sys.excepthook, threading.excepthook = previous, previous_thread

    sys.excepthook, threading.excepthook = hook, thread_hook
    return uninstall


def loop_handler(notices: Notices, log: Path | None = None
                 ) -> Callable[[asyncio.AbstractEventLoop, dict[str, object]], None]:
    """An asyncio exception handler for the window's loop: a task's exception nobody awaited
    reaches the boundary like any other; the loop's own messages keep its default handling."""
    path = log or crash_log()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        e = context.get("exception")
        if isinstance(e, Exception):
            report(notices, path, type(e), e, e.__traceback__)
        else:
            loop.default_exception_handler(context)

    return handle


def report(notices: Notices, path: Path, kind: type[BaseException], value: BaseException,
           tb: TracebackType | None) -> None:
    """Log the traceback to `path` and say one sentence naming it (neither holds a key)."""
    text = redact("".join(traceback.format_exception(kind, value, tb)))
    if sys.stderr is not None:  # whoever started the app from a terminal sees it there too
        sys.stderr.write(text)
    try:
        _append(path, f"--- {datetime.now().astimezone().isoformat()}\n{text}\n")
    except OSError as e:
        notices.error(f"Something went wrong ({kind.__name__}: {redact(str(value))}), and its "
                      f"details could not be written to {path} ({describe_os_error(e)}).")
        return
    notices.error(f"Something went wrong ({kind.__name__}); the details are in {path}.")


def _append(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.stat().st_size > LOG_LIMIT:
            path.replace(path.with_name(path.name + ".old"))
    except FileNotFoundError:
        pass
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
