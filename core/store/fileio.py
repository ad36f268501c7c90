"""Durable file primitives: atomic JSON replacement, fsync'ed appends, quarantine of bad bytes.

Every write the store acknowledges has reached the disk: appends are fsync'ed before they return;
JSON files are written to a temp file, fsync'ed, renamed over the old one, and the directory is
fsync'ed so the rename itself survives a power cut.

No key is written: every JSON file (a conversation's details, the window's drafts, settings, the
request copies, caches) and every text file (an export) the app writes goes through
`core.redact` here. The conversation's log is appended already redacted (core.log_writer).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core import confined
from core.give_way import give_way
from core.redact import redact, redact_value

MAX_JSON = 256 * 2**20  # far beyond any state file of ours (a long conversation's view)


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in `path` durable (no-op where directories can't be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, durable: bool = True) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file.
    `durable=False` for a cache that is rebuilt when lost (no fsync: a wait on the window's
    thread for nothing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str, durable: bool = True) -> None:
    """`atomic_write_bytes` of `text` (UTF-8) without a key in it (`core.redact`)."""
    atomic_write_bytes(path, redact(text).encode("utf-8"), durable)


def atomic_write_json(path: Path, value: Any, indent: int | None = 2,
                      durable: bool = True) -> None:
    """Replace `path` with `value` as JSON, every string in it without a key."""
    text = json.dumps(redact_value(value), indent=indent, ensure_ascii=False, default=str)
    atomic_write_bytes(path, (text + "\n").encode("utf-8"), durable)


PIECE = 128  # list items encoded per call (see json_in_pieces)


def json_in_pieces(value: Any) -> Iterator[str]:
    """Compact JSON of `value`, the text `json.dumps` gives, made a few hundred list items at
    a time. The C encoder holds the GIL for a whole call: one call over a 10,000-entry build
    report keeps every other thread (the window's) waiting until it ends; in pieces, they get
    their turn between two (and the window's, when busy, first: `core.give_way`)."""
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        yield "{"
        for k, (key, item) in enumerate(value.items()):
            yield ("" if k == 0 else ", ") + json.dumps(key, ensure_ascii=False) + ": "
            yield from json_in_pieces(item)
        yield "}"
    elif isinstance(value, list | tuple) and len(value) > PIECE:
        yield "["
        for start in range(0, len(value), PIECE):
            if start:
                give_way()
            part = json.dumps(redact_value(value[start:start + PIECE]), ensure_ascii=False,
                              default=str)
            yield ("" if start == 0 else ", ") + part[1:-1]
        yield "]"
    else:
        yield json.dumps(redact_value(value), ensure_ascii=False, default=str)


def atomic_write_json_in_pieces(path: Path, value: Any, durable: bool = True) -> None:
    """`atomic_write_json(path, value, indent=None)` (keys redacted too) without holding the
    GIL for long (see json_in_pieces): for large files written off the window's thread."""
    atomic_write_bytes(path, ("".join(json_in_pieces(value)) + "\n").encode("utf-8"), durable)


def read_json(path: Path) -> Any:
    """Read a JSON file, a regular one of at most MAX_JSON bytes (a folder from elsewhere can
    hold a FIFO or a link to /dev/zero under a state file's name: refused, never read).

    Raises:
        OSError (confined.Refused among them), UnicodeDecodeError or json.JSONDecodeError.
    """
    return json.loads(confined.read(path, MAX_JSON, root=None).decode("utf-8"))


def append_durably(path: Path, data: bytes) -> None:
    """Append `data` and return only after it is on disk.

    All or nothing: when the write or the fsync fails (a full disk, an I/O error), the file is
    truncated back to its size before the call, so no torn line is left behind, and the error
    is raised.
    """
    # O_NOFOLLOW: a log that is a link (a folder from elsewhere) is never appended through
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        start = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, start)
                os.fsync(fd)
            except OSError:
                pass  # the next open repairs a torn tail (quarantine), nothing is lost
            raise
    finally:
        os.close(fd)


def timestamp_tag() -> str:
    """A filesystem-safe UTC timestamp for naming quarantine files."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


def quarantine(original: Path, chunks: list[tuple[int, bytes]]) -> Path:
    """Keep the bytes we could not load beside `original`, with the line numbers they came from.

    The quarantine file is itself written durably before the caller rewrites the original, so
    the bad bytes are never lost, only moved aside.
    """
    target = original.with_name(f"{original.name}.corrupt-{timestamp_tag()}")
    n = 0
    while target.exists():  # two repairs in the same microsecond: keep both
        n += 1
        target = original.with_name(f"{original.name}.corrupt-{timestamp_tag()}-{n}")
    body = bytearray()
    for line_no, raw in chunks:
        body += f"# line {line_no} of {original.name}\n".encode()
        body += raw
        body += b"\n"
    atomic_write_bytes(target, bytes(body))
    return target


def write_staged(staging: Path, target: Path, fill: Callable[[Path], None], what: str) -> None:
    """Make the folder `target` whole in the hidden folder `staging` (`fill` writes its files)
    and rename it into place: a failure or an interrupt (a kill: the hidden folder, removed on
    the next open) never leaves a half-made `target`.

    Raises:
        StoreWriteError: "Could not <what> (why); nothing was created."
    """
    from core.store.errors import StoreWriteError, describe_os_error

    try:
        staging.mkdir(parents=True)
        fill(staging)
        os.rename(staging, target)
        fsync_dir(target.parent)
    except OSError as e:
        shutil.rmtree(staging, ignore_errors=True)
        raise StoreWriteError(f"Could not {what} ({describe_os_error(e)}); nothing was created.",
                              e.errno, describe_os_error(e)) from e
    except BaseException:  # anything else (an interrupt too): still nothing half made
        shutil.rmtree(staging, ignore_errors=True)
        raise
