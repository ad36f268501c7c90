"""One writer per project: an OS lock on the project's `.workbench/` folder itself.

The lock belongs to the open folder, so the OS releases it when the process dies, even on
SIGKILL: there are no stale locks to clean up. A second process (or a second window in the same
process) fails to take it and opens the project read-only instead.

The folder is locked rather than a file in it because a file can be deleted by accident (a
`git clean`, a tidy-up), and a lock on a deleted file holds nothing: a second process would make
a new one and write beside the first. `.workbench/lock` is still written, saying which process
holds the project (for the second one's message), and still locked too, so an older version of
the app that only knows the file stays out. Before each write, `lost()` checks that the folder at
the project's path is still the one locked (not moved away and replaced); where only the file can
be locked (Windows), that the file is still the one locked.
"""

from __future__ import annotations

import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = "lock"


class ProjectLock:
    """Attributes:
    folder: the folder locked (the project's `.workbench/`).
    path: the lock file in it.
    holder: what the lock file says about the process holding it, when we could not take it.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / LOCK_FILE
        self.holder: str | None = None
        self._fds: list[int] = []  # the folder's (where it can be locked), then the file's

    def acquire(self) -> bool:
        """Take the lock without waiting; False when another holder has it."""
        fds: list[int] = []
        try:
            if fcntl is not None:
                fds.append(os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY))
                _lock(fds[-1])
            fds.append(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644))
            _lock(fds[-1])
        except BlockingIOError:
            self.holder = _holder(self.path)
            _close(fds)
            return False
        except OSError:
            _close(fds)
            raise
        os.ftruncate(fds[-1], 0)
        os.pwrite(fds[-1], f"pid {os.getpid()}\n".encode(), 0)
        self._fds = fds
        return True

    def lost(self) -> str | None:
        """None while the lock still holds the project at its path; else why it does not."""
        if not self._fds:
            return None
        path = self.folder if fcntl is not None else self.path
        try:
            now = os.stat(path)
        except OSError:
            now = None
        mine = os.fstat(self._fds[0])
        if now is not None and (now.st_ino, now.st_dev) == (mine.st_ino, mine.st_dev):
            return None
        return (f"{path} was moved, deleted or replaced while this project was open, so "
                "another process may be writing to it now. Nothing more is saved here; "
                "reopen the project.")

    def release(self) -> None:
        _close(self._fds)  # closing the descriptors drops the locks
        self._fds = []

    @property
    def held(self) -> bool:
        return bool(self._fds)


def _holder(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(200).decode("utf-8", "replace").strip() or None
    except OSError:
        return None


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def _lock(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    else:  # pragma: no cover - Windows
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError as e:
            raise BlockingIOError(str(e)) from e
