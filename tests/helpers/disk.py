"""A disk that fills up: the operating system as the log's appends see it.

Only `core.store.fileio`'s `os.write` is replaced (appends; atomic JSON files are written another
way), so a test can make exactly the Nth append run out of space, optionally after writing half
of its bytes (a torn line, as a real ENOSPC can leave).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from core.store import fileio


class _FillingDisk:
    def __init__(self, failing: set[int], torn: bool) -> None:
        self.calls = 0
        self.failing = failing
        self.torn = torn

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)

    def write(self, fd: int, data: bytes) -> int:
        self.calls += 1
        if self.calls not in self.failing:
            return os.write(fd, data)
        if self.torn:
            os.write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")


@contextmanager
def disk_full(monkeypatch: pytest.MonkeyPatch, *, from_write: int = 1, only: bool = False,
              torn: bool = False) -> Iterator[None]:
    """Appends fail with ENOSPC from the `from_write`-th write on (or only that one); the disk
    has room again when the block ends."""
    failing = {from_write} if only else set(range(from_write, 10**6))
    monkeypatch.setattr(fileio, "os", _FillingDisk(failing, torn))
    try:
        yield
    finally:
        monkeypatch.setattr(fileio, "os", os)


@contextmanager
def json_files_fail(monkeypatch: pytest.MonkeyPatch, code: int = errno.ENOSPC) -> Iterator[None]:
    """Every JSON file the store replaces (settings, conversation details, the window's state)
    fails with `code` (a full disk by default) until the block ends."""
    real = fileio.atomic_write_bytes

    def failing(path: object, data: bytes, durable: bool = True) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(fileio, "atomic_write_bytes", failing)
    try:
        yield
    finally:
        monkeypatch.setattr(fileio, "atomic_write_bytes", real)
