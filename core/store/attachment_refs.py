"""How a log refers to an attached image: its image part's URL is `attachment:<sha256>.<ext>`,
naming the file of that name in `.workbench/attachments/` (core.attachments keeps the bytes and
makes the parts); and the images a conversation moved to the trash takes with it.
"""

from __future__ import annotations

import mmap
import os
import re
from pathlib import Path

from core import confined
from core.store.log import MAX_LOG

SCHEME = "attachment:"
REF = re.compile(r"[0-9a-f]{64}\.(?:png|jpg|gif|webp)")  # its content's SHA-256, its type
_LOGGED_REF = re.compile(rb"attachment:([0-9a-f]{64}\.(?:png|jpg|gif|webp))")


def _refs_in(log: Path) -> set[bytes]:
    try:
        with confined.opened(log, MAX_LOG, root=None) as f, \
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return set(_LOGGED_REF.findall(m))
    except (OSError, ValueError):  # gone, or empty (an empty file cannot be mapped)
        return set()


def _mentions(log: Path, refs: set[bytes]) -> set[bytes]:
    try:
        with confined.opened(log, MAX_LOG, root=None) as f, \
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return {r for r in refs if m.find(r) >= 0}
    except (OSError, ValueError):
        return set()


def trash_unused(folder: Path, deleted_log: Path, other_logs: list[Path], into: Path
                 ) -> list[str]:
    """After a conversation went to the trash (its log now `deleted_log`): the images only it
    used go with it (to `into`, beside its log), those another conversation uses stay.
    Returns the references moved."""
    refs = _refs_in(deleted_log)
    for log in other_logs:
        if not refs:
            break
        refs -= _mentions(log, refs)
    moved = []
    for ref in sorted(r.decode() for r in refs):
        src = folder / ref
        if not src.is_file():
            continue
        try:
            into.mkdir(parents=True, exist_ok=True)
            os.replace(src, into / ref)
        except OSError:
            continue  # kept where it is: nothing is lost
        moved.append(ref)
    return moved
