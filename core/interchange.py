"""Import and export of conversations: OpenAI `messages[]`, our JSONL log, and Markdown.

Import validates the whole file before anything is written, so a bad file creates nothing.
Neither holds a key: imported entries are redacted as the log writer redacts every entry
(`core.log_writer.redact_entry`), and an export's text goes through `core.redact` too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core import confined
from core.confined import Refused
from core.context.normalize import ABORTED_RESULT
from core.json_text import document
from core.log_writer import redact_entry
from core.model import (
    ContentPart,
    ConversationMessage,
    FilePart,
    ImagePart,
    InputAudioPart,
    InvalidMessage,
    RefusalPart,
    TextPart,
    app_closed_entry,
)
from core.redact import redact
from core.store.log import encode_line

MAX_IMPORT_BYTES = 512 * 1024 * 1024
MAX_MESSAGE_DEPTH = 100  # far beyond any real message; the log's writer stops near 255
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class ImportProblem(ValueError):
    """The import file cannot be used as it is; the message says where and why."""


def read_import_file(
    path: Path, max_bytes: int = MAX_IMPORT_BYTES
) -> tuple[str, list[dict[str, Any]]]:
    """Read and check an import file. Returns (suggested title, raw OpenAI messages)."""
    text = _read_text(path, max_bytes)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ImportProblem(
            f"{path.name} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})"
        ) from None
    except RecursionError:
        raise ImportProblem(f"{path.name} is nested too deeply to be a conversation") from None
    if _SURROGATE_ESCAPE.search(text):
        _check_unicode(data, path.name)
    title = path.stem
    if isinstance(data, dict):
        if "messages" not in data:
            raise ImportProblem(
                f"{path.name} has no \"messages\" list; expected {{\"messages\": [...]}} or [...]"
            )
        title = str(data.get("title") or data.get("id") or title)
        title = title.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate: dropped
        data = data["messages"]
    if not isinstance(data, list):
        raise ImportProblem(f"{path.name}: \"messages\" must be a list of chat messages")
    for n, item in enumerate(data, start=1):
        if _depth(item) > MAX_MESSAGE_DEPTH:
            raise ImportProblem(
                f"{path.name}: message {n} is nested too deeply (more than "
                f"{MAX_MESSAGE_DEPTH} levels) to be a chat message")
    return title, data


def _read_text(path: Path, max_bytes: int) -> str:
    """The import file's text: a file the user named (it may be anywhere), but a regular file
    of at most `max_bytes`, refused unread otherwise (a FIFO or a device would never end)."""
    if path.is_dir():
        raise ImportProblem(f"{path} is a folder; give the JSON file to import")
    try:
        raw = confined.read(path, max_bytes, root=None, name=path.name)
    except Refused as e:
        raise ImportProblem(f"{e}; it is not imported") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ImportProblem(
            f"{path.name} is not UTF-8 text (bad byte at offset {e.start})") from None


def _depth(value: Any) -> int:
    """How many lists and objects deep `value` goes (without recursion: it may be deep)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_MESSAGE_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children
                     if isinstance(child, (dict, list)))
    return deepest


