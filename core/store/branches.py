"""Branches: a conversation forked from another at one of its entries.

A fork is a conversation of its own: its `messages.jsonl` starts with a byte copy of the
parent's lines up to the fork point (streamed file to file, never parsed or held in memory),
followed by what the user decided about that prefix later on (pins and exclusions of its
entries, summaries covering only its entries), so its first request is the parent's, byte for
byte, and providers' prompt caches hit. The parent's files are only read. The copy is written in
a hidden folder and renamed into place when complete (as an import is): a fork killed half-way
leaves nothing behind.

`conversation.json` names where the branch grew from: `branch_of` (the conversation whose own
entries continue past the fork point: a fork of a fork at a point inside the copied prefix
belongs to the original) and `branch_at` (the id of the last line both share, "" when they share
none). Conversations with the same pair are versions of each other at that point.
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from core import confined
from core.last_turn import in_dialogue
from core.model import ConversationMessage
from core.store.errors import StoreError, StoreWriteError, describe_os_error
from core.store.fileio import atomic_write_json
from core.store.log import MAX_LOG

CHUNK = 1 << 20
_ID = re.compile(rb'"id":"([^"]+)"')
BRANCH_SUFFIX = re.compile(r" \(branch(?: \d+)?\)$")


class NoSuchEntry(StoreError):
    """The fork point names no entry of the conversation."""


@dataclass(frozen=True)
class Cut:
    """Where a fork cuts its parent's log: the prefix is bytes [0, end); `last_id` is its last
    line's entry id ("" for an empty prefix)."""

    end: int
    last_id: str


def asked_at(messages: list[ConversationMessage], entry_id: str) -> ConversationMessage | None:
    """Where Regenerate branches for the answer `entry_id`: the entry its request ended in,
    the user's message, the results of the tool calls it followed (their batch comes along
    whole) or an answer it followed (a run asks again after an answer that did not complete
    its step, with a nudge that is not stored: `RunDriver.nudge`). Failed answers before it
    are passed over, as Retry left them out, and so is the answer it continues (a new
    version of a continued answer is a whole one). None when there is none before it."""
    at = next((i for i, m in enumerate(messages) if m.id == entry_id), None)
    if at is None:
        return None
    if messages[at].role in ("user", "tool") and messages[at].kind == "message":
        return messages[at]
    passed = {messages[at].continues}
    for m in reversed(messages[:at]):
        if not in_dialogue(m) or m.kind != "message" or m.id in passed:
            continue
        if m.role in ("user", "tool") or m.role == "assistant" and not m.tool_calls:
            return m
    return None


def find_cut(log: Path, entry_id: str, before: bool = False, results: bool = True) -> Cut:
    """The cut at `entry_id` (its line included; with `before`, excluded). With `results`, a
    call is never cut from its result: a cut inside a batch (at the answer that made the
    calls, at one of their results, or at a pin made while they ran) takes in all the
    batch's results, or, with `before`, is moved to just before the answer that made them.

    Raises:
        NoSuchEntry: no line of the log has that id.
    """
    with confined.opened(log, MAX_LOG, root=None) as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise NoSuchEntry(f"the conversation has no entry {entry_id[:12]}…")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            needle = b'"id":"' + entry_id.encode() + b'"'
            at = mm.find(needle)
            while at >= 0 and _id_at(mm, at) != entry_id:
                at = mm.find(needle, _line_end(mm, at))  # a tool call's id, not an entry's
            if at < 0:
                raise NoSuchEntry(f"the conversation has no entry {entry_id[:12]}…")
            end = _line_start(mm, at) if before else _line_end(mm, at)
            batch = _batch_before(mm, end) if results else None
            if batch is not None and (done := _with_results(mm, *batch)) > end:
                end = batch[0] if before else done  # the batch goes on past the cut
            return Cut(end, _last_id(mm, end))


def _line_start(mm: mmap.mmap, at: int) -> int:
    return mm.rfind(b"\n", 0, at) + 1


