"""The last requests built for each conversation, with their reports: `.workbench/requests/`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.store.fileio import atomic_write_json_in_pieces, read_json, timestamp_tag

KEEP = 20


def save_request(requests_dir: Path, conv_id: str, payload: dict[str, Any],
                 keep: int = KEEP) -> Path:
    """Write one built request (messages, tools, report) and keep only the newest `keep`."""
    folder = requests_dir / conv_id
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{timestamp_tag()}.json"
    atomic_write_json_in_pieces(path, payload)  # compact, and the window keeps turning
    for old in sorted(folder.glob("*.json"))[:-keep]:
        old.unlink(missing_ok=True)
    return path


def latest_request(requests_dir: Path, conv_id: str) -> tuple[Path, dict[str, Any]] | None:
    """The newest kept request of the conversation that can be read, or None."""
    folder = requests_dir / conv_id
    try:
        paths = sorted(folder.glob("*.json"), reverse=True)
    except OSError:
        return None
    for path in paths:
        try:
            data = read_json(path)
        except (OSError, ValueError):
            continue  # half-written or damaged: the one before it
        if isinstance(data, dict) and isinstance(data.get("messages"), list):
            return path, data
    return None


def saved_requests(requests_dir: Path, conv_id: str) -> list[Path]:
    """The kept requests of the conversation, newest first."""
    try:
        return sorted((requests_dir / conv_id).glob("*.json"), reverse=True)
    except OSError:
        return []


def read_request(path: Path) -> dict[str, Any] | None:
    """One kept request (messages, tools, report), or None when it cannot be read."""
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("report"), dict) else None
