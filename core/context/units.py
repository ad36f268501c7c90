"""Units: what request building decides over. A unit is one candidate, or an assistant tool
call together with its results, so no stage can separate a call from what answered it."""

from __future__ import annotations

from dataclasses import dataclass

from core.model import ConversationMessage

PROTECTED_TOOLS = frozenset({"manage_todo_list", "TodoWrite"})


@dataclass(slots=True)
class Unit:
    """One or more candidates that stay together (an assistant tool call and its results)."""

    items: list[int]  # indexes into the candidate list
    round_no: int
    tokens: int
    protected: bool  # pinned or summary
    latest_user: bool = False
    user: bool = False
    tool: str = ""  # the protected tool it calls (the todo list), if any


def group_units(cands: list[tuple[ConversationMessage, int]], start: int = 0,
                round_no: int = 0) -> list[Unit]:
    """Group candidates from `start` on into units; `round_no` is the round before `start`.

    Hot on a first build of a long log: plain messages take the short path."""
    units: list[Unit] = []
    append = units.append
    i, n = start, len(cands)
    while i < n:
        m, tokens = cands[i]
        role = m.role
        if role == "assistant" and m.tool_calls:
            items = [i]
            protected = m.pinned or m.kind == "summary"
            j = i + 1
            while j < n and cands[j][0].role == "tool":
                r, t = cands[j]
                items.append(j)
                tokens += t
                protected = protected or r.pinned
                j += 1
            tool = next((c.function.name for c in m.tool_calls
                         if c.function.name in PROTECTED_TOOLS), "")
            append(Unit(items, round_no, tokens, protected, tool=tool))
            i = j
            continue
        is_user = role == "user" and m.kind == "message"
        if is_user:
            round_no += 1
        append(Unit([i], round_no, tokens, m.pinned or m.kind == "summary", False, is_user))
        i += 1
    return units
