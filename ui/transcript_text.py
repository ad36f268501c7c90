"""What a transcript row shows as text: its body, how it is clipped, its header line."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import datetime
from functools import lru_cache

from core.cost import money
from core.model import ConversationMessage
from ui.transcript_model import Row, RowKind, main_argument

COLLAPSED_LINES = 40  # longer messages show this many lines until expanded
CARD_PREVIEW_LINES = 3
PREVIEW_LINE_CHARS = 140  # a card's preview line longer than this is cut with "…"
MAX_SHOWN_CHARS = 200_000  # an expanded row shows at most this much; Copy gives everything
LONG_LINE_CHARS = 4000  # a collapsed message's single line longer than this is cut at a word

def body_text(row: Row) -> str:
    if row.kind is RowKind.TOOL:
        result = row.result.text() if row.result is not None else ""
        if not row.expanded:
            if row.result is not None:
                return result
            # waiting or running: the header says which (and for how long), over this text
            # that stays as it is (a card that starts is not laid out again)
            return "(no result yet)"
        args = row.call.function.arguments if row.call else ""
        try:
            args = json.dumps(json.loads(args), indent=2, ensure_ascii=False)
        except ValueError:
            pass
        return f"Arguments:\n{args}\n\nResult:\n{result}" if row.call else result
    if row.kind is RowKind.ERROR and row.message is not None and row.message.error is not None:
        if row.message.error.type == "stopped":  # the header says it; the text is what matters
            return row.text or "(stopped before any text arrived)"
        msg = row.message.error.message
        return f"{msg}\n\nPartial answer kept:\n{row.text}" if row.text else msg
    return row.text


def clip(row: Row, body: str) -> tuple[str, int]:
    """The text to lay out, and how many lines were left out of it. The answer being streamed
    is never clipped: its end is what the user is reading."""
    if row.expanded or row.kind is RowKind.STREAMING:
        if len(body) > MAX_SHOWN_CHARS:
            rest = len(body) - MAX_SHOWN_CHARS
            return body[:MAX_SHOWN_CHARS] + f"\n… {rest:,} more characters (Copy gives all)", 0
        return body, 0
    limit = {RowKind.TOOL: CARD_PREVIEW_LINES, RowKind.SYSTEM: 2}.get(row.kind, COLLAPSED_LINES)
    lines = body.split("\n", limit + 1)
    width = LONG_LINE_CHARS if row.kind is not RowKind.TOOL else PREVIEW_LINE_CHARS
    if len(lines) <= limit and all(len(ln) <= width for ln in lines):
        return body, 0
    hidden = body.count("\n") + 1 - limit
    shown = "\n".join(ln if len(ln) <= width else _cut(ln, width) for ln in lines[:limit])
    return shown, max(hidden, 1)


def _cut(line: str, width: int) -> str:
    """`line` shortened to about `width` characters, at a space when there is one nearby."""
    space = line.rfind(" ", width * 3 // 4, width)
    return line[: space if space > 0 else width] + " …"


def truncated(row: Row, body: str) -> bool:
    return clip(replace(row, expanded=False), body)[1] > 0


def header_line(row: Row) -> tuple[str, str]:
    """The row's title and its right-aligned details (with pinned / excluded marks)."""
    title, meta = _header(row)
    marks = []
    m = row.message
    if row.pinned:
        marks.append("★ pinned")  # a glyph every common font has
    if m is not None and not m.include_in_context:
        marks.append("⊘ not sent" if m.kind != "summary" else "⊘ undone")
    if m is not None and m.step_id is not None:
        marks.append(f"▸ {m.step_id}")
    if marks:
        meta = " · ".join([*marks, meta] if meta else marks)
    return title, meta


def _header(row: Row) -> tuple[str, str]:
    m = row.message
    when = _clock(m.created_at) if m is not None else ""
    if row.kind is RowKind.USER:
        return "You", when
    if row.kind is RowKind.ASSISTANT:
        model = f"{m.model} · " if m is not None and m.model else ""
        resumed = " · resumed after an interruption" if row.resumed else ""
        return "Assistant", f"{model}{spent(m)}{when}{resumed}"
    if row.kind is RowKind.STREAMING:
        return "Assistant", row.note or "streaming…"
    if row.kind is RowKind.SYSTEM:
        return _system_header(m, when)
    if row.kind is RowKind.ERROR:
        kind = m.error.type.replace("_", " ") if m is not None and m.error else "error"
        if kind == "stopped":
            return "■ Stopped by you", when
        return f"⚠ Error: {kind}", when
    # tool card
    if row.call is None:
        return f"⚙ tool result {m.tool_call_id if m else ''}", when
    arg = main_argument(row.call)
    return f"⚙ {row.call.function.name}  {arg}", _tool_status(row)


