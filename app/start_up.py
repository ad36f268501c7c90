"""A front end's start, kept out of the first request's way.

The start makes objects that live as long as the process: modules, classes, widgets, the model
library's types (the openai SDK's thousand pydantic models). Python's cyclic collector rescans
them ever more often as they pile up, finding no garbage: a tenth of a second of the wait for the
first request. So the collector is off from the start until the model's transport is warm (or
START_UP_S at most: a warm-up that never ends must not keep it off); what the start made is then
frozen (never rescanned) and the collector on again.
"""

from __future__ import annotations

import gc
import threading

START_UP_S = 30.0  # the longest the collector stays off


def without_collector() -> None:
    """First thing at the start: the collector off (see the module's doc)."""
    gc.disable()


def collector_after(warm: threading.Thread | None) -> None:
    """The collector on again once `warm` has ended (None: after START_UP_S), in the
    background; what lives then is frozen first. Nothing to do if it is on."""
    if gc.isenabled():
        return
    threading.Thread(target=_on_after, args=(warm,), name="start-up-collector",
                     daemon=True).start()


def _on_after(warm: threading.Thread | None) -> None:
    if warm is not None:
        warm.join(START_UP_S)
    else:
        threading.Event().wait(START_UP_S)
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
