"""Candidates: the log entries that take part in a request, counted, and grouped into units.

The first stage of every build. Log entries are immutable values and the log only grows, so a
`BuildCache` held per conversation looks only at the entries after the ones its last build saw;
anything that changes the past (a pin, an exclusion, a retried answer, a summary) starts it over,
and the build report says why.
"""

from __future__ import annotations

import operator
from dataclasses import replace

from core.context.memo import CompactionMemo
from core.context.projection import error_projection, summary_tokens
from core.context.summary import active_summaries
from core.context.units import ToolRounds, Unit, group_units
from core.context.view import StickyView
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage

SUMMARIZED = "summarized"


class BuildCache:
    """Per-conversation memo of the candidates and units of the last build.

    Log entries are immutable values and the log only grows, so when the new history starts
    with the very same objects, only the entries after them need looking at.
    """

    def __init__(self) -> None:
        self.history: list[ConversationMessage] = []
        self.cands: list[tuple[ConversationMessage, int]] = []
        self.excluded: list[tuple[ConversationMessage, str]] = []
        self.units: list[Unit] = []
        self.rounds = ToolRounds()
        self._last_user = -1
        self.encoding = ""
        self.memo = CompactionMemo()
        self.view: StickyView | None = None  # the last compaction, reused by later builds
        self.reset = ""  # why the last `prepare` started over (a new compaction says it)

    def fork(self) -> BuildCache:
        """A copy for a build that is never sent (a draft or another budget): it starts from
        this cache's work, and what it does stays out of this one (the per-entry memo is
        shared: entries never change)."""
        other = BuildCache()
        other.history, other.cands, other.excluded = list(self.history), list(self.cands), \
            list(self.excluded)
        other.units = list(self.units)
        other.rounds = self.rounds.copy()
        if 0 <= self._last_user < len(other.units):  # `prepare` flips its flag in place
            other.units[self._last_user] = replace(other.units[self._last_user])
        other._last_user, other.encoding = self._last_user, self.encoding
        other.memo, other.view = self.memo, self.view
        return other

    def prepare(self, history: list[ConversationMessage], counter: TokenCounter) -> None:
        """Make the candidates and units of `history`, from where the last build left off
        when the history only grew since."""
        reusable, self.reset = self._reusable(history, counter)
        n = len(self.history)
        if not reusable:
            self.history, self.cands, self.excluded, self.units = [], [], [], []
            self.rounds = ToolRounds()
            self.encoding = counter.encoding_name
            self.view = None  # it decided over units that are gone
            n = 0
        before = len(self.cands)
        self._add(history, n, counter)
        self.history = list(history)
        if len(self.cands) != before or not self.units:
            # Only the last unit can grow (tool results arriving for its calls): redo from it.
            start = self.units.pop().items[0] if self.units else 0
            round_no = self.units[-1].round_no if self.units else 0
            self.units.extend(group_units(self.cands, start, round_no))
        self._mark_latest_user()

    def _reusable(self, history: list[ConversationMessage], counter: TokenCounter
                  ) -> tuple[bool, str]:
        """Whether the last build's work still holds for `history`, and if not why (empty
        for a cache that had none)."""
        n = len(self.history)
        if self.encoding != counter.encoding_name or len(history) < n or \
                not all(map(operator.is_, history[:n], self.history)):
            if not n:
                return False, ""
            return False, ("the model changed (another tokenizer)"
                           if self.encoding != counter.encoding_name else
                           "the history changed (a pin, an exclusion, an entry included again)")
        if 0 < n < len(history) and _superseded(history[n - 1], history[n]):
            # a Retry's answer arrived: the failed attempt before it leaves
            return False, "a retried answer replaced a failed one"
        if any(m.covers for m in history[n:]):
            # a summary arrived: what it covers leaves the candidates
            return False, "a summary was written (compaction by the LLM)"
        return True, ""

    def _add(self, history: list[ConversationMessage], n: int, counter: TokenCounter) -> None:
        """Count the entries of `history` from `n` on into the candidates (or the excluded)."""
        enc = counter.encoding_name
        append = self.cands.append
        rounds = self.rounds
        add = rounds.add
        for k in range(n, len(history)):
            m = history[k]
            if m.tool_calls or m.role == "tool":  # (plain messages are most of a long log)
                add(m)  # a round's pin or exclusion can come after its call
        covered = active_summaries(history) if n == 0 else {}
        if covered:
            rounds.uncover(covered)
        with_round = rounds.left_with_round
        gone = rounds.left_out_ids()  # usually empty: nothing to look up per entry
        # A summary is appended after what it covers but stands where its first covered entry
        # was, so the model reads it before what followed.
        order = _summary_order(history, covered) if covered else range(n, len(history))
        for i in order:
            m = history[i]
            # The common case first, inline: an ordinary entry whose count is stored with it.
            if m.kind == "message" and m.include_in_context and m.role != "system" \
                    and m.id not in covered and (m.content.__class__ is str
                                                 or m.unsendable_part() is None) \
                    and (not gone or m.id not in gone):
                tokens = m.token_counts.get(enc)
                append((m, tokens if tokens is not None else counter.message(m)))
                continue
            if m.kind == "annotation":
                continue  # a line about another entry (a pin, an exclusion): no entry itself
            reason = _left_out(history, i, covered) or with_round(m)
            if reason:
                self.excluded.append((m, reason))
            elif m.kind == "error":
                append((m, counter.openai_message(error_projection(m))))
            elif m.kind == "summary":  # sent as the user's turn that frames it
                append((m, summary_tokens(m, counter)))
            else:
                append((m, counter.message(m)))

    def _mark_latest_user(self) -> None:
        last_user = max((k for k, u in enumerate(self.units) if u.user), default=-1)
        for k in (self._last_user, last_user):
            if 0 <= k < len(self.units):
                self.units[k].latest_user = (k == last_user)
        self._last_user = last_user


