"""The Context Inspector's rows and kept requests, as plain data: what the panel's flow
(app/inspector_flow.py) keeps between requests and how it tells they still hold."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from core.context.report import BuildReport
from core.context.report_text import LEFT_OUT
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
