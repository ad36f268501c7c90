"""Offline by construction: litellm's bundled model map, and tiktoken's BPE files from inside
litellm's package, so no run-time step needs the internet."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


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
