"""The window's process: settings for a responsive window, core told when the window's thread
is busy, and the model's transport warmed in the background."""

from __future__ import annotations

import sys

from app import start_up
from core import give_way
from core.llm import runtime


def prepare_runtime() -> None:
    """Process-wide settings for a responsive window, before anything heavy starts."""
    # Work off the window's thread (the engine streaming, the meter building the next request,
    # a summary being planned) runs Python while the window paints. Every call Qt makes into
    # Python (a model's data, a delegate's paint) must take the GIL back first, and waits up to a
    # switch interval for it: one far shorter than CPython's default keeps a repaint from adding
    # up a hundred such long waits. Only threads that contend for the GIL switch this often.
    sys.setswitchinterval(0.0001)


_window_followed = False


def follow_window_thread() -> None:
    """Tell core's long off-thread walks when the window's thread is busy (`core.give_way`):
    Qt's event dispatcher wakes up (busy) and goes back to sleep (idle). Once per process."""
    global _window_followed
    from PySide6.QtCore import QAbstractEventDispatcher

    dispatcher = QAbstractEventDispatcher.instance()
    if _window_followed or dispatcher is None:
        return
    _window_followed = True
    dispatcher.awake.connect(give_way.window_busy)
    dispatcher.aboutToBlock.connect(give_way.window_idle)


def warm_up_library(model: str | None) -> None:
    """Import what a request to `model` needs (litellm, or the openai SDK for a model that
    speaks the OpenAI protocol) and do a first request's one-time work, in the background.
    Started once the window is shown and its project open (before its first paint): started
    earlier it would compete with building the window. `model` None (the settings cannot be
    read): litellm. The start's collector is on again when it ends (`app.start_up`)."""
    start_up.collector_after(runtime.start_background_import(warm_up=True, model=model))