@lru_cache(maxsize=1024)
def _clock(at: datetime) -> str:
    """An entry's time of day as its row's header shows it (every paint of a running card
    shows it again)."""
    return at.astimezone().strftime("%H:%M")


def _system_header(m: ConversationMessage | None, when: str) -> tuple[str, str]:
    """A summary's (what it covers, what it cost), a notice's or a run's, the system prompt's."""
    if m is not None and m.kind == "summary":
        covered = len(m.covers or ())
        by = f" · {m.model}" if m.model else ""
        return f"∑ {covered:,} earlier entries summarized", f"{spent(m)}{when}{by}"
    if m is not None and m.kind == "notice":
        return ("▶ Run" if m.run_event is not None else "Notice"), when
    return "System prompt", when


def _tool_status(row: Row) -> str:
    """A tool card's state: waiting, running (a spinner and the time so far), or how it ended
    (its exit code, how long it took, the full output's size on disk)."""
    status = "waiting"
    if row.running_since is not None:
        elapsed = max(0.0, time.time() - row.running_since)
        status = f"{SPINNER[int(elapsed * 4) % len(SPINNER)]} running {elapsed:.0f} s"
    if row.result is not None:
        r = row.result
        st = r.status or "ok"
        status = {"ok": "✓ done", "error": "✗ failed", "aborted": "⊘ aborted",
                  "denied": "✕ denied"}.get(st, st)
        if r.exit_code is not None:
            status += f" · exit {r.exit_code}"
        if r.duration_ms is not None:
            status += f" · {_duration(r.duration_ms)}"
        if r.offload is not None:
            status += f" · {_size(r.offload.size)} on disk"
    return status


SPINNER = "◐◓◑◒"


def spent(m: ConversationMessage | None) -> str:
    """An answer's tokens and cost, small, before its time ("1,234 tokens · $0.0021 · "); a
    usage the provider did not report is marked "≈" (we counted it)."""
    if m is None or not m.usage:
        return ""
    usage = m.usage
    about = "≈" if usage.get("estimated") else ""
    tokens = sum(int(usage.get(k) or 0) for k in ("prompt_tokens", "completion_tokens"))
    said = f"{about}{tokens:,} tokens · " if tokens else ""
    if m.cost_usd is not None:
        said += f"{about}{money(m.cost_usd)} · "
    return said


def _duration(ms: int) -> str:
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n:,} bytes"
    value = float(n)
    for unit in ("KB", "MB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} GB"


def code_blocks(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a markdown answer: (language, code), in order. An unclosed
    fence (an answer cut off mid-block) runs to the end."""
    blocks: list[tuple[str, str]] = []
    fence: str | None = None
    lang = ""
    body: list[str] = []
    for line in text.split("\n"):
        stripped = line.strip()
        if fence is None:
            if stripped.startswith(("```", "~~~")):
                marker = stripped[0]
                count = len(stripped) - len(stripped.lstrip(marker))
                fence = marker * count
                lang = stripped[count:].strip().split(" ")[0]
                body = []
        elif stripped.startswith(fence) and stripped.strip(fence[0]) == "":
            blocks.append((lang, "\n".join(body)))
            fence = None
        else:
            body.append(line)
    if fence is not None and body:
        blocks.append((lang, "\n".join(body)))
    return blocks


_BLOCK_START = ("#", ">", "|", "- ", "* ", "+ ", "```", "~~~", "    ", "\t")


def _plain_line(line: str) -> bool:
    """A line of a paragraph (not a heading, quote, table row, list item, fence, indented
    code or a blank line)."""
    stripped = line.lstrip(" ")
    if not stripped or line.startswith(("    ", "\t")) or stripped.startswith(_BLOCK_START):
        return False
    head = stripped.split(" ", 1)[0]
    return not (head[:-1].isdigit() and head[-1:] in ".)")  # "1." or "1)": a numbered item


def keep_line_breaks(text: str) -> str:
    """Markdown joins the lines of a paragraph into one; an answer's single line breaks (a
    poem, an address, lines the model put one under the other) stay as written: a hard break
    is added between two paragraph lines, outside code fences."""
    lines = text.split("\n")
    fence: str | None = None
    for i, line in enumerate(lines[:-1]):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else fence or marker
            continue
        if fence is None and _plain_line(line) and _plain_line(lines[i + 1]) and \
                not line.endswith(("  ", "\\")):
            lines[i] = line + "  "
    return "\n".join(lines)
