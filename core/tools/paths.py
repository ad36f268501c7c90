"""Paths the model names, resolved inside the project folder or refused with a reason.

Symlinks are followed before the check (core.confined.inside, as every reader of the project's
files does), so a link that points outside the project is refused like `..`. The project's
`.workbench/` (the log itself) and `.git/` are read-only to tools.
"""

from __future__ import annotations

import os
from pathlib import Path

from core.confined import Refused, inside
from core.tools.base import ToolError

READ_ONLY_DIRS = (".workbench", ".git")
IGNORED_DIRS = frozenset(READ_ONLY_DIRS)


def resolve(root: Path, path: str, *, write: bool = False) -> Path:
    """The real path of `path` (relative to `root`, or absolute inside it).

    Raises:
        ToolError: the path leaves the project (also through a symlink), is empty, or is to be
            written inside `.workbench/` or `.git/`.
    """
    if not path or not path.strip():
        raise ToolError("No path given; name a file relative to the project folder.")
    if "\x00" in path:
        raise ToolError("The path contains a NUL character.")
    given = Path(os.path.expanduser(path)) if path.startswith("~") else Path(path)
    try:
        real = inside(root, given, repr(path))
    except Refused as e:
        raise ToolError(f"{e}; tools may only use files inside the project folder ({root}).") \
            from None
    if write:
        rel = real.relative_to(root)
        if rel.parts and rel.parts[0] in READ_ONLY_DIRS:
            raise ToolError(f"{rel.parts[0]}/ is read-only to tools ({path!r}); it holds "
                            + ("the workbench's own records." if rel.parts[0] == ".workbench"
                               else "the repository's history."))
        if real == root:
            raise ToolError("The project folder itself cannot be written; name a file in it.")
    return real


def display(root: Path, path: Path) -> str:
    """`path` relative to the project, as the model should name it."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return str(path)
    return rel.as_posix() or "."