def _summary_order(history: list[ConversationMessage], covered: dict[str, str]) -> list[int]:
    """History indexes with each active summary moved to its first covered entry."""
    first: dict[str, int] = {}
    for i, m in enumerate(history):
        by = covered.get(m.id)
        if by is not None and by not in first:
            first[by] = i
    at: dict[int, list[int]] = {}
    moved = set()
    for i, m in enumerate(history):
        k = first.get(m.id)
        if k is not None and k < i:
            at.setdefault(k, []).append(i)
            moved.add(i)
    order: list[int] = []
    for i in range(len(history)):
        order.extend(at.get(i, ()))
        if i not in moved:
            order.append(i)
    return order


def _left_out(history: list[ConversationMessage], i: int, covered: dict[str, str]
              ) -> str | None:
    """Why entry `i` is no candidate, or None when it is one."""
    m = history[i]
    reason = _excluded(m)
    if reason is None and m.id in covered:
        reason = f"{SUMMARIZED}: covered by summary {covered[m.id][:8]}"
    if reason is None and m.kind == "error" and i < len(history) - 1 and \
            _superseded(m, history[i + 1]):
        reason = "a failed attempt that a later answer replaced (Retry)"
    return reason


def _superseded(m: ConversationMessage, following: ConversationMessage) -> bool:
    """An error entry directly followed by another answer that does not continue it: the user
    retried, and the new attempt stands in its place."""
    return (m.kind == "error" and following.role == "assistant"
            and following.continues != m.id)


def _excluded(m: ConversationMessage) -> str | None:
    if not m.include_in_context:
        return "left out by you (include in context is off)"
    if m.kind == "error" and not m.text() and not m.tool_calls:
        return ("a failed request with no answer text (it may never have reached a model): "
                "nothing in it for the model")
    if m.kind == "notice":
        return "a notice, not part of the conversation"
    if m.role == "system" and m.kind != "summary":
        return "an old system entry; the system prompt is composed for each request"
    kind = m.unsendable_part()
    if kind is not None:
        return (f"cannot be sent: it holds a content part of kind {kind!r}, which no provider "
                "takes (made elsewhere and imported); left out so the rest can be sent")
    return None
