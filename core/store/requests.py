"""The last requests built for each conversation, with their reports: `.workbench/requests/`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.store.fileio import atomic_write_json, timestamp_tag

KEEP = 20


def save_request(requests_dir: Path, conv_id: str, payload: dict[str, Any],
                 keep: int = KEEP) -> Path:
    """Write one built request (messages, tools, report) and keep only the newest `keep`."""
    folder = requests_dir / conv_id
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{timestamp_tag()}.json"
    atomic_write_json(path, payload, indent=None)  # compact: the C encoder, 10x faster
    for old in sorted(folder.glob("*.json"))[:-keep]:
        old.unlink(missing_ok=True)
    return path
