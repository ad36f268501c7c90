"""The window's exception boundary: an exception that nothing caught (in a Qt slot, a timer, a
signal handler) is written with its traceback to a log file in the platform's state folder, and
the user reads one sentence about it through the notice channel instead of a window that just
stops doing what was asked.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import TracebackType

from app.notices import Notices
from core.settings import state_dir
from core.store.errors import describe_os_error

LOG_NAME = "crash.log"
LOG_LIMIT = 1_000_000  # bytes: past this the log starts again (the previous one is kept once)

ExceptHook = Callable[[type[BaseException], BaseException, TracebackType | None], None]


def crash_log() -> Path:
    return state_dir() / LOG_NAME


def install(notices: Notices, log: Path | None = None) -> ExceptHook:
    """Make `sys.excepthook` the boundary (Qt hands exceptions raised in slots to it); returns
    the hook it replaced. Ctrl+C in the terminal still ends the app as before."""
    previous = sys.excepthook
    path = log or crash_log()

    def hook(kind: type[BaseException], value: BaseException,
             tb: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            previous(kind, value, tb)
            return
        report(notices, path, kind, value, tb)

    sys.excepthook = hook
    return previous


def report(notices: Notices, path: Path, kind: type[BaseException], value: BaseException,
           tb: TracebackType | None) -> None:
    """Log the traceback to `path` and say one sentence naming it."""
    text = "".join(traceback.format_exception(kind, value, tb))
    if sys.stderr is not None:  # whoever started the app from a terminal sees it there too
        sys.stderr.write(text)
    try:
        _append(path, f"--- {datetime.now().astimezone().isoformat()}\n{text}\n")
    except OSError as e:
        notices.error(f"Something went wrong ({kind.__name__}: {value}), and its details could "
                      f"not be written to {path} ({describe_os_error(e)}).")
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
