"""The answer being received, kept beside its log while it streams (crash recovery): reading
the sidecar and the error entry it becomes when no live turn owns it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.model import ConversationMessage, app_closed_entry
from core.store.fileio import read_json


def read_sidecar(path: Path) -> dict[str, Any] | None:
    """The streaming sidecar's state; {} when it exists but is unreadable, None when absent."""
    if not path.is_file():
        return None
    try:
        state = read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def sidecar_text(state: dict[str, Any]) -> str:
    text = state.get("text")
    if text is None:
        return ""
    return text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)


def recovered_entry(state: dict[str, Any]) -> tuple[ConversationMessage, str]:
    """The error entry an orphaned sidecar becomes, with the answer's text."""
    text = sidecar_text(state)
    entry = app_closed_entry(text)
    # The details are best effort (another version, or a hand, may have written them):
    # one that does not fit is left out; the text is what matters.
    for key in ("model", "mode", "continues", "run_id", "step_id"):
        value = state.get(key)
        if value in (None, ""):
            continue
        try:
            entry = ConversationMessage.model_validate(
                {**entry.model_dump(exclude_defaults=True), key: value})
        except ValidationError:
            pass
    return entry, text