def _check_unicode(data: Any, name: str) -> None:
    """JSON may escape half of a surrogate pair (`\\ud800`), which is no character at all and
    cannot be written as UTF-8: refuse the file, naming the message, before anything is made."""
    items = data.get("messages") if isinstance(data, dict) else data
    for n, item in enumerate(items if isinstance(items, list) else [items], start=1):
        try:
            json.dumps(item, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ImportProblem(
                f"{name}: message {n} contains text that is not valid Unicode (a lone "
                "surrogate escape such as \\ud800)") from None


def read_import(path: Path, max_bytes: int = MAX_IMPORT_BYTES
                ) -> tuple[str, list[ConversationMessage]]:
    """A file to import, in any form we read: OpenAI JSON (`{"messages": [...]}` or `[...]`),
    our JSONL log (as `export --format jsonl` writes it: entries kept as they are, pins,
    exclusions and summaries included) or OpenAI messages one per line. Returns (suggested
    title, the entries); nothing is written.

    Raises:
        ImportProblem: the file cannot be used; the message says where and why.
    """
    if path.suffix.lower() != ".jsonl":
        try:
            title, raw = read_import_file(path, max_bytes)
            return title, _imported([redact_entry(m) for m in parse_openai_messages(raw)])
        except ImportProblem as e:
            if "Extra data" not in str(e):  # one JSON value per line is JSONL
                raise
    return path.stem, _imported([redact_entry(m) for m in _read_jsonl(path, max_bytes)])


def _imported(entries: list[ConversationMessage]) -> list[ConversationMessage]:
    """The usage an imported session carries is kept, marked as imported (`workbench usage`
    counts it apart: it was spent elsewhere); the log is made protocol-complete."""
    return _answered([m.model_copy(update={"usage": {**m.usage, "imported": True}})
                      if m.usage and not m.usage.get("imported") else m for m in entries])


def _answered(entries: list[ConversationMessage]) -> list[ConversationMessage]:
    """Every call answered before the next message of the user's or the model's, as our own
    log is: a result the file gives later joins its call, a call with none is answered as
    aborted (a crash's export with a message added, another tool's export). Only the batch
    the file ends with may still wait: the engine closes it when the conversation is next
    used, as after a crash here."""
    late = {m.tool_call_id: m for m in entries if m.role == "tool"}
    out: list[ConversationMessage] = []
    pending: list[tuple[str, str, ConversationMessage]] = []  # (call id, tool, its answer)
    moved: set[int] = set()
    for m in entries:
        if m.role == "tool":
            if id(m) in moved:
                continue
            pending = [p for p in pending if p[0] != m.tool_call_id]
        elif m.kind in ("message", "error") and m.role in ("user", "assistant") and pending:
            for call_id, name, asked in pending:
                result = late.get(call_id)
                if result is not None:
                    moved.add(id(result))
                    out.append(result)
                else:
                    out.append(ConversationMessage(
                        role="tool", tool_call_id=call_id, tool_name=name, status="aborted",
                        content=ABORTED_RESULT, mode=asked.mode, run_id=asked.run_id,
                        step_id=asked.step_id))
            pending = []
        out.append(m)
        pending += [(c.id, c.function.name, m) for c in m.tool_calls or []]
    return out


def _read_jsonl(path: Path, max_bytes: int) -> list[ConversationMessage]:
    text = _read_text(path, max_bytes)
    entries: list[ConversationMessage] = []
    openai: list[Any] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as e:
            raise ImportProblem(f"{path.name}: line {n} is not valid JSON "
                                f"({getattr(e, 'msg', 'nested too deeply')})") from None
        if not isinstance(item, dict) or _depth(item) > MAX_MESSAGE_DEPTH:
            raise ImportProblem(f"{path.name}: line {n} is not a chat message")
        if "id" in item and "created_at" in item:  # an entry of our log
            try:
                entries.append(ConversationMessage.model_validate(item))
            except ValidationError as e:
                first = e.errors()[0]
                raise ImportProblem(f"{path.name}: line {n}: {first['msg']}") from None
        else:
            openai.append(item)
    if entries and openai:
        raise ImportProblem(f"{path.name} mixes log entries and OpenAI messages")
    if not entries:
        return parse_openai_messages(openai)
    return entries


def parse_openai_messages(raw: Iterable[Any]) -> list[ConversationMessage]:
    """Validate OpenAI-format messages, including tool-call pairing.

    Raises:
        ImportProblem: naming the first bad message (1-based) and what is wrong with it.
    """
    out: list[ConversationMessage] = []
    issued: set[str] = set()
    answered: set[str] = set()
    for n, item in enumerate(raw, start=1):
        try:
            msg = ConversationMessage.from_openai(item)
        except InvalidMessage as e:
            raise ImportProblem(f"message {n}: {e}") from None
        if msg.tool_calls:
            issued.update(tc.id for tc in msg.tool_calls)
        if msg.role == "tool":
            call = msg.tool_call_id or ""
            if call not in issued:
                raise ImportProblem(
                    f"message {n} is a tool result for call {call!r}, but no earlier assistant "
                    "message made that call"
                )
            if call in answered:
                raise ImportProblem(f"message {n} answers tool call {call!r} a second time")
            answered.add(call)
        out.append(msg)
    if not out:
        raise ImportProblem("the file holds no messages")
    return out


def export_openai(messages: Iterable[ConversationMessage], title: str | None = None,
                  pending: str | None = None,
                  inline: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None
                  ) -> str:
    """OpenAI `messages[]` with every character the user saw: answers that were stopped, cut
    or interrupted keep their text, and a continued answer is one message (its parts joined).
    `pending` is the text of an answer a crashed app was receiving (not yet in the log);
    `inline` makes attached images the images themselves (AttachmentStore.inline), so the file
    stands on its own."""
    body: dict[str, Any] = {}
    if title:
        body["title"] = title
    out: list[dict[str, Any]] = []
    where: dict[str, int] = {}  # entry id -> index in `out` of the message holding its text
    for m in messages:
        if m.kind in ("notice", "annotation") or (
                m.kind == "error" and not m.text() and not m.tool_calls):
            continue
        target = where.get(m.continues) if m.continues else None
        if target is not None and m.role == "assistant":
            joined = out[target]
            if isinstance(joined.get("content"), list):
                joined["content"] = [*joined["content"], {"type": "text", "text": m.text()}]
            else:
                joined["content"] = (joined.get("content") or "") + m.text()
            if m.tool_calls:
                joined["tool_calls"] = joined.get("tool_calls", []) + \
                    [tc.model_dump() for tc in m.tool_calls]
            where[m.id] = target
            continue
        message = m.to_openai()
        if m.kind == "error":  # the text received before it failed, as the answer it was
            message = {"role": "assistant", "content": m.text() or None}
            if m.tool_calls:
                message["tool_calls"] = [tc.model_dump() for tc in m.tool_calls]
            else:
                message["content"] = m.text()
        where[m.id] = len(out)
        out.append(message)
    if pending:
        out.append({"role": "assistant", "content": pending})
    body["messages"] = inline(out) if inline is not None else out
    return redact(document(body) + "\n")


def export_jsonl(messages: Iterable[ConversationMessage], pending: str | None = None) -> str:
    """The log, line for line. `pending` (the text of an answer a crashed app was receiving)
    is added as the entry it becomes when the project is next opened for writing."""
    entries = list(messages)
    if pending is not None:
        entries.append(app_closed_entry(pending))
    return redact("".join(encode_line(m).decode("utf-8") for m in entries))


def export_markdown(messages: Iterable[ConversationMessage], title: str | None = None,
                    pending: str | None = None) -> str:
    lines: list[str] = [f"# {title}", ""] if title else []
    for m in messages:
        if m.kind == "annotation":
            continue  # its effect is on the entry it names (marked below)
        if m.kind == "error" and m.error is not None:
            lines += [f"## Error ({m.error.type})", "", f"> {m.error.message}", ""]
            if m.text() or m.tool_calls:
                lines += ["Partial answer:", ""]
                lines += _markdown_body(m)
            continue
        heading = {"user": "User", "assistant": "Assistant", "system": "System",
                   "tool": "Tool result"}[m.role]
        if m.kind == "summary":
            heading = "Summary"
        marks = [w for w, on in (("pinned", m.pinned),
                                 ("left out of the context", not m.include_in_context)) if on]
        if marks:
            heading += f" ({', '.join(marks)})"
        lines += [f"## {heading}", ""]
        if m.role == "tool":
            lines += [f"`{m.tool_call_id}`", "", _fence(m.text()), ""]
            continue
        lines += _markdown_body(m)
    if pending is not None:
        lines += ["## Pending answer", "",
                  "> The app closed while this answer was arriving; it becomes an entry when the "
                  "project is opened for writing.", ""]
        if pending:
            lines += [pending, ""]
    return redact("\n".join(lines).rstrip() + "\n")


def _markdown_body(m: ConversationMessage) -> list[str]:
    """Everything a message shows: its text, the parts that are not text, its tool calls."""
    lines: list[str] = []
    if isinstance(m.content, list):
        for part in m.content:
            shown = _markdown_part(part)
            if shown:
                lines += [shown, ""]
    elif m.text():
        lines += [m.text(), ""]
    for tc in m.tool_calls or []:
        lines += [f"**Tool call** `{tc.function.name}` (`{tc.id}`)", "",
                  _fence(_pretty(tc.function.arguments), "json"), ""]
    return lines


def _markdown_part(part: ContentPart) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, RefusalPart):
        return f"*Refused:* {part.refusal}"
    if isinstance(part, ImagePart):
        url = part.image_url if isinstance(part.image_url, str) else part.image_url.url
        if url.startswith("data:"):
            kind = url[5:].split(";", 1)[0].split(",", 1)[0] or "data"
            return f"*(an embedded image, {kind}, {len(url):,} characters)*"
        return f"![image]({url})"
    if isinstance(part, InputAudioPart):
        return f"*(audio, {part.input_audio.get('format', 'unknown format')})*"
    if isinstance(part, FilePart):
        name = part.file.get("filename") or part.file.get("file_id") or "embedded"
        return f"*(file: {name})*"
    return f"*({part.type} part)* " + _fence(
        json.dumps(part.model_dump(mode="json"), ensure_ascii=False, indent=2), "json")


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _pretty(args: str) -> str:
    try:
        return json.dumps(json.loads(args), indent=2, ensure_ascii=False)
    except ValueError:
        return args
