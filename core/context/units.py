"""Units: what request building decides over. A unit is one candidate, or an assistant tool
call together with its results, so no stage can separate a call from what answered it."""

from __future__ import annotations

from dataclasses import dataclass

from core.model import ConversationMessage
from core.todo import TODO_TOOLS

PROTECTED_TOOLS = TODO_TOOLS  # the latest call of each is always sent: the plan as it stands


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


class ToolRounds:
    """The tool rounds of a log: an assistant entry with tool calls and the results answering
    them. No stage separates them, so a pin or an exclusion of any part holds for the round:
    a pinned call is sent with its results (and a pinned result with its call), and a call or
    result the user left out takes the rest of its round with it. Fed entries in log order
    (call ids may repeat in imported logs: a result answers the latest call with its id)."""

    __slots__ = ("_by_call", "_excluded", "_of", "_pinned", "members")

    def __init__(self, entries: list[ConversationMessage] | None = None) -> None:
        self._of: dict[str, str] = {}  # entry id -> its round (the calling entry's id)
        self._by_call: dict[str, str] = {}  # tool call id -> its round
        self.members: dict[str, list[str]] = {}  # round -> its entries' ids, in log order
        self._pinned: set[str] = set()
        self._excluded: set[str] = set()
        for m in entries or ():
            self.add(m)

    def copy(self) -> ToolRounds:
        other = ToolRounds()
        other._of, other._by_call = dict(self._of), dict(self._by_call)
        other.members = {k: list(v) for k, v in self.members.items()}
        other._pinned, other._excluded = set(self._pinned), set(self._excluded)
        return other

    def add(self, m: ConversationMessage) -> None:
        if m.role == "assistant" and m.tool_calls:
            key = m.id
            for c in m.tool_calls:
                self._by_call[c.id] = key
            self.members[key] = []
        elif m.role == "tool" and m.tool_call_id in self._by_call:
            key = self._by_call[m.tool_call_id]
        else:
            return
        self._of[m.id] = key
        self.members[key].append(m.id)
        if m.pinned:
            self._pinned.add(key)
        if not m.include_in_context:
            self._excluded.add(key)

    def pinned(self, m: ConversationMessage) -> bool:
        """Whether `m` or another entry of its round is pinned."""
        return m.pinned or self._of.get(m.id) in self._pinned

    def left_with_round(self, m: ConversationMessage) -> str | None:
        """Why `m`, itself included, is left out with its round (another part of it was
        excluded), or None."""
        key = self._of.get(m.id)
        if key is None or key not in self._excluded or not m.include_in_context:
            return None
        return ("left out with its tool round: you excluded another part of it (a call and its "
                "results are sent together or not at all)")

    def left_out_ids(self) -> set[str]:
        """The ids of the entries of every round with an excluded part."""
        return {i for key in self._excluded for i in self.members[key]}

    def uncover(self, covered: dict[str, str]) -> None:
        """Take out of `covered` (entry id -> covering summary) every round a summary may not
        stand for: one with a pinned part (pinned after the summary was written), or one the
        summary covers only in part (a log written before rounds were kept whole)."""
        for key, ids in self.members.items():
            hit = [i for i in ids if i in covered]
            if hit and (key in self._pinned or len(hit) < len(ids)):
                for i in hit:
                    del covered[i]
