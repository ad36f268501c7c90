"""A front end's start, kept out of the first request's way.

The start makes objects that live as long as the process: modules, classes, widgets, the model
library's types (the openai SDK's thousand pydantic models). Python's cyclic collector rescans
them ever more often as they pile up, finding no garbage, while the first request waits. So the
collector is off from the start until the model's transport is warm (`collector_after`), and
START_UP_S at most (a warm-up that never ends, or a command that warms nothing, must not keep
it off); what the start made is then frozen (never rescanned) and the collector on again.
"""

from __future__ import annotations

import gc
import threading

START_UP_S = 30.0  # the longest the collector stays off


def without_collector() -> None:
    """First thing at the start: the collector off, on again after START_UP_S at the latest."""
    gc.disable()
    _on_after(None)


def collector_after(warm: threading.Thread) -> None:
    """The collector on again as soon as `warm` (a warm-up's thread) has ended, unless it is
    on already."""
    _on_after(warm)


def _on_after(warm: threading.Thread | None) -> None:
    if gc.isenabled():
        return

    def wait_then_collect() -> None:
        if warm is not None:
            warm.join(START_UP_S)
        else:
            threading.Event().wait(START_UP_S)
        if not gc.isenabled():
            gc.freeze()
            gc.enable()

    threading.Thread(target=wait_then_collect, name="start-up-collector", daemon=True).start()
