"""Long pure-Python work off the window's thread gives way to that thread while it is busy.

CPython runs one thread's Python at a time. While the meter walks 10,000 decisions on its
thread, every call Qt makes into Python on the window's thread (a model's data, a delegate's
paint) first waits for the GIL, and a repaint made of hundreds of such calls stalls the window
for all their waits together. Long walks therefore call `give_way()` every few hundred items: while
the window's thread is busy (between Qt's event dispatcher waking and going back to sleep,
told through `window_busy` and `window_idle`), the walk sleeps, GIL released, until the window
is idle again, for at most `LONGEST_WAIT` seconds each time, so it always progresses.

The same holds for the processor: with two cores, the engine's thread (streaming, writing
entries, counting tokens), the tool calls it runs and a provider on the same machine leave the
window's thread half of one. Those threads therefore run at a lower priority
(`lower_priority`): an agent's storm of tool calls then slows a little, not the window.
"""

from __future__ import annotations

import os
import sys
import threading
import time

BACKGROUND_NICE = 10  # Linux's niceness of background threads (the window's stays 0)

LONGEST_WAIT = 0.02  # seconds one pause may wait for the window to go idle

_idle = threading.Event()
_idle.set()  # no window (the CLI, tests): never wait


def window_busy() -> None:
    """The window's thread started handling events (Qt's dispatcher woke up)."""
    _idle.clear()


def window_idle() -> None:
    """The window's thread has nothing to do (Qt's dispatcher is about to sleep)."""
    _idle.set()


def give_way() -> None:
    """A pause in long work off the window's thread: wait while the window is busy, at most
    LONGEST_WAIT, and release the GIL at least once either way."""
    if not _idle.is_set() and threading.current_thread() is not threading.main_thread():
        _idle.wait(LONGEST_WAIT)
    time.sleep(0)


def lower_priority() -> None:
    """The calling thread, and every thread it starts from now on, yields the processor to
    the window's thread (Linux: a per-thread niceness, inherited by the threads it creates;
    elsewhere nothing changes). Call it first thing on a background thread."""
    setpriority = getattr(os, "setpriority", None)
    if setpriority is None or not sys.platform.startswith("linux"):
        return
    try:  # raising one's own niceness needs no privilege; a sandbox may still refuse it
        tid = threading.get_native_id()
        setpriority(os.PRIO_PROCESS, tid, max(os.getpriority(os.PRIO_PROCESS, tid),
                                                BACKGROUND_NICE))
    except OSError:
        pass
