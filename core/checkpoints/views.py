"""What the command line and the window show of checkpoints: the turns that changed files,
a turn's diff, and undo / redo, over `Store` (see core.checkpoints.store)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.checkpoints.restore import (
    NothingToRestore,
    RestoreConflict,
    find_turn,
    plan_redo,
    plan_undo,
    restore,
)
from core.checkpoints.store import Event, GitFailed, GitMissing, Store

__all__ = ["FileDiff", "GitFailed", "GitMissing", "NothingToRestore", "RestoreConflict",
           "TurnFiles", "file_diffs", "redo", "turn_diff", "turns", "undo"]


@dataclass(frozen=True)
class TurnFiles:
    """The files one turn changed (every turn answering the same entry taken together).

    Attributes:
        entry: the user entry the turn answered; time: when it started.
        added, modified, deleted: the paths; skipped: path -> why it was left out.
        undone: its changes were undone (and not redone since).
    """

    entry: str
    time: float
    added: list[str]
    modified: list[str]
    deleted: list[str]
    skipped: dict[str, str] = field(default_factory=dict)
    undone: bool = False

    @property
    def count(self) -> int:
        return len(self.added) + len(self.modified) + len(self.deleted)

    def as_json(self) -> dict[str, Any]:
        return {"entry": self.entry, "time": self.time, "added": self.added,
                "modified": self.modified, "deleted": self.deleted,
                "skipped": [{"path": p, "why": w} for p, w in sorted(self.skipped.items())],
                "undone": self.undone}


def _span(events: list[Event], entry: str) -> tuple[Event, Event]:
    """The first and last turn events that answered `entry`."""
    first = events[find_turn(events, entry)]
    same = [e for e in events if e.kind == "turn" and e.entry == first.entry]
    return same[0], same[-1]


def turns(store: Store, conv_id: str) -> list[TurnFiles]:
    """The conversation's turns that changed files, oldest first."""
    if not store.started():
        return []
    with store.lock:
        store.ready()
        events = store.events_locked(conv_id)
        found: list[TurnFiles] = []
        for entry in dict.fromkeys(e.entry for e in events if e.kind == "turn"):
            first, last = _span(events, entry)
            skipped = {**first.skipped, **last.skipped}
            changes = store.diff_trees(first.start.tree, last.end.tree, skipped)
            if not changes:
                continue
            restores = [e for e in events if e.kind == "restore" and e.entry == entry]
            found.append(TurnFiles(
                entry, first.time, [c.path for c in changes if c.status == "A"],
                [c.path for c in changes if c.status == "M"],
                [c.path for c in changes if c.status == "D"], skipped,
                bool(restores) and restores[-1].undo == "undo"))
        return found


def turn_diff(store: Store, conv_id: str, entry: str) -> str:
    """The turn's changes as a unified diff (git's, without external diff or textconv)."""
    with store.lock:
        store.ready()
        first, last = _span(store.events_locked(conv_id), entry)
        out = store.git.run("diff", "--no-color", "--no-ext-diff", "--no-textconv",
                            "--no-renames",
                            first.start.commit, last.end.commit)
    return out.decode("utf-8", "replace")


@dataclass(frozen=True)
class FileDiff:
    """One file of a turn's diff: its path, status, and lines (with their +/-/space)."""

    path: str
    status: str
    lines: list[str]

    @property
    def added(self) -> int:
        return sum(1 for line in self.lines if line.startswith("+"))

    @property
    def removed(self) -> int:
        return sum(1 for line in self.lines if line.startswith("-"))


def file_diffs(text: str) -> list[FileDiff]:
    """A unified diff split per file (the hunk lines kept, git's headers dropped)."""
    files: list[FileDiff] = []
    for block in text.split("\ndiff --git "):
        lines = block.removeprefix("diff --git ").splitlines()
        if not lines:
            continue
        head = [line for line in lines if not line.startswith(("@@", "+", "-", " "))
                or line.startswith(("--- ", "+++ "))]
        status = "A" if any(h.startswith("new file") for h in head) else \
            "D" if any(h.startswith("deleted file") for h in head) else "M"
        path = next((h[6:] for h in head if h.startswith("+++ b/")), "") or \
            next((h[6:] for h in head if h.startswith("--- a/")), "") or \
            lines[0].split(" b/", 1)[-1]
        body_at = next((i for i, line in enumerate(lines) if line.startswith("@@")), len(lines))
        files.append(FileDiff(path, status, lines[body_at:]))
    return files


def undo(store: Store, conv_id: str, entry: str, force: bool = False) -> list[str]:
    """Put the files the turns from `entry` on changed back as they were just before it; the
    paths that changed. Raises RestoreConflict, NothingToRestore, GitFailed, GitMissing."""
    return restore(store, conv_id, plan_undo(store.events(conv_id), entry), force)


def redo(store: Store, conv_id: str, entry: str, force: bool = False) -> list[str]:
    """Take back the last undo of `entry` (its files as they were just before it)."""
    return restore(store, conv_id, plan_redo(store.events(conv_id), entry), force)
