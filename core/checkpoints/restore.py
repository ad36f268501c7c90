"""Restoring files from a checkpoint: all or nothing, only the paths the agent changed.

Restore to just before an entry: for exactly the paths the turns from that entry on changed
(and the restores since), put back the content of the entry's first "before" snapshot (delete
what was added). Files the agent never touched are never changed. A path whose content now is
not what the agent (or a restore) left is the user's edit: it is listed, and the restore
refuses unless forced.

Atomic: the current tree is snapshotted first ("pre": it makes the restore itself undoable), a
journal naming the target and the paths is written, each file is replaced by a rename, a
"restored" snapshot is taken and the journal removed. A journal found later (a crash
mid-restore) is rolled forward by the next checkpoint operation, so the files end as they were
before the restore or after it, never half.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.checkpoints.apply import apply, inside_project
from core.checkpoints.store import Event, Store
from core.store.fileio import atomic_write_json

Entry = tuple[str, str] | None  # (mode, blob) or absent


class NothingToRestore(ValueError):
    """No checkpoint for that entry (or nothing to redo); says why."""


class RestoreConflict(Exception):
    """Files changed since the agent left them; restoring would lose those edits."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__("changed since the agent's turn: " + ", ".join(paths))
        self.paths = paths


@dataclass(frozen=True)
class Plan:
    """A restore: put `paths` back as they are in `target`; `expected`: what each path holds
    now unless the user changed it; `entry`, `undo`: recorded on the checkpoints."""

    target: str
    paths: list[str]
    expected: dict[str, Entry]
    entry: str
    undo: str


def find_turn(events: list[Event], entry: str) -> int:
    """The index of the first turn that answered `entry` (an id or a unique prefix)."""
    ids = list(dict.fromkeys(e.entry for e in events if e.kind == "turn"))
    matches = [i for i in ids if i == entry] or [i for i in ids if entry and i.startswith(entry)]
    if len(matches) != 1:
        why = "matches several turns" if matches else "has no checkpoint (no agent turn that " \
              "changed files answered it)"
        raise NothingToRestore(f"entry {entry!r} {why}")
    return next(i for i, e in enumerate(events) if e.kind == "turn" and e.entry == matches[0])


def plan_undo(events: list[Event], entry: str) -> Plan:
    """Back to just before `entry`: every path changed since, as it was then."""
    start = find_turn(events, entry)
    expected: dict[str, Entry] = {}
    for event in events[start:]:
        for change in event.changes:
            expected[change.path] = change.new
    return Plan(events[start].start.commit, sorted(expected), expected,
                events[start].entry, "undo")


def plan_redo(events: list[Event], entry: str) -> Plan:
    """Take back the last undo of `entry`: its paths as they were just before it."""
    last = next((e for e in reversed(events) if e.kind == "restore" and
                 e.entry.startswith(entry)), None)
    if last is None or last.undo != "undo":
        raise NothingToRestore(f"there is no undo of entry {entry!r} to take back")
    expected = {c.path: c.new for c in last.changes}
    return Plan(last.start.commit, sorted(expected), expected, last.entry, "redo")


def restore(store: Store, conv_id: str, plan: Plan, force: bool = False,
            progress: Callable[[int], None] | None = None) -> list[str]:
    """Apply `plan`; the paths it changed. Raises RestoreConflict (nothing changed) when
    files the user edited would be overwritten, unless `force`."""
    with store.lock:
        store.ready()
        tree, skipped = store.tree()
        now = store.entries(tree, plan.paths)
        conflicts = [p for p in plan.paths if now.get(p) != plan.expected.get(p)]
        if conflicts and not force:
            raise RestoreConflict(conflicts)
        for path in plan.paths:  # refused before anything is written (raises GitFailed)
            inside_project(store.root, path)
        record: dict[str, Any] = {"entry": plan.entry, "undo": plan.undo}
        pre = store.commit(conv_id, {**record, "phase": "pre"}, (tree, skipped))
        atomic_write_json(store.journal, {"conversation": conv_id, "target": plan.target,
                                          "pre": pre.commit, "paths": plan.paths, **record})
        target = store.entries(plan.target, plan.paths)
        apply(store.git, target, plan.paths, progress)
        store.commit(conv_id, {**record, "phase": "restored"})
        store.journal.unlink()
        return [p for p in plan.paths if now.get(p) != target.get(p)]
