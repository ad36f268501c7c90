"""Memory after a long conversation is shown or a project closed: garbage collected, the
rest frozen, freed pages given back to the system.

A long conversation is hundreds of thousands of long-lived objects; a full collection that
rescans them all is a quarter-second stall in the middle of a stream, so once shown they are
frozen (`gc.freeze`: the collector leaves them alone). But frozen objects are never collected:
whatever of a conversation the user left sat in a reference cycle stayed for good. So before
freezing what lives now, `settle()` unfreezes and collects once, where the user expects a pause
(a conversation opening), not in a stream.

Opening a long conversation parses its log on a worker thread: tens of megabytes of JSON and
entries, most of it garbage a moment later. glibc keeps what Python frees in its heaps (one per
thread that allocated) for reuse, so the process's resident size only ever grew as the user went
from one long conversation to the next, although the caches that hold them are bounded (the store
and the context service keep two conversations each). After a conversation is shown, or a
project closed, `release()` asks glibc to return its free pages (`malloc_trim`).
Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Callable


@functools.cache
def _trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


def release() -> bool:
    """Return the allocator's free memory to the system; False where that cannot be done."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True


# A full collection costs about a third of a second with a 10,000-message conversation and
# litellm in memory: worth it when a long conversation was left (its garbage is what it frees),
# not at every switch between short ones (their few cycles wait for the next one).
COLLECT_AFTER_ROWS = 2000


def settle(collect: bool = True) -> None:
    """Collect what is no longer used (cycles included) unless not `collect`, freeze what is,
    give the free pages back (see the module's doc)."""
    if collect:
        gc.unfreeze()
        gc.collect()
    gc.freeze()
    release()