def _line_end(mm: mmap.mmap, at: int) -> int:
    nl = mm.find(b"\n", at)
    return len(mm) if nl < 0 else nl + 1


def _id_at(mm: mmap.mmap, at: int) -> str:
    """The entry id of the line holding `at` ("" when the line is not an entry)."""
    start, end = _line_start(mm, at), _line_end(mm, at)
    try:
        return ConversationMessage.model_validate_json(mm[start:end]).id
    except ValidationError:
        return ""


def _entry(mm: mmap.mmap, start: int, end: int) -> ConversationMessage | None:
    try:
        return ConversationMessage.model_validate_json(mm[start:end])
    except ValidationError:
        return None  # a line the log's reader skips too


def _batch_before(mm: mmap.mmap, end: int) -> tuple[int, int] | None:
    """The line [start, end) of the answer whose calls the dialogue before `end` ends in (its
    results and remarks such as a pin may follow it before `end`), or None."""
    while end > 0:
        start = _line_start(mm, end - 1)
        m = _entry(mm, start, end)
        if m is not None and in_dialogue(m) and m.role != "tool":
            return (start, end) if m.role == "assistant" and m.tool_calls else None
        end = start
    return None


def _with_results(mm: mmap.mmap, start: int, end: int) -> int:
    """`end` moved past the tool results that answer the calls of the line [start, end); the
    remarks among them (a pin made while a command ran) are passed over, not stopped at."""
    entry = _entry(mm, start, end)
    waiting = {c.id for c in entry.tool_calls or ()} if entry is not None else set()
    at = end
    while waiting and at < len(mm):
        nxt = _line_end(mm, at)
        m = _entry(mm, at, nxt)
        if m is not None and m.role == "tool" and m.tool_call_id in waiting:
            waiting.discard(m.tool_call_id)
            end = nxt
        elif m is not None and in_dialogue(m):
            break  # the dialogue went on: the calls left have no result
        at = nxt
    return end


def _last_id(mm: mmap.mmap, end: int) -> str:
    """The entry id of the last readable line before `end` ("" when there is none)."""
    while end > 0:
        start = mm.rfind(b"\n", 0, end - 1) + 1
        try:
            return ConversationMessage.model_validate_json(mm[start:end]).id
        except ValidationError:
            end = start  # a line the log's reader skips too
    return ""


def carried_over(log: Path, cut: Cut) -> bytes:
    """The lines after the cut that belong to the prefix: pins and exclusions of its entries,
    summaries that cover only its entries (in log order, as written). Only those lines are read
    (found by their kind), never the whole tail."""
    with confined.opened(log, MAX_LOG, root=None) as f:
        if os.fstat(f.fileno()).st_size <= cut.end:
            return b""
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            starts: set[int] = set()
            for kind in (b'"kind":"annotation"', b'"kind":"summary"'):
                at = mm.find(kind, cut.end)
                while at >= 0:
                    starts.add(_line_start(mm, at))
                    at = mm.find(kind, _line_end(mm, at))
            if not starts:
                return b""
            tail = [mm[a:_line_end(mm, a)] for a in sorted(starts)]
            ids = set(_ID.findall(mm, 0, cut.end))
    out = []
    for line in tail:
        try:
            m = ConversationMessage.model_validate_json(line)
        except ValidationError:
            continue
        if m.kind == "annotation" and m.target and m.target.encode() in ids or \
                m.kind == "summary" and m.covers and all(c.encode() in ids for c in m.covers):
            out.append(line if line.endswith(b"\n") else line + b"\n")
    return b"".join(out)


