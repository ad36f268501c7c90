"""Putting files back as a checkpoint has them: the one writer of a restore (a restore
planned and journaled by core.checkpoints.restore, or one a crash interrupted, rolled forward
by core.checkpoints.store).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from core.checkpoints.git import GitFailed, ShadowGit


def apply(git: ShadowGit, wanted: dict[str, tuple[str, str]], paths: list[str],
          progress: Callable[[int], None] | None) -> None:
    """Make each of `paths` in the project (`git.root`) what it is in the target checkpoint:
    `wanted` has (mode, blob) for those of them it holds (`Store.entries`); the others are
    deleted. Idempotent: running it again after a crash finishes the job. Deletions go first
    (a file may become a folder)."""
    blobs = git.blobs([sha for _mode, sha in wanted.values()])
    order = sorted(paths, key=lambda p: (p in wanted, p))
    for done, path in enumerate(order, 1):
        dest = inside_project(git.root, path)
        if path in wanted:
            mode, sha = wanted[path]
            _write(dest, mode, blobs[sha])
        else:
            _remove(git.root, dest)
        if progress is not None:
            progress(done)


def inside_project(root: Path, path: str) -> Path:
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
