"""`workbench checkpoints`, `workbench restore` and `workbench diff`: the files agent turns
changed, listed, shown and put back (see core.checkpoints)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from app.cli.commands import (
    EXIT_FAIL,
    EXIT_OK,
    CliError,
    open_project,
    require_writable,
    resolve_conversation,
)
from core.checkpoints.store import Store
from core.checkpoints.views import (
    GitFailed,
    GitMissing,
    NothingToRestore,
    RestoreConflict,
    TurnFiles,
    turn_diff,
    turns,
    undo,
)
from core.store.project import Project

T = TypeVar("T")


def add_parsers(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("checkpoints", help="list the agent turns that changed files")
    p.add_argument("project", type=Path)
    p.add_argument("--conversation", "-c", metavar="ID", required=True)
    p.add_argument("--json", action="store_true", help="one JSON list of the turns")
    p = sub.add_parser("restore", help="put the project's files back as they were just before "
                                       "an entry (all or nothing)")
    p.add_argument("project", type=Path)
    p.add_argument("--conversation", "-c", metavar="ID", required=True)
    p.add_argument("entry", metavar="ENTRY_ID", help="the user entry (id or unique prefix) "
                                                     "`workbench checkpoints` lists")
    p.add_argument("--force", action="store_true",
                   help="restore over files changed since the agent's turn (their edits are "
                        "kept in a checkpoint, but leave the files)")
    p = sub.add_parser("diff", help="print the file changes of an agent turn (unified diff)")
    p.add_argument("project", type=Path)
    p.add_argument("--conversation", "-c", metavar="ID", required=True)
    p.add_argument("entry", metavar="ENTRY_ID")


def _store(project: Project) -> Store:
    return Store(project.root, project.state, read_only=project.read_only)


def _describe(turn: TurnFiles) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(turn.time))
    undone = "  (undone)" if turn.undone else ""
    lines = [f"{turn.entry}  {when}  {turn.count} file{'s' if turn.count != 1 else ''} "
             f"changed{undone}"]
    lines += [f"  A {p}" for p in turn.added] + [f"  M {p}" for p in turn.modified] + \
        [f"  D {p}" for p in turn.deleted]
    lines += [f"  skipped {p}: {why}" for p, why in sorted(turn.skipped.items())]
    return "\n".join(lines)


def cmd_checkpoints(args: argparse.Namespace) -> int:
    """The turns of the conversation that changed files, oldest first."""
    project = open_project(args.project, create=False, read_only=True)
    try:
        conv_id = resolve_conversation(project.conversations, args.conversation)
        found = _guarded(lambda: turns(_store(project), conv_id))
    finally:
        project.close()
    if args.json:
        print(json.dumps([t.as_json() for t in found], ensure_ascii=False, indent=1))
    elif not found:
        print("No agent turn of this conversation changed files.")
    else:
        print("\n".join(_describe(t) for t in found))
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    project = open_project(args.project, create=False, read_only=True)
    try:
        conv_id = resolve_conversation(project.conversations, args.conversation)
        text = _guarded(lambda: turn_diff(_store(project), conv_id, args.entry))
    finally:
        project.close()
    sys.stdout.write(text)
    return EXIT_OK


def cmd_restore(args: argparse.Namespace) -> int:
    """Back to just before the entry; refused (exit 1, nothing changed) over the user's own
    edits unless --force."""
    project = open_project(args.project, create=False)
    require_writable(project)
    try:
        conv_id = resolve_conversation(project.conversations, args.conversation)
        try:
            changed = _guarded(lambda: undo(_store(project), conv_id, args.entry, args.force))
        except RestoreConflict as e:
            raise CliError("nothing was restored: these files changed since the agent's turn "
                           "(--force restores over them): " + ", ".join(e.paths)) from None
    finally:
        project.close()
    print(f"restored {len(changed)} file{'s' if len(changed) != 1 else ''} to just before "
          f"entry {args.entry}" + "".join(f"\n  {p}" for p in changed))
    return EXIT_OK


def _guarded(work: Callable[[], T]) -> T:
    try:
        return work()
    except (GitMissing, GitFailed, NothingToRestore) as e:
        raise CliError(str(e), EXIT_FAIL) from None