def copy_prefix(src: Path, dst: Path, end: int, extra: bytes) -> None:
    """Write bytes [0, end) of `src` and then `extra` to the new file `dst`, durably, a chunk at
    a time (the kernel copies where it can)."""
    with confined.opened(src, MAX_LOG, root=None) as fin, open(dst, "xb") as fout:
        left = end
        while left > 0:
            try:
                n = os.copy_file_range(fin.fileno(), fout.fileno(), min(left, 1 << 30))
            except (AttributeError, OSError):
                n = 0
            if n <= 0:  # not supported here: read and write
                fin.seek(end - left)
                fout.seek(end - left)
                while left > 0:
                    chunk = fin.read(min(left, CHUNK))
                    if not chunk:
                        break
                    fout.write(chunk)
                    left -= len(chunk)
                break
            left -= n
        if left:
            raise StoreWriteError("The conversation changed while it was forked; try again.")
        fout.seek(end)
        if end:
            fin.seek(end - 1)
            if fin.read(1) != b"\n":  # the log's last line, not yet ended
                fout.write(b"\n")
        fout.write(extra)
        fout.flush()
        os.fsync(fout.fileno())


def copy_cache(src: Path, dst: Path) -> None:
    """Copy a cache file (the kept compaction); one that cannot be copied is rebuilt later."""
    try:
        shutil.copyfile(src, dst)
    except OSError:
        pass


def write_failure(e: OSError) -> StoreWriteError:
    return StoreWriteError(f"Could not fork ({describe_os_error(e)}); nothing was created.",
                           e.errno, describe_os_error(e))


class Branchy(Protocol):
    """What of a conversation's details says where it grew from."""

    @property
    def branch_of(self) -> str | None: ...
    @property
    def branch_at(self) -> str | None: ...


def origin_of(conv_id: str, meta: Branchy, cut: Cut, log_of: Callable[[str], Path],
              meta_of: Callable[[str], Branchy]) -> str:
    """The conversation whose own entries go on past `cut` (a cut of `conv_id`'s log):
    `conv_id`, or, when the cut lies in the prefix a branch copied, what it grew from."""
    seen = {conv_id}
    while meta.branch_of is not None and meta.branch_at is not None:
        try:
            shared = find_cut(log_of(conv_id), meta.branch_at, results=False) \
                if meta.branch_at else Cut(0, "")
            parent = meta_of(meta.branch_of)
        except StoreError:
            break  # its origin is gone, or the point cannot be found: it is its own
        if cut.end > shared.end or meta.branch_of in seen:
            break
        conv_id = meta.branch_of
        seen.add(conv_id)
        meta = parent
    return conv_id


def answered_upstream(meta: Branchy, call_id: str, log_of: Callable[[str], Path],
                      meta_of: Callable[[str], Branchy]) -> bool:
    """Whether a conversation this one grew from (its parent, the parent's parent, …) holds
    a result of the call `call_id`: the call ran there, and a cut left its result out."""
    needle = b'"tool_call_id":"' + call_id.encode() + b'"'
    seen: set[str] = set()
    while meta.branch_of is not None and meta.branch_of not in seen:
        seen.add(meta.branch_of)
        try:
            with open(log_of(meta.branch_of), "rb") as f:
                if os.fstat(f.fileno()).st_size and _holds_result(f, needle, call_id):
                    return True
            meta = meta_of(meta.branch_of)
        except (OSError, StoreError):
            return False
    return False


def _holds_result(f: Any, needle: bytes, call_id: str) -> bool:
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        at = mm.find(needle)
        while at >= 0:
            m = _entry(mm, _line_start(mm, at), _line_end(mm, at))
            if m is not None and m.role == "tool" and m.tool_call_id == call_id:
                return True
            at = mm.find(needle, _line_end(mm, at))
    return False


def fill_branch(src: Path, cut: Cut, extra: bytes, view: Path, meta: dict[str, Any],
                folder: Path) -> None:
    """The branch's files in `folder` (see `fileio.write_staged`): the copied prefix with
    what is carried over, the kept compaction, its details."""
    copy_prefix(src, folder / "messages.jsonl", cut.end, extra)
    copy_cache(view, folder / view.name)
    atomic_write_json(folder / "conversation.json", meta)


def branch_title(origin_title: str, n: int) -> str:
    """The n-th branch's title: "<the origin's title> (branch n)", never "(branch) (branch)"."""
    return f"{BRANCH_SUFFIX.sub('', origin_title)} (branch {n})"
