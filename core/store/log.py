"""Reading and repairing `messages.jsonl`, the append-only conversation log.

A line is one `ConversationMessage` as JSON. A crash can leave a torn last line (no newline);
disk trouble or hand edits can leave garbage anywhere. Neither stops a conversation from opening:
the bad lines are moved aside to a `.corrupt-<timestamp>` file and reported, the rest loads.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from core import confined
from core.model import ConversationMessage
from core.store.fileio import atomic_write_bytes, quarantine

MAX_LOG = 8 * 2**30  # a log is read whole; a sparse giant under its name is refused unread

_many = TypeAdapter(list[ConversationMessage])


@dataclass
class LogReadResult:
    messages: list[ConversationMessage] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    quarantined_to: Path | None = None


def read_log(path: Path, *, repair: bool) -> LogReadResult:
    """Load every valid line of `path`.

    With `repair`, bad lines are quarantined and the log is rewritten without them so the next
    append lands on a clean line; without it (read-only projects) the file is left untouched.
    """
    result = LogReadResult()
    try:  # a regular file only: a folder from elsewhere can hold a FIFO under the log's name
        data = confined.read(path, MAX_LOG, root=None)
    except FileNotFoundError:
        return result
    if not data:
        return result

    torn = not data.endswith(b"\n")
    lines = data.split(b"\n")
    if not torn:
        lines.pop()  # the empty string after the final newline

    fast = _parse_all(lines)
    if fast is not None and not torn:
        result.messages = fast
        _drop_duplicates(result)
        return result

    bad: list[tuple[int, bytes]] = []
    good_lines: list[bytes] = []
    last = len(lines) - 1
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            msg = ConversationMessage.model_validate_json(raw)
        except ValidationError as e:
            bad.append((i + 1, raw))
            what = "an unfinished last line (the app was interrupted while writing it)"
            if not (torn and i == last):
                what = f"line {i + 1} could not be read ({_reason(e)})"
            result.problems.append(what)
            continue
        if torn and i == last:
            # Complete JSON that lost only its newline: keep it, but rewrite the file cleanly.
            pass
        result.messages.append(msg)
        good_lines.append(raw)

    if repair and (bad or torn):
        if bad:
            result.quarantined_to = quarantine(path, bad)
        body = b"".join(line + b"\n" for line in good_lines)
        atomic_write_bytes(path, body)
    if bad and result.quarantined_to is not None:
        result.problems.append(f"the unreadable lines were kept in {result.quarantined_to.name}")
    elif bad:
        result.problems.append("the project is read-only, so the file was left as it is")
    _drop_duplicates(result)
    return result


def _drop_duplicates(result: LogReadResult) -> None:
    """A line repeating an entry's id (a copy-paste, a tool that appended twice) would be shown
    and sent twice: the first stays, the repeats are skipped and reported. The file itself is
    not rewritten (the log is append-only), so nothing is lost."""
    seen: set[str] = set()
    kept: list[ConversationMessage] = []
    repeats = 0
    for msg in result.messages:
        if msg.id in seen:
            repeats += 1
            continue
        seen.add(msg.id)
        kept.append(msg)
    if repeats:
        result.messages = kept
        result.problems.append(
            f"{repeats} line{'s' if repeats > 1 else ''} repeated an earlier entry's id and "
            f"{'were' if repeats > 1 else 'was'} skipped (the first copy is kept)")


def ensure_clean_tail(path: Path) -> LogReadResult | None:
    """Before appending: if the file does not end in a newline, repair it first.

    Returns the repair report when one was needed, else None. Cheap: reads one byte.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    if size == 0:
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        last = os.pread(fd, 1, size - 1)
    finally:
        os.close(fd)
    if last == b"\n":
        return None
    return read_log(path, repair=True)


def encode_line(msg: ConversationMessage) -> bytes:
    """One log line. Text holding half a surrogate pair (Qt strings can, after a broken paste)
    is no Unicode and cannot be UTF-8: such a half becomes U+FFFD, the rest is kept as it is."""
    try:
        line = msg.model_dump_json(exclude_defaults=True).encode("utf-8")
    except PydanticSerializationError:
        text = json.dumps(msg.model_dump(mode="json", exclude_defaults=True),
                          ensure_ascii=False, separators=(",", ":"))
        line = without_lone_surrogates(text).encode("utf-8")
    return line + b"\n"


def without_lone_surrogates(text: str) -> str:
    """`text` with each lone surrogate (half of a UTF-16 pair) replaced by U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _parse_all(lines: list[bytes]) -> list[ConversationMessage] | None:
    """All lines in one validation call (the common, healthy case); None if any line is bad."""
    if any(not ln.strip() for ln in lines):
        return None
    try:
        msgs = _many.validate_json(b"[" + b",".join(lines) + b"]")
    except ValidationError:
        return None
    # Two broken halves can join into one valid object; a count mismatch sends us line by line.
    return msgs if len(msgs) == len(lines) else None


def _reason(e: ValidationError) -> str:
    err = e.errors()[0]
    if err.get("type") == "json_invalid":
        return "not valid JSON"
    loc = ".".join(str(x) for x in err.get("loc", ()))
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg
