"""Large tool results: written whole to `.workbench/tool-results/`, previewed in the log.

A result over the threshold (about 4,000 tokens) is kept on disk whole; the log entry keeps a
head+tail preview cut at line boundaries (so never mid-character) with a marker saying what was
left out and how to read it: `read_tool_result("<id>")`. A preview is made once, from the full
output, so nothing is ever truncated twice. A command's output arrives as a file and is never
read into memory whole.
"""

from __future__ import annotations

import io
import os
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from pydantic import Field

from core import confined
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage, Offload
from core.redact import environment_secrets, redact, redact_bytes
from core.tools.base import (
    RESULTS_DIR,
    Tool,
    ToolArgs,
    ToolContext,
    ToolError,
    ToolOutput,
)
from core.tools.base import safe_name as _safe

OFFLOAD_TOKENS = 4000  # a result over this many tokens is offloaded
PREVIEW_BYTES = 4000  # of the head, and again of the tail, in an offloaded result's preview
MAX_KEPT_BYTES = 2**30  # a kept output is at most what a command may print (256 MB) and more
PAGE_CHARS = 12_000  # what one read_file / read_tool_result call returns at most (~3k tokens)
LINE_CHARS = 2000  # a longer line is cut in a page


def offload_file(state: Path, offload: Offload) -> Path | None:
    """Where an offloaded output is, or None when the entry names a place outside
    `.workbench/tool-results/` (an imported or edited log must not point tools elsewhere)."""
    folder = (state / RESULTS_DIR).resolve()
    path = (state / offload.path).resolve()
    return path if path.is_relative_to(folder) else None


def _new_result(ctx: ToolContext) -> Path:
    """A file name for a call's full output that no other output has: the call id (for
    people) and a random part (ids repeat)."""
    ctx.results_dir.mkdir(parents=True, exist_ok=True)
    return ctx.results_dir / f"{_safe(ctx.call_id)[:100]}-{secrets.token_hex(4)}.txt"


@dataclass
class Kept:
    """A tool result as the log keeps it."""

    content: str
    offload: Offload | None = None


Secrets = Callable[[], Iterable[str]]


def keep(output: ToolOutput, ctx: ToolContext, counter: TokenCounter,
         threshold: int = OFFLOAD_TOKENS, secrets: Secrets | None = None) -> Kept:
    """The log's version of `output`: itself when small, else a preview of what went to disk.
    What goes to disk holds no key: neither one of `secrets()` (the keys in use, as the log
    writer knows them; by default the environment's) nor anything key-shaped."""
    keys = list(secrets()) if secrets is not None else list(environment_secrets(os.environ))
    if output.file is not None:
        return _keep_file(output, ctx, counter, threshold, keys)
    text = output.text
    if not _over(text, counter, threshold):
        return Kept(text)
    text = redact(text, keys)
    target = _new_result(ctx)
    try:
        target.write_text(text, encoding="utf-8", errors="replace")
    except OSError as e:  # a full disk: the preview is kept, the full output cannot be
        target.unlink(missing_ok=True)
        return Kept(_not_kept(text[:PREVIEW_BYTES], text[-PREVIEW_BYTES:], len(text), e))
    return Kept(preview(target, target.stem), _offload(ctx, target))


def _keep_file(output: ToolOutput, ctx: ToolContext, counter: TokenCounter,
               threshold: int, keys: list[str]) -> Kept:
    assert output.file is not None
    path = output.file
    size = path.stat().st_size
    if size <= threshold * 8:  # small enough to look at: count it
        raw = path.read_bytes()
        text = _decode(raw)
        whole = output.header + text
        if not _over(whole, counter, threshold):
            path.unlink(missing_ok=True)
            return Kept(whole)
    target = _new_result(ctx)
    try:
        with open(target, "wb") as out, open(path, "rb") as src:
            out.write(output.header.encode("utf-8"))
            _copy_redacted(src, out, keys)
        path.unlink(missing_ok=True)
    except OSError as e:  # a full disk: nothing half-written stays to keep it full
        target.unlink(missing_ok=True)
        with open(path, "rb") as src:
            head = src.read(PREVIEW_BYTES).decode("utf-8", errors="replace")
            src.seek(max(0, size - PREVIEW_BYTES))
            tail = src.read().decode("utf-8", errors="replace")
        path.unlink(missing_ok=True)
        return Kept(_not_kept(output.header + head, tail, size, e))
    return Kept(preview(target, target.stem), _offload(ctx, target))


def _copy_redacted(src: BinaryIO, out: BinaryIO, keys: list[str]) -> None:
    """Copy `src` to `out` without keys, a megabyte at a time cut at line ends (a key never
    spans two pieces)."""
    rest = b""
    while chunk := src.read(1 << 20):
        chunk = rest + chunk
        cut = chunk.rfind(b"\n") + 1
        if cut == 0 and len(chunk) < 8 << 20:  # no line end yet: wait for one (within reason)
            rest = chunk
            continue
        piece, rest = (chunk[:cut], chunk[cut:]) if cut else (chunk, b"")
        out.write(redact_bytes(piece, keys))
    if rest:
        out.write(redact_bytes(rest, keys))


def _not_kept(head: str, tail: str, size: int, error: OSError) -> str:
    """What the log keeps of an output that could not be kept whole."""
    return (f"{head}\n… the full output ({size:,} bytes) could not be kept "
            f"({error.strerror or error}); only its beginning and end are here …\n{tail}")


def _offload(ctx: ToolContext, target: Path) -> Offload:
    return Offload(path=target.relative_to(ctx.state).as_posix(), size=target.stat().st_size)


def _over(text: str, counter: TokenCounter, threshold: int) -> bool:
    if len(text) <= threshold:  # a token is at least one character
        return False
    if len(text) > threshold * 8:
        return True
    return counter.text(text) > threshold


def _decode(raw: bytes) -> str:
    if b"\x00" in raw[:8192]:
        return f"(binary output, {len(raw):,} bytes; not shown)"
    return raw.decode("utf-8", errors="replace")


def preview(path: Path, ref: str, head_bytes: int = PREVIEW_BYTES,
            tail_bytes: int = PREVIEW_BYTES) -> str:
    """Head and tail of the file at line boundaries, with the marker between them."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(head_bytes)
        if b"\x00" in head:
            return (f"(binary output, {size:,} bytes; not shown. The whole output is kept: "
                    f'read_tool_result("{ref}"))')
        lines = _count_lines(f, head)
        cut = head.rfind(b"\n")
        head = head[:cut + 1] if cut >= head_bytes // 4 else head[:_char_boundary(head)]
        start = max(len(head), size - tail_bytes)
        f.seek(start)
        tail = f.read()
    if start > len(head):
        nl = tail.find(b"\n")
        tail = tail[nl + 1:] if 0 <= nl < len(tail) - 1 else tail[_lead_boundary(tail):]
    omitted = size - len(head) - len(tail)
    shown_lines = head.count(b"\n") + tail.count(b"\n")
    marker = (f"\n… {max(lines - shown_lines, 0):,} lines / ~{omitted // 4:,} tokens omitted; "
              f'full output: read_tool_result("{ref}")\n')
    return head.decode("utf-8", errors="replace") + marker + tail.decode("utf-8",
                                                                         errors="replace")


def _count_lines(f: BinaryIO, head: bytes) -> int:
    count = head.count(b"\n")
    while chunk := f.read(1 << 20):
        count += chunk.count(b"\n")
    return count + 1


def _char_boundary(data: bytes) -> int:
    """The largest cut <= len(data) that does not split a UTF-8 character."""
    i = len(data)
    while i > 0 and i > len(data) - 4 and (data[i - 1] & 0xC0) == 0x80:
        i -= 1
    if i > 0 and data[i - 1] >= 0xC0:  # a lead byte whose continuation was cut off
        i -= 1
    return i


def _lead_boundary(data: bytes) -> int:
    i = 0
    while i < min(4, len(data)) and (data[i] & 0xC0) == 0x80:
        i += 1
    return i


def page(lines: Iterable[str], offset: int, limit: int, what: str,
         budget: int = PAGE_CHARS) -> str:
    """Lines `offset`.. (1-based) numbered like `cat -n`, at most `limit` lines and `budget`
    characters, ending with how to read on when there is more."""
    out: list[str] = []
    used = 0
    last = offset - 1
    more = False
    total = 0
    for number, line in enumerate(lines, start=1):
        total = number
        if number < offset:
            continue
        if number >= offset + limit or used > budget:
            more = True
            continue  # keep counting for the total
        line = line.rstrip("\n")
        if len(line) > LINE_CHARS:
            line = line[:LINE_CHARS] + f" … ({len(line) - LINE_CHARS:,} more characters)"
        entry = f"{number:>6}\t{line}"
        out.append(entry)
        used += len(entry) + 1
        last = number
    if total < offset:
        if total == 0:
            return f"({what} is empty)"
        raise ToolError(f"offset {offset} is past the end of {what} ({total:,} lines).")
    text = "\n".join(out)
    if more:
        text += (f"\n… lines {last + 1:,}-{total:,} of {total:,} not shown; call again with "
                 f"offset={last + 1} to read on.")
    return text


def kept_output(state: Path, offload: Offload) -> BinaryIO:
    """A kept output, open (the caller closes it): a regular file of `.workbench/tool-results/`
    only, read by the confined reader (a log or a folder from elsewhere can name a FIFO there,
    which would block whoever opened it).

    Raises:
        confined.Refused: it is outside that folder, gone, or not a regular file.
    """
    full = offload_file(state, offload)
    if full is None:
        raise confined.Refused(f"{offload.path} is outside .workbench/tool-results/", "outside")
    return confined.opened(full, MAX_KEPT_BYTES, root=state / RESULTS_DIR, name=offload.path)


class ReadResultArgs(ToolArgs):
    ref: str = Field(description="The id given in an omitted-output marker (the tool call id), "
                                 "or the id of a log entry holding a tool result.")
    offset: int = Field(default=1, ge=1, description="First line to read (1-based).")
    limit: int = Field(default=400, ge=1, le=5000, description="How many lines to read.")


async def read_tool_result(args: ReadResultArgs, ctx: ToolContext) -> ToolOutput:
    entry = _entry(ctx.history, args.ref)
    if entry is None:
        raise ToolError(f"No tool output is known as {args.ref!r}; use the id from the "
                        "omitted-output marker.")
    if entry.offload is not None:
        try:
            kept = kept_output(ctx.state, entry.offload)
        except confined.Refused as e:
            if e.missing:
                raise ToolError(f"The full output of {args.ref!r} is no longer on disk "
                                f"({entry.offload.path}); only its preview is in the "
                                "conversation.") from None
            raise ToolError(f"The output of {args.ref!r}: {e}; it is not read.") from None
        with io.TextIOWrapper(kept, encoding="utf-8", errors="replace", newline=None) as text:
            return ToolOutput(page(text, args.offset, args.limit, "that output"))
    return ToolOutput(page(iter(entry.text().splitlines()), args.offset, args.limit,
                           "that output"))


def _entry(history: list[ConversationMessage], ref: str) -> ConversationMessage | None:
    """The tool result of this conversation `ref` names: its full output's name (what a
    preview's marker says), its entry id, or its call id (the latest with that id)."""
    tools = [m for m in reversed(history) if m.role == "tool"]
    return next((m for m in tools if m.offload is not None
                 and Path(m.offload.path).stem == ref), None) or \
        next((m for m in tools if ref in (m.id, m.tool_call_id)), None)


READ_TOOL_RESULT = Tool(
    "read_tool_result",
    "Read a tool output that was too long to show whole (its marker names the id), or any "
    "earlier tool result by log entry id, a page of numbered lines at a time.",
    ReadResultArgs, "read", read_tool_result, key_arg="ref")
