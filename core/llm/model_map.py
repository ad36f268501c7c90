"""The model map that ships inside litellm's package, read without importing litellm.

Importing litellm takes seconds; a command that only builds a request (`workbench context`,
the window's meter at start) needs nothing of it but a known model's context window. That
comes from the same JSON litellm itself reads offline (`LITELLM_LOCAL_MODEL_COST_MAP`), looked
up as litellm does: the model string as given, else without its provider prefix when the entry
belongs to that provider (`openai/gpt-4o` is `gpt-4o`, `ollama/gpt-4o` is nothing).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from core.llm.offline import litellm_package_dir

MAP_FILE = "model_prices_and_context_window_backup.json"

_lock = threading.Lock()
_map: dict[str, Any] | None = None


def model_info(model: str) -> dict[str, Any] | None:
    """The map's entry for `model`, or None when litellm does not know it."""
    entries = _load()
    entry = entries.get(model)
    if isinstance(entry, dict):
        return entry
    provider, _, name = model.partition("/")
    entry = entries.get(name) if name else None
    if isinstance(entry, dict) and entry.get("litellm_provider") == provider:
        return entry
    return None


def speaks_openai(model: str) -> bool:
    """Whether `model`'s requests go through the openai SDK: `openai/<name>` (OpenAI, or any
    OpenAI-compatible server at an api_base), or a bare name litellm's model map places at
    OpenAI (`gpt-4o-mini`). Read from the map's JSON: litellm is not imported."""
    prefix, slash, _ = model.partition("/")
    if slash:
        return prefix == "openai"
    return (model_info(model) or {}).get("litellm_provider") == "openai"


def supports_vision(model: str) -> bool:
    """litellm's map says the model reads images (an unknown model: no)."""
    return bool((model_info(model) or {}).get("supports_vision"))


def _load() -> dict[str, Any]:
    global _map
    with _lock:
        if _map is None:
            pkg = litellm_package_dir()
            try:
                raw = json.loads((pkg / MAP_FILE).read_text(encoding="utf-8")) if pkg else {}
            except (OSError, ValueError):
                raw = {}
            _map = raw if isinstance(raw, dict) else {}
        return _map
