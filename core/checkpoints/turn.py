"""Checkpoints around one agent turn: a "before" snapshot ahead of each round's first change
(a write or edit, a command, an MCP tool that is not read-only) and one "after" when the turn
ends, if a "before" was taken. A snapshot that cannot be taken never fails the turn: it is a
notice (no git: said once per project, and no checkpoints)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from core.checkpoints.store import GitFailed, GitMissing, Store


class Checkpointer:
    """A project's checkpoints as turns take them (one per engine)."""

    def __init__(self, root: Path, state: Path) -> None:
        self.store = Store(root, state)
        self.missing = False  # git is not installed: said once, then nothing is tried

    def turn(self, conv_id: str, entry: Callable[[], str]) -> TurnRecorder:
        return TurnRecorder(self, conv_id, entry)

    def take(self, conv_id: str, record: dict[str, object]) -> tuple[bool, str | None]:
        """A snapshot: (taken, a notice to show or None)."""
        if self.missing:
            return False, None
        try:
            self.store.snapshot(conv_id, record)
        except GitMissing as e:
            self.missing = True
            return False, str(e)
        except (GitFailed, OSError) as e:
            return False, (f"The files were not checkpointed before this change ({e}); "
                           "this turn's changes cannot be undone from the app.")
        return True, None


class TurnRecorder:
    """The checkpoints of one turn of one conversation."""

    def __init__(self, owner: Checkpointer, conv_id: str, entry: Callable[[], str]) -> None:
        self.owner = owner
        self.conv_id = conv_id
        self.entry = entry
        self.id = uuid.uuid4().hex
        self.rounds = 0
        self.taken = False
        self.done = False
        self._entry_id: str | None = None

    def _record(self, phase: str) -> dict[str, object]:
        if self._entry_id is None:
            self._entry_id = self.entry()
        return {"phase": phase, "turn": self.id, "entry": self._entry_id, "round": self.rounds}

    def before(self) -> str | None:
        """Ahead of a round's first change; a notice, or None."""
        self.rounds += 1
        taken, note = self.owner.take(self.conv_id, self._record("before"))
        self.taken = self.taken or taken
        return note

    def after(self) -> str | None:
        """When the turn ends (once; nothing when no "before" was taken)."""
        if self.done or not self.taken:
            return None
        self.done = True
        return self.owner.take(self.conv_id, self._record("after"))[1]
