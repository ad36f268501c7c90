"""Checkpoints: snapshots of the project's files around agent turns, and what each turn changed.

A snapshot is `git add -A` + `write-tree` + `commit-tree` in the shadow repository (see
`core.checkpoints.git`): the commit's parent is the conversation's previous checkpoint and its
message a small JSON record (conversation, the turn's user entry id, round, phase), kept
reachable under `refs/checkpoints/<conversation>`. Unchanged files cost nothing: git's index
skips them by their stat data and its object store holds each content once.

Files over the size limit and nested repositories are left out and listed on the checkpoint
as skipped; `.git/` and `.workbench/` always are.

Phases: "before" (ahead of a round's first change), "after" (when the turn ends), "pre" (the
tree just before a restore: it makes the restore undoable) and "restored" (just after one).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.checkpoints.apply import apply
from core.checkpoints.git import GitFailed, GitMissing, ShadowGit

SIZE_LIMIT = 5 * 1024 * 1024  # bytes: a bigger file is skipped (and said so on the checkpoint)
ZERO = "0" * 40
GITLINK = "160000"

__all__ = ["SIZE_LIMIT", "Checkpoint", "Event", "GitFailed", "GitMissing", "Store"]

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    """One lock per shadow repository in this process (the engine's and the app's use)."""
    with _locks_guard:
        return _locks.setdefault(str(path.resolve()), threading.Lock())


@dataclass(frozen=True)
class Checkpoint:
    """One snapshot: its commit, tree and record."""

    commit: str
    tree: str
    record: dict[str, Any]

    @property
    def phase(self) -> str:
        return str(self.record.get("phase", ""))

    @property
    def skipped(self) -> dict[str, str]:
        return {str(s.get("path")): str(s.get("why")) for s in self.record.get("skipped", [])
                if isinstance(s, dict)}


@dataclass(frozen=True)
class Change:
    """One path a change touched: status A/M/D and the modes and blobs on both sides."""

    path: str
    status: str
    old: tuple[str, str] | None  # (mode, blob) before; None when added
    new: tuple[str, str] | None  # after; None when deleted


@dataclass
class Event:
    """Something that changed files: an agent turn (its first "before" to its "after") or a
    restore ("pre" to "restored").

    Attributes:
        kind: "turn" or "restore".
        entry: the user entry the turn answered (a restore: the entry it went back to).
        start, end: the commits around it.
        time: when it started (seconds since the epoch).
        skipped: paths left out (too big, nested repositories) and why.
        undo: for a restore, "undo" or "redo".
        differ: how `changes` are found (read once, when first asked for).
    """

    kind: str
    entry: str
    start: Checkpoint
    end: Checkpoint
    time: float
    skipped: dict[str, str] = field(default_factory=dict)
    undo: str = ""
    differ: Callable[[str, str, dict[str, str]], list[Change]] | None = None
    _changes: list[Change] | None = None

    @property
    def changes(self) -> list[Change]:
        """The paths it added, modified and deleted."""
        if self._changes is None:
            self._changes = [] if self.differ is None else \
                self.differ(self.start.tree, self.end.tree, self.skipped)
        return self._changes

    def paths(self, status: str) -> list[str]:
        return [c.path for c in self.changes if c.status == status]


def ref_for(conv_id: str) -> str:
    return "refs/checkpoints/" + (re.sub(r"[^A-Za-z0-9_-]", "_", conv_id) or "_")


class Store:
    """A project's checkpoints (thread-safe; one repository lock per process)."""

    def __init__(self, root: Path, state: Path, size_limit: int = SIZE_LIMIT,
                 read_only: bool = False) -> None:
        """`read_only`: this process does not hold the project (another does, or it was
        opened to read): the store is read as it is, never prepared or rolled forward."""
        self.read_only = read_only
        self.root = root.resolve()
        self.state = state
        self.git = ShadowGit(self.root, state)
        self.size_limit = size_limit
        self.lock = _lock_for(state)

    @property
    def journal(self) -> Path:
        return self.state / "checkpoints.journal"

    def started(self) -> bool:
        """Whether there is anything to read (a repository, or a restore to finish); raises
        GitMissing without git. Reading never makes the repository."""
        self.git.exe()
        return self.git.git_dir.exists() or self.journal.exists()

    def ready(self) -> None:
        """Prepare the repository (every time: see ShadowGit.prepare) and finish a restore a
        crash interrupted. Call with the lock held. Read-only: nothing is written; the store
        is read only when what we own in it is as we wrote it (a shipped config could run a
        command), and a restore under way is left to the process that holds the project."""
        if self.read_only:
            self.git.check_ours()
            return
        self.git.prepare()  # all a repository is: objects/, refs/, HEAD and config
        if self.journal.exists():
            self._roll_forward()

    def _roll_forward(self) -> None:
        """Finish the restore a crash interrupted (the lock held)."""
        try:
            job = json.loads(self.journal.read_text(encoding="utf-8"))
            conv_id, target, paths = job["conversation"], job["target"], list(job["paths"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise GitFailed(f"an interrupted restore's journal ({self.journal}) cannot be read "
                            f"({e}); move it away to use checkpoints again") from e
        paths = [str(p) for p in paths]
        apply(self.git, self.entries(str(target), paths), paths, None)
        self.commit(str(conv_id), {"entry": job.get("entry", ""), "undo": job.get("undo", ""),
                                   "phase": "restored"})
        self.journal.unlink()

    # --- snapshots -----------------------------------------------------------------------------

    def snapshot(self, conv_id: str, record: dict[str, Any]) -> Checkpoint:
        """Commit the work tree as it is now onto the conversation's checkpoints."""
        with self.lock:
            self.ready()
            return self.commit(conv_id, record)

    def commit(self, conv_id: str, record: dict[str, Any],
               staged: tuple[str, dict[str, str]] | None = None) -> Checkpoint:
        """`snapshot` with the lock held and the repository ready (`staged`: the tree already
        written, with what it skipped)."""
        tree, skipped = staged or self.tree()
        ref = ref_for(conv_id)
        parent = self.git.ref(ref)
        full = {"workbench": 1, "conversation": conv_id, "time": time.time(), **record,
                "skipped": [{"path": p, "why": w} for p, w in sorted(skipped.items())]}
        message = json.dumps(full, ensure_ascii=False, sort_keys=True)
        args = ["commit-tree", tree, "-m", message] + (["-p", parent] if parent else [])
        commit = self.git.text(*args)
        # HEAD follows the newest snapshot, so the next `status` compares little against it
        self.git.run("update-ref", "--stdin", input=(f"update {ref} {commit} {parent or ZERO}\n"
                                                    f"update refs/heads/main {commit}\n").encode())
        return Checkpoint(commit, tree, full)

    def tree(self) -> tuple[str, dict[str, str]]:
        """Stage the work tree into the shadow index and write its tree; what was skipped.

        One `git status` finds what changed since the last snapshot (by the index's stat data
        and the untracked cache) and only those paths are staged."""
        out = self.git.run("status", "--porcelain=v1", "-z", "--untracked-files=all",
                           "--no-renames")
        stage: list[str] = []
        drop: list[str] = []
        skipped: dict[str, str] = {}
        for item in out.split(b"\0"):
            if len(item) < 4 or item[1:2] == b" ":  # the work tree is as the index has it
                continue
            path = item[3:].decode("utf-8", "surrogateescape")
            if path.endswith("/"):
                skipped[path.rstrip("/")] = ("a nested git repository (its files are not "
                                             "checkpointed)")
                continue
            if item[1:2] == b"D":  # gone (or behind a link now): out of the index
                drop.append(path)
                continue
            why = self._too_big(path)
            if why is not None:
                skipped[path] = why
                if item[:2] != b"??":  # a file that grew past the limit: out of the index
                    drop.append(path)
                continue
            stage.append(path)
        for paths, how in ((drop, ("--force-remove",)),
                           (stage, ("--add", "--remove", "--replace"))):
            if paths:
                self.git.run("update-index", *how, "-z", "--stdin",
                             input=b"".join(p.encode("utf-8", "surrogateescape") + b"\0"
                                            for p in paths))
        return self.git.text("write-tree"), skipped

    def _too_big(self, path: str) -> str | None:
        try:
            size = os.lstat(self.root / path).st_size
        except OSError:
            return None
        if size <= self.size_limit:
            return None
        return (f"larger than {self.size_limit // (1024 * 1024)} MB "
                f"({size / (1024 * 1024):.1f} MB)")

    # --- history -------------------------------------------------------------------------------

    def checkpoints(self, conv_id: str) -> list[Checkpoint]:
        """The conversation's checkpoints, oldest first."""
        ref = ref_for(conv_id)
        if not self.git.git_dir.is_dir() or self.git.ref(ref) is None:
            return []
        out = self.git.run("log", "--format=%H%x1f%T%x1f%B%x1e", ref)
        found: list[Checkpoint] = []
        for chunk in out.decode("utf-8", "replace").split("\x1e"):
            parts = chunk.strip().split("\x1f")
            if len(parts) != 3:
                continue
            try:
                record = json.loads(parts[2])
            except ValueError:
                continue
            if isinstance(record, dict):
                found.append(Checkpoint(parts[0], parts[1], record))
        found.reverse()
        return found

    def events(self, conv_id: str) -> list[Event]:
        """What changed files in the conversation, oldest first: its turns and restores."""
        with self.lock:
            self.ready()
            return self.events_locked(conv_id)

    def events_locked(self, conv_id: str) -> list[Event]:
        """`events` with the lock held (each event's changes are read when asked for)."""
        points = self.checkpoints(conv_id)
        events: list[Event] = []
        open_turns: dict[str, Event] = {}
        for i, cp in enumerate(points):
            rec = cp.record
            if cp.phase == "before":
                turn = str(rec.get("turn", ""))
                if turn not in open_turns:
                    event = Event("turn", str(rec.get("entry", "")), cp, cp,
                                  float(rec.get("time", 0)))
                    open_turns[turn] = event
                    events.append(event)
            elif cp.phase == "after" and str(rec.get("turn", "")) in open_turns:
                open_turns.pop(str(rec.get("turn", ""))).end = cp
            elif cp.phase == "restored" and i > 0 and points[i - 1].phase == "pre":
                events.append(Event("restore", str(rec.get("entry", "")), points[i - 1], cp,
                                    float(rec.get("time", 0)), undo=str(rec.get("undo", ""))))
        for event in open_turns.values():  # a turn a crash cut: up to the next checkpoint
            later = [cp for cp in points if float(cp.record.get("time", 0)) > event.time
                     and cp.commit != event.start.commit]
            event.end = later[0] if later else event.start
        for event in events:
            event.skipped = {**event.start.skipped, **event.end.skipped}
            event.differ = self.diff_trees
        return events

    def diff_trees(self, old: str, new: str, skipped: dict[str, str]) -> list[Change]:
        """The files that differ between two trees (no renames), less the skipped paths and
        nested repositories."""
        if old == new:
            return []
        out = self.git.run("diff-tree", "-r", "-z", "--no-renames", old, new)
        fields = out.split(b"\0")
        changes: list[Change] = []
        for meta, raw in zip(fields[0::2], fields[1::2], strict=False):
            if not meta.startswith(b":"):
                continue
            old_mode, new_mode, old_sha, new_sha, status = meta[1:].decode().split()
            path = raw.decode("utf-8", "surrogateescape")
            if GITLINK in (old_mode, new_mode) or path in skipped or \
                    any(path.startswith(s + "/") for s in skipped):
                continue
            before = None if status == "A" else (old_mode, old_sha)
            after = None if status == "D" else (new_mode, new_sha)
            changes.append(Change(path, "M" if status == "T" else status, before, after))
        return changes

    def entries(self, commit: str, paths: list[str]) -> dict[str, tuple[str, str]]:
        """path -> (mode, blob) in the commit's tree, for those of `paths` it has."""
        if not paths:
            return {}
        wanted = set(paths)  # the whole tree, filtered here: no pathspec reads a name as a glob
        out = self.git.run("ls-tree", "-r", "-z", "--full-tree", commit)
        found: dict[str, tuple[str, str]] = {}
        for item in out.split(b"\0"):
            meta, _, raw = item.partition(b"\t")
            path = raw.decode("utf-8", "surrogateescape")
            if path in wanted:
                mode, _kind, sha = meta.decode().split()
                found[path] = (mode, sha)
        return found
