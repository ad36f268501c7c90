"""The Context Inspector's rows and kept requests, as plain data: what the panel's flow
(app/inspector_flow.py) keeps between requests and how it tells they still hold."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from core.context.report import BuildReport
from core.context.report_text import LEFT_OUT, summary_size
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage

Rows = list[tuple[int, str, str, str, int, int, str, str]]
# A report's rows with the log they were numbered against: (report, its length, the id of its
# last entry, rows). The log only grows at its end, so they hold for a longer log with the same
# start (an entry keeps its number; the report has no row for an entry appended after it).
KeptRows = tuple[BuildReport, int, str, Rows]


def sent_at(path: Path, unknown: str) -> str:
    """When the kept request at `path` was sent (its file's time), else `unknown`."""
    try:
        return datetime.fromtimestamp(path.stat().st_mtime).strftime("%H:%M:%S")
    except OSError:
        return unknown


def label(path: Path) -> str:
    return f"Sent at {sent_at(path, path.stem)}"


def holds(kept: KeptRows, messages: list[ConversationMessage]) -> bool:
    """The rows were numbered against the start of this log (see KeptRows)."""
    return same_start(messages, kept[1], kept[2])


def same_start(messages: list[ConversationMessage], length: int, last: str) -> bool:
    """The log still starts with the `length` entries it had, `last` the last of them."""
    return len(messages) >= length and (length == 0 or messages[length - 1].id == last)


def left_out(rows: Rows) -> dict[str, str]:
    """Entry id -> why the request leaves it out (the model view's dimmed rows)."""
    return {r[1]: r[2] for r in rows if r[2] in LEFT_OUT or r[2] == "excluded"}


def summary_lines(messages: list[ConversationMessage], counter: TokenCounter,
                  report: BuildReport) -> list[tuple[str, str, bool, str]]:
    """The compaction history's lines: (entry id, one line, in force, a sentence on its size)
    per summary; its size is the one its notice gave when it landed."""
    lines = []
    for m in messages:
        if m.kind == "summary":
            tokens, said = summary_size(m, counter, report)
            lines.append((m.id, f"{m.created_at.astimezone():%H:%M} · "
                                f"{len(m.covers or ()):,} entries"
                                f"{' · ' + m.model if m.model else ''} · {tokens:,} tokens",
                          m.include_in_context, said))
    return lines


class EntryNumbers:
    """Entry id -> its number in the log. Kept from one request to the next: the log only grows
    at its end, so only the new entries are numbered. Read on the meter's thread and the
    window's: the dict is only ever added to, with the numbers it would have anyway; a log with
    another start gets a new one."""

    def __init__(self) -> None:
        self._seen: tuple[int, str, dict[str, int]] = (0, "", {})

    def of(self, messages: list[ConversationMessage]) -> dict[str, int]:
        length, last, positions = self._seen
        if not same_start(messages, length, last):
            length, positions = 0, {}
        for n in range(length, len(messages)):
            positions[messages[n].id] = n + 1
        self._seen = (len(messages), messages[-1].id if messages else "", positions)
        return positions
