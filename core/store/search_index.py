"""Search over a project's conversation logs through a per-conversation text index.

Beside each log, `search.txt` holds the searchable text of every entry (what a user reads:
message text, tool-call arguments, errors; never the JSON around it), case-folded
(str.casefold, every script) and separated by NUL characters. A search memory-maps it and looks
for the UTF-8 bytes of the folded needle: no JSON is parsed and nothing is folded at search
time, so a keystroke costs one substring scan in C per conversation.

The logs are append-only: `search.json` remembers how many bytes of the log the text covers and
a digest of the log's first bytes; before a search only what was appended since is read. A log
that shrank or whose beginning changed (a repair, a restore from backup) is indexed again from
the start. The files are a cache: missing or damaged, they are rebuilt; where they cannot be
written (a read-only project) the store reads the logs instead (see ConversationStore.search).

An FTS5 trigram index was measured first and rejected: slow to build, and 5x the text on disk,
for tool outputs that are most of a log's bytes.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from core import confined
from core.store.log import MAX_LOG

TEXT_FILE = "search.txt"
STATE_FILE = "search.json"
VERSION = 1
HEAD_BYTES = 4096  # a change in these means the log was rewritten, not appended to
SEPARATOR = "\x00"


def searchable(entry: dict[str, Any]) -> str:
    """The text of a raw log line a user could search for."""
    out: list[str] = []
    content = entry.get("content")
    if isinstance(content, str):
        out.append(content)
    elif isinstance(content, list):
        out += [str(p.get("text") or p.get("refusal") or "") for p in content
                if isinstance(p, dict)]
    for call in entry.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            out += [str(fn.get("name", "")), str(fn.get("arguments", ""))]
    error = entry.get("error")
    if isinstance(error, dict):
        out.append(str(error.get("message", "")))
    return "\n".join(out)


class SearchIndex:
    """Which conversations mention a text. One searcher at a time (the window searches on one
    background thread); appends to the logs may go on meanwhile."""

    def mentions(self, folder: Path, needle: str) -> bool:
        """Whether the conversation in `folder` contains `needle` (already case-folded).
        Raises OSError when its index cannot be brought up to date."""
        text = folder / TEXT_FILE
        self._catch_up(folder / "messages.jsonl", text, folder / STATE_FILE)
        if text.stat().st_size == 0:
            return False
        with confined.opened(text, MAX_LOG, root=None) as f, \
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(needle.encode("utf-8")) >= 0

    @staticmethod
    def _catch_up(log: Path, text: Path, state_path: Path) -> None:
        size = log.stat().st_size
        try:
            state = json.loads(confined.read(state_path, 2**16, root=None))
            offset, head = int(state["offset"]), str(state["head"])
            if state.get("version") != VERSION or not text.exists():
                raise ValueError("another version")
        except (OSError, ValueError, KeyError, TypeError):
            offset, head = 0, ""
        if offset == size and head:
            return  # the common case: nothing appended since the last search
        with confined.opened(log, MAX_LOG, root=None) as f:  # a FIFO there: refused at once
            first = f.read(HEAD_BYTES)
            if offset and (offset > size or _digest(first, offset) != head):
                offset = 0  # rewritten, not appended to: start again
            f.seek(offset)
            new = f.read(size - offset)
        end = new.rfind(b"\n") + 1  # a line still being written waits for the next search
        folded = "".join(body + SEPARATOR for body in _bodies(new[:end].splitlines()))
        with text.open("ab" if offset else "wb") as out:
            out.write(folded.encode("utf-8", "surrogatepass"))
        tmp = state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": VERSION, "offset": offset + end,
                                   "head": _digest(first, offset + end)}), encoding="utf-8")
        os.replace(tmp, state_path)


def _digest(first: bytes, covered: int) -> str:
    return hashlib.sha256(first[:min(covered, HEAD_BYTES)]).hexdigest()


def _bodies(lines: Iterable[bytes]) -> Iterable[str]:
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a damaged line: the store reports it when the conversation is opened
        if isinstance(entry, dict):
            body = searchable(entry).casefold()
            if body:
                yield body
