"""A conversation's own settings (its conversation.json) changed from the window: one way, a
failure said in plain words, a read-only project never written."""

from __future__ import annotations

from typing import Any

from app.window.notices import Notices
from core.store.errors import StoreError
from core.store.project import Project


def set_conversation(project: Project | None, conv: str | None, notices: Notices,
                     not_saved: str, **changes: Any) -> bool:
    """Change the conversation's settings; False (and `not_saved`, with why) when they were
    not changed."""
    if project is None or conv is None or project.read_only:
        return False
    try:
        project.conversations.update_meta(conv, **changes)
    except StoreError as e:
        notices.warning(f"{not_saved}: {e}")
        return False
    return True
