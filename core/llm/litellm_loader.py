"""litellm's import: lazy, offline, quiet, once (core.llm.runtime warms it in the background).

Its own module, below everything that needs litellm (the provider routing asks litellm which
provider serves a model; the runtime warms transports): one place holds the module once loaded.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

from core.llm.offline import configure_offline_environment

_lock = threading.Lock()
_module: ModuleType | None = None


def load_litellm() -> Any:
    """Import and configure litellm once; later calls return the same module at no cost."""
    global _module
    if _module is not None:
        return _module
    with _lock:
        if _module is None:
            configure_offline_environment()
            import litellm

            litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners
            litellm.telemetry = False
            litellm.drop_params = True  # a param one provider lacks is dropped, not fatal
            # litellm aborts a stream after 100 identical chunks, taking a legitimate answer
            # (a long rule of "=", a table border) for a model stuck in a loop. The output
            # token limit already bounds a real loop, and the user can Stop.
            setattr(litellm, "REPEATED_STREAMING_CHUNK_LIMIT", 10**9)  # noqa: B010 - untyped
            from core.llm import sdk_shims

            sdk_shims.install()  # messages through the openai SDK as they are (see there)
            _module = litellm
    return _module


def is_loaded() -> bool:
    return _module is not None
