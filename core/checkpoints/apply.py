"""Putting files back as a checkpoint has them: the one writer of a restore, and the roll
forward of a restore a crash interrupted (core.checkpoints.restore plans and journals them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from core.checkpoints.git import GitFailed

if TYPE_CHECKING:
    from core.checkpoints.store import Store


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
        dest = inside_project(store.root, path)
        if path in wanted:
            mode, sha = wanted[path]
            _write(dest, mode, blobs[sha])
        else:
            _remove(store.root, dest)
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
