"""Symbolic links inside a project's `.workbench/`: never ours, so never followed.

The app makes no links in its state folder. One there came with the folder (a clone, an
archive) and would turn the app's own reads and writes into reads and writes elsewhere: a
conversation log appended to `~/.bash_aliases`, a `tool-results` folder that lets
`read_tool_result` read any file, an MCP server's log appended outside, the checkpoint store's
`info/` rewriting another folder's files. When the project opens for writing, every link in the
state folder is removed (the link only: what it points at is not touched) and named in a
problem the window and the command line show; a `.workbench` that is itself a link is refused.
"""

from __future__ import annotations

import os
from pathlib import Path

MAX_ENTRIES = 200_000  # a state folder larger than this is not scanned further


def remove_links(state: Path, limit: int = MAX_ENTRIES) -> list[str]:
    """Remove every symbolic link under `state` (not following any); one sentence per link
    removed, naming where it pointed."""
    removed: list[str] = []
    seen = 0
    folders = [state]
    while folders and seen < limit:
        folder = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                if entry.is_symlink():
                    target = os.readlink(entry.path)
                    os.unlink(entry.path)
                    removed.append(f"{Path(entry.path).relative_to(state.parent)} -> {target}")
                elif entry.is_dir(follow_symlinks=False):
                    folders.append(Path(entry.path))
            except OSError:
                continue
    return removed
