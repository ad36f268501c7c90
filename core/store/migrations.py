"""Schema migrations: an append-only list of named functions.

Migration i upgrades a project from schema version i + 1 to i + 2. Never edit or reorder a
migration that has shipped; add a new one at the end. Each receives the `.workbench` folder and
the parsed `project.json` and returns the new `project.json` content (it may also rewrite files
under the folder, durably).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Migration = tuple[str, Callable[[Path, dict[str, Any]], dict[str, Any]]]

MIGRATIONS: list[Migration] = []


def current_version(migrations: Sequence[Migration] = MIGRATIONS) -> int:
    return 1 + len(migrations)


def migrate(
    state_dir: Path, info: dict[str, Any], migrations: Sequence[Migration] = MIGRATIONS
) -> tuple[dict[str, Any], list[str]]:
    """Apply the migrations `info` has not seen; returns the new info and the names applied."""
    version = int(info.get("schema_version", 1))
    applied: list[str] = []
    for name, fn in migrations[version - 1 :]:
        info = fn(state_dir, dict(info))
        version += 1
        info["schema_version"] = version
        applied.append(name)
    return info, applied
