"""The incremental summary (compaction stage 4): what it covers, what the summarizer reads, and
whether its answer may stand in for the entries.

Pure planning; the engine's `summarize` step calls the model and appends the result. A summary
is a `kind=summary` entry whose `covers` lists the entries it stands for; the builder leaves
those out and puts the summary where the first of them was (see `BuildCache.prepare`), so
excluding the summary entry brings them all back. The log itself is never rewritten.

Incremental: a new summary merges only the entries no summary covers yet into the running one.
The previous summary is the summarizer's preamble (never re-summarized from its sources), and
the new entry's `covers` holds the previous summary's id and everything that one covered, so
undoing the new summary restores the previous one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from core.context.units import ToolRounds
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage

KEEP_ROUNDS = 2  # the newest rounds stay verbatim (as in the builder)
KEEP_SHARE = 0.3  # ... or, when those rounds are most of the conversation, this share of it
MIN_ENTRIES = 4  # fewer new entries than this: nothing worth summarizing
RESULT_CHARS = 1500  # of a tool output, head and tail, in what the summarizer reads
ARGUMENT_CHARS = 600
PAUSE_EVERY = 500  # entries between two pauses of a walk over the log (see `plan_summary`)

T = TypeVar("T")

SUMMARY_SYSTEM = """You maintain the running summary of a long working session between a user \
and an AI assistant that uses tools. The summary replaces the older part of the conversation \
in the assistant's context, so it must let the assistant carry on as if it had read it all.

Write it in Markdown with exactly these sections:
## User intent
What the user wants overall, with every constraint and preference they stated (quote them).
## Progress
What has been done, in order.
## Decisions and findings
What was decided or learned, and why.
## Errors and resolutions
What failed and how it was handled (or that it is unresolved).
## Current state
Where the work stands at the end of the part you summarize.
## Files
Every file read, created or changed, with its role (exact paths).
## Next steps
What remains, as the user asked for it.

Keep exact file paths, commands, identifiers, numbers and error messages. Do not invent \
anything; write "unknown" rather than guess. Be concise: {words} words at most."""

SECTIONS = ("User intent", "Progress", "Decisions and findings", "Errors and resolutions",
            "Current state", "Files", "Next steps")
MIN_SECTIONS = 4  # fewer of SECTIONS than this: not a summary (an error text, a chat answer)


def missing_sections(text: str) -> list[str]:
    """The sections of SECTIONS that `text` has no heading for (any heading level, or a bold
    line; any case)."""
    found = {m.group(1).lower() for m in re.finditer(
        r"^[ \t]*(?:#{1,6}[ \t]*|\*\*)?([A-Za-z][A-Za-z &]+?)[ \t]*(?:\*\*)?:?[ \t]*$",
        text, re.MULTILINE)}
    return [name for name in SECTIONS if name.lower() not in found]


SUMMARY_USER = """{previous}The entries to fold into the summary, oldest first:

{entries}

