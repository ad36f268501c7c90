"""Loading litellm: lazily, offline, quietly.

litellm takes seconds to import, so nothing imports it at module level: `load_litellm()` does, once,
and `start_background_import()` lets a front end warm it up on a thread while it shows a window or
parses arguments. Before the import we point it at its bundled model map and tiktoken at the BPE
files that ship inside litellm's package, so no run-time step needs the internet.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

_lock = threading.Lock()
_module: ModuleType | None = None
_thread: threading.Thread | None = None


def litellm_package_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def configure_offline_environment() -> None:
    """Set the variables litellm and tiktoken read, unless the user already chose otherwise."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # In its default DEV mode litellm loads a `.env` found from the working directory into the
    # environment at import: keys from whatever folder the app was started in. Not for us.
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    pkg = litellm_package_dir()
    if pkg is not None:
        tokenizers = pkg / "litellm_core_utils" / "tokenizers"
        if tokenizers.is_dir():
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(tokenizers))


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
            _module = litellm
    return _module


def start_background_import() -> threading.Thread:
    """Begin importing litellm on a daemon thread; `load_litellm()` then waits for it."""
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=load_litellm, name="litellm-import", daemon=True)
            _thread.start()
        return _thread


def is_loaded() -> bool:
    return _module is not None
