"""Project instructions: the project's AGENTS.md (or CLAUDE.md when there is no AGENTS.md).

AGENTS.md is the cross-tool convention (Codex and others read it; Claude Code reads CLAUDE.md)
for what a project wants every assistant to know: how to build and test, the house rules. Only
the file at the project's root is read (nested ones are not). It becomes its own part of every
mode's system prefix, after our rules and before the mode's part (see
core.context.prompts), so switching modes never moves it and the prompt-cache prefix stays.

The file is read again only when its size or modification time changes; a file past
MAX_CHARS is cut to its first MAX_CHARS characters, and the request and the Inspector say so.
A conversation may turn the part off (`project_instructions` in its conversation.json).
"""

from __future__ import annotations

import stat
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

from core import confined
from core.confined import Refused
from core.redact import redact

FILES = ("AGENTS.md", "CLAUDE.md")
# About 6,000 tokens: a project's instructions are meant to be short, and they are sent with
# every request.
MAX_CHARS = 24_000
MAX_BYTES = 2 * 2**20  # a larger file is refused unread (it would be cut to MAX_CHARS anyway)
HEADING = "Project instructions (from {name} in the project folder; follow them):"


@dataclass(frozen=True)
class Instructions:
    """The part as sent.

    Attributes:
        name: the file read (AGENTS.md or CLAUDE.md).
        text: the part's text, heading included (what the system prefix carries).
        chars: the file's length in characters; cut: only the first MAX_CHARS were taken.
        fingerprint: a checksum of `text`, nonzero: a change makes a new compaction, the
            reason named (core.context.view).
    """

    name: str
    text: str
    chars: int
    cut: bool
    fingerprint: int

    @property
    def notice(self) -> str:
        """What the user is told about the part besides its cost ("" when nothing)."""
        if not self.cut:
            return ""
        return (f"{self.name} has {self.chars:,} characters; only the first {MAX_CHARS:,} are "
                "sent")


def make(name: str, content: str) -> Instructions | None:
    """The part for a file's `content` (None when it has nothing but blank space)."""
    body = redact(content.replace("\r\n", "\n")).strip()  # a key written there is not sent
    if not body:
        return None
    cut = len(body) > MAX_CHARS
    if cut:
        body = body[:MAX_CHARS].rstrip() + (
            f"\n\n[{name} is cut here: it has {len(content):,} characters, the first "
            f"{MAX_CHARS:,} are included.]")
    text = HEADING.format(name=name) + "\n\n" + body
    return Instructions(name, text, len(content), cut, zlib.crc32(text.encode()) or 1)


class InstructionFile:
    """The instructions of one project folder, read when they change (safe across threads)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._stamp: tuple[str, int, int] | None = None
        self._read: Instructions | None = None
        self.problem = ""  # why the file could not be used, for the user ("" when it could)
        self._lock = threading.Lock()

    def current(self) -> Instructions | None:
        """The project's instructions as the file is now (None when there is no file)."""
        for name in FILES:
            try:
                st = (self.root / name).stat()
            except OSError:  # none, or a link to nothing: the next name
                continue
            if stat.S_ISDIR(st.st_mode):
                continue
            stamp = (name, st.st_mtime_ns, st.st_size)
            with self._lock:
                if stamp != self._stamp:
                    self._read, self.problem = _read(self.root, name)
                    self._stamp = stamp
                return self._read
        with self._lock:
            self._stamp, self._read, self.problem = None, None, ""
        return None


def _read(root: Path, name: str) -> tuple[Instructions | None, str]:
    # Read through the confined reader: a cloned project's AGENTS.md can be a link to a key
    # outside it, a FIFO or a sparse giant; the cut takes MAX_CHARS, so more is never needed.
    try:
        data = confined.read(name, MAX_BYTES, root=root)
    except Refused as e:
        return None, f"{e}; it is not sent."
    if b"\0" in data[:8192]:
        return None, f"{name} is not a text file; it is not sent."
    try:
        content = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, f"{name} is not UTF-8 text; it is not sent."
    return make(name, content), ""
