"""The sandbox's stand-ins: what bubblewrap leaves in the project for a protected path that did
not exist (`.git` in a folder that is not a repository). bubblewrap makes the mount point on the
host, so while a command runs an empty read-only folder is there; it is removed after the
command, and when the project opens, in case the app was killed during one.

Its own module (no imports of ours) so that opening a project and running a command both use it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path


def remove_stand_ins(root: Path, absent: list[Path] | None = None) -> None:
    """Remove what stood in for protected paths that did not exist (`absent`; by default the
    project's `.git`, as the project opens): an empty folder, or an empty file (what older
    versions made). Both are nothing to git (an empty file only breaks it: "invalid gitfile
    format"), so removing one a user made loses nothing; anything with content stays."""
    for path in absent if absent is not None else [root / ".git"]:
        with contextlib.suppress(OSError):
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                path.rmdir()  # only when empty
            elif stat.S_ISREG(info.st_mode) and info.st_size == 0:
                path.unlink()
