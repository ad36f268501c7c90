"""One writer per project: an OS file lock on `.workbench/lock`.

The lock belongs to the open file, so the OS releases it when the process dies, even on SIGKILL:
there are no stale locks to clean up. A second process (or a second window in the same process)
fails to take it and opens the project read-only instead.
"""

from __future__ import annotations

import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class ProjectLock:
    """Attributes:
    path: the lock file.
    holder: what the lock file says about the process holding it, when we could not take it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.holder: str | None = None
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock without waiting; False when another holder has it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _lock(fd)
        except OSError:
            try:
                self.holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or None
            finally:
                os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def _lock(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    else:  # pragma: no cover - Windows
        import msvcrt

        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