{focus}Write the updated summary now: the whole summary (previous content kept where it still \
holds), not only the new part."""


@dataclass
class SummaryPlan:
    """What a new summary covers.

    Attributes:
        previous: the summary in force, merged in as the preamble (None for the first one).
        entries: the entries no summary covers yet, to merge in (log order, tool groups whole).
        covers: the new summary's `covers`: the previous summary, what it covered, the entries.
        covered_tokens: what the covered part costs in a request today (previous summary
            included): a summary must be smaller to be kept.
    """

    previous: ConversationMessage | None
    entries: list[ConversationMessage]
    covers: list[str]
    covered_tokens: int


class NothingToSummarize(ValueError):
    """Too little history outside the recent rounds; the message says so."""


def active_summaries(history: list[ConversationMessage]) -> dict[str, str]:
    """Entry id -> the id of the summary that covers it (the latest one wins)."""
    covered: dict[str, str] = {}
    for m in history:
        if m.kind == "summary" and m.include_in_context and m.covers:
            for c in m.covers:
                covered[c] = m.id
    return covered


def _paused(items: Iterable[T], pause: Callable[[], None] | None) -> Iterator[T]:
    """`items`, calling `pause` every PAUSE_EVERY of them (when given)."""
    if pause is None:
        yield from items
        return
    for n, item in enumerate(items, start=1):
        if n % PAUSE_EVERY == 0:
            pause()
        yield item


def plan_summary(history: list[ConversationMessage], counter: TokenCounter,
                 keep_rounds: int = KEEP_ROUNDS,
                 pause: Callable[[], None] | None = None) -> SummaryPlan:
    """Choose the entries a new summary merges in: everything that takes part in the context,
    is not yet covered, and lies before the recent tail; pinned entries (with their whole tool
    round) and the latest user message stay verbatim.

    `pause`: called every PAUSE_EVERY entries of each walk over the log (the engine plans an
    automatic summary on its thread while the window paints; see
    `core.give_way`).

    Raises:
        NothingToSummarize: fewer than MIN_ENTRIES such entries.
    """
    covered = active_summaries(history)
    previous = None
    for m in reversed(history):
        if m.kind == "summary" and m.include_in_context and m.covers and m.id not in covered:
            previous = m
            break
    rounds = ToolRounds(history)
    rounds.uncover(covered)
    live = _live(history, covered, rounds, pause)
    costs = [_tokens(m, counter) for m in _paused(live, pause)]  # each entry counted once
    tail = _tail_start(live, keep_rounds, costs)
    last_user = max((k for k, m in enumerate(live) if m.role == "user"), default=-1)
    # a pin keeps its whole tool round verbatim, so the summary never splits a call from a result
    entries = [m for k, m in enumerate(live[:tail]) if not rounds.pinned(m) and k != last_user]
    if len(entries) < MIN_ENTRIES:
        raise NothingToSummarize(
            f"Only {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} lie outside the "
            f"last {keep_rounds} rounds and no summary covers them yet; there is nothing worth "
            "summarizing.")
    covers: list[str] = []
    tokens = 0
    if previous is not None:
        covers += [*(previous.covers or []), previous.id]
        tokens += counter.message(previous)
    covers += [m.id for m in entries]
    tokens += sum(costs[k] for k, m in enumerate(live[:tail])
                  if not rounds.pinned(m) and k != last_user)
    return SummaryPlan(previous, entries, covers, tokens)


def _live(history: list[ConversationMessage], covered: dict[str, str], rounds: ToolRounds,
          pause: Callable[[], None] | None) -> list[ConversationMessage]:
    """The entries that take part in the context and no summary covers yet."""
    return [m for m in _paused(history, pause) if m.include_in_context and m.id not in covered
            and m.kind in ("message", "error") and m.role != "system"
            and rounds.left_with_round(m) is None]


def _tokens(m: ConversationMessage, counter: TokenCounter) -> int:
    cached = m.token_counts.get(counter.encoding_name)
    return cached if cached is not None else counter.message(m)


def _tail_start(live: list[ConversationMessage], keep_rounds: int, costs: list[int]) -> int:
    """Where the verbatim tail begins: the last `keep_rounds` rounds, or, when those are most
    of the conversation (one request and hundreds of tool calls), the newest KEEP_SHARE of its
    tokens, never inside a tool group. `costs`: each live entry's tokens."""
    starts = [k for k, m in enumerate(live) if m.role == "user" and m.kind == "message"]
    by_rounds = starts[-keep_rounds] if len(starts) >= keep_rounds else 0
    total = sum(costs)
    if sum(costs[:by_rounds]) >= 0.5 * total:
        return by_rounds
    budget = KEEP_SHARE * total
    k, used = len(live), 0
    while k > 0 and used + costs[k - 1] <= budget:
        k -= 1
        used += costs[k]
    while 0 < k < len(live) and live[k].role == "tool":
        k -= 1  # a tool result stays with its call
    return k


def render(m: ConversationMessage) -> str:
    """One entry as the summarizer reads it: role, text, calls and results (long outputs as
    head and tail)."""
    if m.kind == "error" and m.error is not None:
        partial = f" after: {_clip(m.text(), RESULT_CHARS)}" if m.text() else ""
        return f"[failed request: {m.error.type}] {m.error.message}{partial}"
    if m.role == "tool":
        status = m.status or "done"
        code = f", exit {m.exit_code}" if m.exit_code is not None else ""
        body = _clip(m.text(), RESULT_CHARS)
        return f"[tool result {m.tool_name or ''} ({status}{code})]\n{body}"
    if m.kind == "summary":
        return f"[earlier summary]\n{m.text()}"
    out = f"[{m.role}]\n{m.text()}" if m.text() else f"[{m.role}]"
    for c in m.tool_calls or ():
        args = c.function.arguments
        try:
            args = json.dumps(json.loads(args), ensure_ascii=False)
        except ValueError:
            pass
        out += f"\n→ {c.function.name}({_clip(args, ARGUMENT_CHARS)})"
    return out


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-limit // 3:]
    return f"{head}\n[… {len(text) - len(head) - len(tail):,} characters …]\n{tail}"


def chunks(entries: list[ConversationMessage], room: int, counter: TokenCounter,
           pause: Callable[[], None] | None = None) -> list[str]:
    """The rendered entries in pieces of at most `room` tokens each (a huge conversation is
    merged in several calls, each one's summary the next one's preamble). `pause`: as in
    `plan_summary`."""
    out: list[str] = []
    part: list[str] = []
    used = 0
    for m in _paused(entries, pause):
        text = render(m)
        tokens = counter.text(text) + 2
        if tokens > room:  # one entry larger than the room: its head and tail only
            text = _clip(text, max(400, room * 3))
            tokens = counter.text(text) + 2
        if part and used + tokens > room:
            out.append("\n\n".join(part))
            part, used = [], 0
        part.append(text)
        used += tokens
    if part:
        out.append("\n\n".join(part))
    return out


def messages_for(previous: str, chunk: str, focus: str | None, words: int) -> list[dict[str, str]]:
    """The summarizer's request for one chunk."""
    preamble = (f"The summary so far (it already covers everything before the entries "
                f"below):\n\n{previous}\n\n" if previous else "")
    focus_text = (f"The user asks the summary to focus on: {focus.strip()}\n\n"
                  if focus and focus.strip() else "")
    return [{"role": "system", "content": SUMMARY_SYSTEM.format(words=words)},
            {"role": "user", "content": SUMMARY_USER.format(previous=preamble, entries=chunk,
                                                            focus=focus_text)}]


def summary_words(covered_tokens: int) -> int:
    """How long a summary may be: a fraction of what it covers, within sensible bounds."""
    return max(200, min(1500, covered_tokens // 8))
