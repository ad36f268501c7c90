"""The transcript's rows, built from log entries without Qt: user, assistant text, error,
system, and one *tool card* per tool call that carries both the call and, once it arrives, its
result (the list model in transcript_model.py shows them)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

from core.model import ConversationMessage, ToolCall
from ui.message_parts import with_parts


class RowKind(Enum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    ERROR = "error"
    SYSTEM = "system"
    STREAMING = "streaming"


@dataclass
class Row:
    """One visible row. `key` is stable across reloads (message id, or call id for cards)."""

    kind: RowKind
    key: str
    message: ConversationMessage | None = None
    call: ToolCall | None = None
    result: ConversationMessage | None = None
    text: str = ""
    expanded: bool = False
    note: str = ""  # shown in a streaming row's header (e.g. "retrying in 5 s")
    resumed: bool = False  # the row joins an answer and its continuation(s)
    superseded: bool = False  # rows came after it: its Continue / Retry no longer apply
    version: int = 0  # bumped on every change: part of the delegate's layout cache key
    running_since: float | None = None  # a tool card whose call is running (time.time())
    versions: tuple[int, int] | None = None  # (n, of): where branches part, this is version n
    found: str = ""  # a search's text, marked where it occurs in the row

    @property
    def pinned(self) -> bool:
        """Sent whole whatever the budget: a tool card stands for its call and its result, and
        either one pinned (`workbench pin` takes one entry) pins the card."""
        return bool(self.message is not None and self.message.pinned
                    or self.result is not None and self.result.pinned)

    def copy_text(self) -> str:
        """What Copy puts on the clipboard."""
        if self.kind is RowKind.TOOL and self.call is not None:
            args = self.call.function.arguments
            out = f"{self.call.function.name}({args})"
            if self.result is not None:
                out += "\n\n" + self.result.text()
            return out
        return self.text


def main_argument(call: ToolCall) -> str:
    """The one argument that says what a tool call is about (a path, a query, a command)."""
    try:
        args = json.loads(call.function.arguments or "{}")
    except ValueError:
        return call.function.arguments[:80]
    if not isinstance(args, dict) or not args:
        return ""
    for key in ("path", "file_path", "file", "command", "cmd", "query", "pattern", "url", "id"):
        if key in args:
            return str(args[key])[:120]
    key, value = next(iter(args.items()))
    return f"{key}={value}"[:120]


def rows_from_messages(messages: list[ConversationMessage]) -> list[Row]:
    rows: list[Row] = []
    for m in messages:
        append_rows(rows, m, {})
    return rows


def append_rows(rows: list[Row], m: ConversationMessage, cards: dict[str, int]) -> list[int]:
    """Add `m`'s rows; returns the indexes of existing rows that changed (tool results, or the
    answer a continuation joins)."""
    if _continues_last(rows, m):
        # A continuation reads as one answer with the part it continues; the log keeps both.
        last = rows[-1]
        last.text += m.text()
        last.message = m
        last.kind = RowKind.ERROR if m.kind == "error" else RowKind.ASSISTANT
        last.resumed = True
        last.version += 1
        return [len(rows) - 1]
    if m.kind == "annotation":
        return []  # its effect shows on the entry it names
    if m.kind == "error":
        rows.append(Row(RowKind.ERROR, m.id, message=m, text=m.text()))
        return []
    if m.role == "tool":
        return _append_result(rows, m, cards)
    if m.role == "system":
        # (a summary's size is said where it is counted: its notice and the Inspector's
        # compaction history, calibrated as every figure)
        rows.append(Row(RowKind.SYSTEM, m.id, message=m, text=m.text()))
        return []
    kind = RowKind.USER if m.role == "user" else RowKind.ASSISTANT
    if m.text() or not m.tool_calls:
        rows.append(Row(kind, m.id, message=m,
                        text=with_parts(m) if isinstance(m.content, list) else m.text()))
    for call in m.tool_calls or []:
        cards[call.id] = len(rows)
        rows.append(Row(RowKind.TOOL, f"{m.id}:{call.id}", message=m, call=call))
    return []


def _continues_last(rows: list[Row], m: ConversationMessage) -> bool:
    """`m` is an answer (without tool calls) that continues the answer or error shown last."""
    return bool(m.continues and m.role == "assistant" and not m.tool_calls and rows
                and rows[-1].message is not None and rows[-1].message.id == m.continues
                and rows[-1].kind in (RowKind.ERROR, RowKind.ASSISTANT))


def _append_result(rows: list[Row], m: ConversationMessage, cards: dict[str, int]
                   ) -> list[int]:
    """A tool's result joins its call's card (returned as changed); without one, a card of
    its own."""
    call_id = m.tool_call_id or ""
    index = cards.get(call_id)
    if index is None:  # search back: cards map is only kept for the live model
        index = next((i for i in range(len(rows) - 1, -1, -1)
                      if (call := rows[i].call) is not None and call.id == call_id), None)
    if index is not None and rows[index].result is None:
        rows[index].result = m
        rows[index].running_since = None
        rows[index].version += 1
        return [index]
    rows.append(Row(RowKind.TOOL, m.id, message=m, result=m, text=m.text()))
    return []
