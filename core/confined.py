"""The one reader of a file the project names (or the user names), checked before it is read.

A project folder comes from anywhere (a clone), so what it names is not trusted: AGENTS.md can
be a symbolic link to a key outside the folder, an attachment a named pipe that blocks every
read, a run file a link to /dev/zero that never ends. `read` is how every such file is read:

- inside the project: the path is resolved (links followed, `..` collapsed) and must stay in
  the project folder, and the file opened must be the one that was checked;
- a regular file only: it is opened without blocking and without following a link swapped in
  at the last moment, and the open file is examined (`fstat`), so a FIFO, a device or a socket
  is refused at once, never read;
- capped: the size the open file states is checked before a byte is read (a sparse 1 GB file
  costs nothing to refuse), and no more than the cap is read even if the file grows meanwhile.

A path the user names themselves (`send --attach`, a file dialog, `import`) may be outside the
project (`root=None`) but is still a regular file and capped; so are the app's own state files
under `.workbench/` (a copied project folder can hold a FIFO under a log's name). `opened` is the
same check for a reader that pages through a large file instead of taking it whole.

Whatever is refused raises `Refused`, whose text is a sentence for the user without a final
period ("pipe.md is a named pipe (FIFO), not a file"), so each caller adds what follows ("; it
is not sent"); a missing file raises `Missing`, a `Refused` that is also a FileNotFoundError.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO, Literal

Reason = Literal["outside", "missing", "kind", "size", "unreadable"]


class Refused(OSError):
    """A file that was not read; `str(e)` says which and why, in plain words.

    It is an OSError, so a caller that treats an unreadable file as absent keeps doing so.

    Attributes:
        reason: "outside" (the project), "missing", "kind" (not a regular file), "size" (over
            the cap) or "unreadable" (the system's reason), for a caller that adds advice.
    """

    def __init__(self, sentence: str, reason: Reason) -> None:
        super().__init__(sentence)
        self.reason = reason

    @property
    def missing(self) -> bool:
        """The file does not exist (a caller may treat that as "no file")."""
        return self.reason == "missing"

    def __str__(self) -> str:
        return str(self.args[0])


class Missing(Refused, FileNotFoundError):
    """A file that does not exist: still a refusal with its sentence, and caught where a caller
    treats a missing file as "none" (`except FileNotFoundError`)."""

    def __init__(self, sentence: str) -> None:
        super().__init__(sentence, "missing")


def size_text(n: int) -> str:
    """A size as people read it: 1.0 GB, 20 MB, 3.4 KB, 12 bytes."""
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= scale:
            value = n / scale
            return f"{value:,.0f} {unit}" if value == int(value) and unit != "GB" \
                else f"{value:,.1f} {unit}"
    return f"{n:,} bytes"


def kind_of(mode: int) -> str | None:
    """What a file that is not a regular file is (a FIFO, a device, a socket), else None.
    Reading one can block for ever, never end, or do something other than reading a file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def inside(root: Path, path: Path | str, name: str | None = None) -> Path:
    """The real path of `path` (relative to `root`, or absolute), which must be in `root`.

    Raises:
        Refused: it leads outside `root`, through a symbolic link or `..`.
    """
    root = root.resolve()
    candidate = root / path
    shown = name or str(path)
    try:
        real = candidate.resolve()
    except (OSError, RuntimeError) as e:  # a loop of links
        raise Refused(f"{shown} cannot be resolved ({e})", "unreadable") from None
    if not real.is_relative_to(root):
        how = "a symbolic link" if os.path.normpath(candidate).startswith(str(root) + os.sep) \
            else "'..' or an absolute path"
        raise Refused(f"{shown} leads outside the project folder ({how})", "outside")
    return real


def read(path: Path | str, limit: int, *, root: Path | None, name: str | None = None) -> bytes:
    """The whole content of the regular file `path`, which is at most `limit` bytes.

    Args:
        path: relative to `root`, or absolute.
        limit: the most bytes the caller takes; a larger file is refused by its size.
        root: the project folder the file must be in; None for a path the user named
            themselves, which may be anywhere (it is still a regular file, and capped).
        name: how the file is called in the sentence (its path as given by default).

    Raises:
        Refused: outside the project, missing, not a regular file, larger than `limit`, or
            unreadable; the text says which.
    """
    shown = name or str(path)
    with opened(path, limit, root=root, name=name) as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise Refused(f"{shown} could not be read ({e.strerror or e})", "unreadable") \
                from None
    if len(data) > limit:  # it grew after fstat
        raise Refused(too_large(shown, len(data), limit, more=True), "size")
    return data


def opened(path: Path | str, limit: int, *, root: Path | None,
           name: str | None = None) -> BinaryIO:
    """The regular file `path`, open for reading, checked as `read` checks it: for a reader
    that goes through a large file a page at a time. The caller closes it (`with`).

    Raises:
        Refused: as `read` does.
    """
    shown = name or str(path)
    real = inside(root, path, shown) if root is not None else _real(Path(path), shown)
    try:
        # O_NONBLOCK: opening a FIFO without a writer returns at once (and is refused below);
        # O_NOFOLLOW: a link put in place of the checked file after `inside` is not followed.
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
                     | (os.O_NOCTTY if hasattr(os, "O_NOCTTY") else 0))
    except FileNotFoundError:
        raise Missing(f"{shown} does not exist") from None
    except OSError as e:
        raise Refused(*_why_not_opened(real, shown, e)) from None
    try:
        info = os.fstat(fd)
        kind = kind_of(info.st_mode)
        if kind is not None:
            raise Refused(f"{shown} is {kind}, not a file", "kind")
        if root is not None:
            _still_inside(fd, root.resolve(), shown)
        if info.st_size > limit:
            raise Refused(too_large(shown, info.st_size, limit), "size")
        os.set_blocking(fd, True)  # a regular file: reads never block anyway
        return os.fdopen(fd, "rb")
    except Refused:
        os.close(fd)
        raise
    except OSError as e:
        os.close(fd)
        raise Refused(f"{shown} could not be read ({e.strerror or e})", "unreadable") from None


def _real(path: Path, shown: str) -> Path:
    """A path the user named, its links followed (theirs to choose; what they lead to is
    checked as the file)."""
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError) as e:
        raise Refused(f"{shown} cannot be resolved ({e})", "unreadable") from None


def too_large(name: str, size: int, limit: int, more: bool = False) -> str:
    return f"{name} is {'over ' if more else ''}{size_text(size)}: larger than the " \
        f"{size_text(limit)} limit"


def _why_not_opened(path: Path, shown: str, e: OSError) -> tuple[str, Reason]:
    """The sentence for a file that could not even be opened: a socket (ENXIO), a link
    swapped in (ELOOP), or the system's reason."""
    try:
        info = os.lstat(path)
    except OSError:
        return f"{shown} could not be read ({e.strerror or e})", "unreadable"
    if stat.S_ISLNK(info.st_mode):
        return f"{shown} was replaced by a symbolic link while it was read", "outside"
    kind = kind_of(info.st_mode)
    if kind is not None:
        return f"{shown} is {kind}, not a file", "kind"
    return f"{shown} could not be read ({e.strerror or e})", "unreadable"


def _still_inside(fd: int, root: Path, shown: str) -> None:
    """The file opened is in the project: a folder on its path swapped for a link between
    the check and the open would have led elsewhere. (Linux names an open file's path in
    /proc; elsewhere the check before the open stands alone.)"""
    try:
        where = Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return
    if not where.is_relative_to(root):
        raise Refused(f"{shown} leads outside the project folder (a folder on its path was "
                      "replaced by a symbolic link)", "outside")
