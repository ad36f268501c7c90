"""How a conversation ends: the one reader of its last turn.

Continue, Retry, crash repair and a run's driver all ask `last_turn`, so they agree with each
other and with the error row that offers them. Entries said *about* the dialogue rather than
in it (a pin or an exclusion, a run's pause or resume notice, a summary that landed after the
turn) are skipped: a pin made after a failure must not make Continue refuse, and one made
while a command runs must not hide that command's missing result from crash repair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.model import ConversationMessage, ToolCall

ASIDE_KINDS = frozenset({"annotation", "notice", "summary"})


def in_dialogue(entry: ConversationMessage) -> bool:
    """Whether `entry` is part of the exchange itself (not a remark about it)."""
    return entry.kind not in ASIDE_KINDS


@dataclass(frozen=True)
class LastTurn:
    """Attributes:
        last: the dialogue's last entry (None for an empty conversation).
        failed: the error entries the dialogue ends in, oldest first (empty when it does not
            end in a failure).
        asked: the dialogue entry just before those errors: what the failed answer answered.
        unanswered: the calls of the last answer that have no result yet (only tool results
            follow that answer in the dialogue).
    """

    last: ConversationMessage | None
    failed: tuple[ConversationMessage, ...]
    asked: ConversationMessage | None
    unanswered: tuple[ToolCall, ...]

    @property
    def retryable(self) -> bool:
        """Retry applies: the dialogue ends in a failed answer with its request before it."""
        return bool(self.failed) and self.asked is not None and \
            self.asked.role in ("user", "tool")

    def without_failed(self, history: Sequence[ConversationMessage]
                       ) -> list[ConversationMessage]:
        """`history` less the failed entries at its end (what Retry sends again); the remarks
        among them stay."""
        if not self.failed:
            return list(history)
        gone = {id(m) for m in self.failed}
        start = len(history)
        while start > 0 and (id(history[start - 1]) in gone or
                             not in_dialogue(history[start - 1])):
            start -= 1
        return [*history[:start], *(m for m in history[start:] if id(m) not in gone)]


def last_turn(history: Sequence[ConversationMessage]) -> LastTurn:
    """Read how `history` ends (walks back only over its last turn)."""
    i = len(history) - 1
    while i >= 0 and not in_dialogue(history[i]):
        i -= 1
    last = history[i] if i >= 0 else None
    failed: list[ConversationMessage] = []
    j = i
    while j >= 0 and (not in_dialogue(history[j]) or history[j].kind == "error"):
        if history[j].kind == "error":
            failed.append(history[j])
        j -= 1
    asked = history[j] if j >= 0 and failed else None
    return LastTurn(last, tuple(reversed(failed)), asked, tuple(_unanswered(history, i)))


def _unanswered(history: Sequence[ConversationMessage], i: int) -> list[ToolCall]:
    answered: set[str] = set()
    for k in range(i, -1, -1):
        m = history[k]
        if not in_dialogue(m):
            continue
        if m.role == "tool":
            answered.add(m.tool_call_id or "")
            continue
        if m.role == "assistant" and m.kind != "error" and m.tool_calls:
            return [c for c in m.tool_calls if c.id not in answered]
        return []
    return []
