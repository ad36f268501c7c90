"""The project's files as @-mentions offer them: paths inside the project folder, with what git
would ignore left out (the `.gitignore` files of the folder and its subfolders, read with
pathspec, the library git's own rules are implemented in), `.git/` and `.workbench/` skipped,
symbolic links not followed out of the folder. Only regular files are offered (a FIFO, a
device, a link out of the folder: choosing one could block or send what is not the project's),
and never a file that usually holds a secret (`.env*`, `*.pem`, `*.key`, `id_*`).
"""

from __future__ import annotations

import fnmatch
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from core import confined
from core.tools.paths import IGNORED_DIRS

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec


SKIPPED = IGNORED_DIRS  # .git and .workbench, as the file tools skip them
MAX_FILES = 20_000  # a mention list longer than this is not read further (said by `cut`)
SECRETS = (".env*", "*.pem", "*.key", "id_*")  # never offered: keys and credentials
MAX_GITIGNORE = 2**20


def _spec(folder: Path) -> GitIgnoreSpec | None:
    from pathspec import GitIgnoreSpec  # when files are listed, not when the window opens

    try:
        data = confined.read(folder / ".gitignore", MAX_GITIGNORE, root=folder)
    except OSError:  # none, or not a file of the folder (a FIFO would block the listing)
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
    return GitIgnoreSpec.from_lines(lines)


def project_files(root: Path, limit: int = MAX_FILES) -> tuple[list[str], bool]:
    """The project's files as POSIX paths relative to `root`, sorted folder by folder; and
    whether the list stopped at `limit`."""
    out: list[str] = []
    real_root = root.resolve()
    specs: list[tuple[str, GitIgnoreSpec]] = []  # (folder relative to root, its .gitignore)

    def ignored(rel: str, is_dir: bool) -> bool:
        for base, spec in specs:
            if base and not rel.startswith(base + "/"):
                continue
            inner = rel[len(base) + 1:] if base else rel
            if spec.match_file(inner + "/" if is_dir else inner):
                return True
        return False

    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        base = here.relative_to(root).as_posix()
        base = "" if base == "." else base
        spec = _spec(here)
        if spec is not None:
            specs.append((base, spec))
        kept_dirs = []
        for d in sorted(dirs):
            rel = f"{base}/{d}" if base else d
            if d in SKIPPED or (here / d).is_symlink() or ignored(rel, True):
                continue
            kept_dirs.append(d)
        dirs[:] = kept_dirs
        for name in sorted(files):
            rel = f"{base}/{name}" if base else name
            if not ignored(rel, False) and _offered(real_root, here / name):
                out.append(rel)
                if len(out) >= limit:
                    return out, True
    return out, False


def _offered(root: Path, path: Path) -> bool:
    """A regular file inside `root` (a link to one counts), not one that holds secrets."""
    if any(fnmatch.fnmatch(path.name, pattern) for pattern in SECRETS):
        return False
    try:
        if path.is_symlink():  # (the walk follows no folder link: only the file can be one)
            path = confined.inside(root, path)
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:  # out of the project (confined.Refused), gone, a loop of links
        return False
