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

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.checkpoints.store import Event, GitFailed, Store
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
            _inside(store.root, path)
        record: dict[str, Any] = {"entry": plan.entry, "undo": plan.undo}
        pre = store.commit(conv_id, {**record, "phase": "pre"}, (tree, skipped))
        atomic_write_json(store.journal, {"conversation": conv_id, "target": plan.target,
                                          "pre": pre.commit, "paths": plan.paths, **record})
        target = store.entries(plan.target, plan.paths)
        apply(store, plan.target, plan.paths, progress)
        store.commit(conv_id, {**record, "phase": "restored"})
        store.journal.unlink()
        return [p for p in plan.paths if now.get(p) != target.get(p)]


def roll_forward(store: Store) -> None:
    """Finish the restore a crash interrupted (the lock held; see Store.ready)."""
    try:
        job = json.loads(store.journal.read_text(encoding="utf-8"))
        conv_id, target, paths = job["conversation"], job["target"], list(job["paths"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise GitFailed(f"an interrupted restore's journal ({store.journal}) cannot be read "
                        f"({e}); move it away to use checkpoints again") from e
    apply(store, str(target), [str(p) for p in paths], None)
    store.commit(str(conv_id), {"entry": job.get("entry", ""), "undo": job.get("undo", ""),
                                "phase": "restored"})
    store.journal.unlink()


def apply(store: Store, target: str, paths: list[str],
          progress: Callable[[int], None] | None) -> None:
    """Make each of `paths` what it is in `target` (absent: deleted). Idempotent: running it
    again after a crash finishes the job. Deletions go first (a file may become a folder)."""
    wanted = store.entries(target, paths)
    blobs = store.git.blobs([sha for _mode, sha in wanted.values()])
    order = sorted(paths, key=lambda p: (p in wanted, p))
    for done, path in enumerate(order, 1):
        dest = _inside(store.root, path)
        if path in wanted:
            mode, sha = wanted[path]
            _write(dest, mode, blobs[sha])
        else:
            _remove(store.root, dest)
        if progress is not None:
            progress(done)


def _inside(root: Path, path: str) -> Path:
    """The file `path` names in the project, refusing anything that would lead outside it
    (`..`, an absolute path, a folder that is a link elsewhere) or into .git / .workbench."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts) or \
            parts[0] in (".git", ".workbench"):
        raise GitFailed(f"a checkpoint names a path outside the project ({path!r})")
    dest = root.joinpath(*parts)
    parent = dest.parent
    while not parent.exists() and parent != root:
        parent = parent.parent
    if not parent.resolve().is_relative_to(root):
        raise GitFailed(f"{path}: a folder on its way leads outside the project; not restored")
    return dest


def _write(dest: Path, mode: str, data: bytes) -> None:
    if dest.is_dir() and not dest.is_symlink():
        raise GitFailed(f"{dest} is a folder now; move it away to restore the file")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.workbench-restore")
    tmp.unlink(missing_ok=True)
    if mode == "120000":
        os.symlink(os.fsdecode(data), tmp)
    else:
        with open(tmp, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o755 if mode == "100755" else 0o644)
    os.replace(tmp, dest)


def _remove(root: Path, dest: Path) -> None:
    if dest.is_dir() and not dest.is_symlink():
        raise GitFailed(f"{dest} is a folder now; move it away to restore")
    dest.unlink(missing_ok=True)
    parent = dest.parent  # the folders the turn made, now empty, go too
    while parent != root:
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent
