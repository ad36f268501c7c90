"""build_request: the one function every LLM request goes through, in every mode.

    history (the log) --candidates--> units (messages, complete tool-call groups) --trim to
    budget--> normalize --> [system prefix] + messages, and a BuildReport that says, for every
    log entry, what happened to it and why.

Trimming (when over budget) keeps, in this order of priority: the system prefix, the latest user
message, pinned entries and summaries, the most recent rounds, and older user messages up to a
cap (newest first); everything else goes whole rounds at a time, oldest first. A tool call is
never separated from its results. The compression pipeline (previews, key-message selection,
summaries) plugs in as further stages before this last-resort trimming.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from core.context.budget import Budget
from core.context.normalize import ABORTED_RESULT, normalize
from core.context.prompts import PromptComposer, RunContext
from core.llm.tokens import REPLY_PRIMER, TokenCounter
from core.model import ConversationMessage, Mode

USER_MESSAGE_CAP = 20
RECENT_ROUNDS = 2


class BudgetError(ValueError):
    """Even the minimum (system prefix and the latest user message) does not fit."""

    def __init__(self, needed: int, usable: int) -> None:
        super().__init__(
            f"This request needs at least {needed:,} tokens (the system prompt and your latest "
            f"message), but only {usable:,} are available for input. Shorten the message or "
            "choose a model with a larger context window."
        )
        self.needed = needed
        self.usable = usable


@dataclass
class EntryDecision:
    id: str
    role: str
    kind: str
    decision: str  # kept | dropped | synthetic
    reason: str
    tokens: int


@dataclass
class BuildReport:
    model: str
    mode: str
    window: int
    usable: int
    reserved_output: int
    safety: int
    budget_source: str
    budget_note: str | None
    used: int = 0
    totals: dict[str, int] = field(default_factory=dict)
    entries: list[EntryDecision] = field(default_factory=list)
    normalize_notes: list[str] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    elapsed_ms: float = 0.0

    @property
    def percent(self) -> float:
        return 100.0 * self.used / self.usable if self.usable else 100.0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["percent"] = round(self.percent, 1)
        return data


@dataclass
class BuiltRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    report: BuildReport


@dataclass
class _Unit:
    """One or more candidates that stay together (an assistant tool call and its results)."""

    items: list[int]  # indexes into the candidate list
    round_no: int
    tokens: int
    protected: bool  # pinned or summary
    latest_user: bool = False
    user: bool = False


def error_projection(m: ConversationMessage) -> dict[str, Any]:
    """An error entry as the model sees it: its partial answer, then an LLM_ERROR block, so a
    later "continue" has an anchor."""
    info = m.error
    block = (f"[LLM_ERROR type={info.type}] {info.message}" if info is not None
             else "[LLM_ERROR]")
    partial = m.text()
    return {"role": "assistant", "content": f"{partial}\n\n{block}" if partial else block}


def build_request(
    history: list[ConversationMessage],
    mode: Mode,
    *,
    model: str,
    budget: Budget,
    counter: TokenCounter,
    composer: PromptComposer,
    run_context: RunContext | None = None,
    tools: list[dict[str, Any]] | None = None,
    user_cap: int = USER_MESSAGE_CAP,
    recent_rounds: int = RECENT_ROUNDS,
) -> BuiltRequest:
    started = time.perf_counter()
    tools = list(tools or [])
    report = BuildReport(model, mode, budget.window, budget.usable, budget.reserved_output,
                         budget.safety, budget.source, budget.note)
    prefix = composer.compose(mode, run_context)
    system_msg = {"role": "system", "content": prefix}
    system_tokens = counter.openai_message(system_msg)
    tools_tokens = counter.text(json.dumps(tools)) if tools else 0

    # 1. candidates
    t = time.perf_counter()
    cands: list[tuple[ConversationMessage, int]] = []
    for m in history:
        reason = _excluded(m)
        if reason:
            report.entries.append(EntryDecision(m.id, m.role, m.kind, "dropped", reason,
                                                counter.message(m)))
            continue
        tokens = counter.openai_message(error_projection(m)) if m.kind == "error" \
            else counter.message(m)
        cands.append((m, tokens))
    units = _units(cands)
    report.stages.append({"name": "candidates", "ms": _ms(t)})

    # 2. trim to budget
    t = time.perf_counter()
    fixed = system_tokens + tools_tokens + REPLY_PRIMER
    keep = [True] * len(units)
    total = fixed + sum(u.tokens for u in units)
    reasons: dict[int, str] = {}
    if total > budget.usable:
        total = _trim(units, keep, reasons, fixed, budget.usable, user_cap, recent_rounds)
    report.stages.append({"name": "trim", "ms": _ms(t)})

    # 3. project, normalize, and make sure normalizing did not push us over
    t = time.perf_counter()
    while True:
        kept_items = [i for u, k in zip(units, keep) if k for i in u.items]
        projected = [_project(cands[i][0]) for i in kept_items]
        normalized, notes = normalize(projected)
        extra = sum(counter.openai_message(m) for m in normalized if m.get("content") ==
                    ABORTED_RESULT and m.get("role") == "tool")
        used = fixed + sum(cands[i][1] for i in kept_items) + extra
        if used <= budget.usable or not _drop_one_more(units, keep, reasons, recent_rounds):
            break
    report.stages.append({"name": "normalize", "ms": _ms(t)})
    if used > budget.usable:
        raise BudgetError(used, budget.usable)

    kept_set = {cands[i][0].id for i in kept_items}
    dropped_reason = {cands[i][0].id: reasons.get(n, "over budget")
                      for n, u in enumerate(units) if not keep[n] for i in u.items}
    for m, tokens in cands:
        if m.id in kept_set:
            report.entries.append(EntryDecision(m.id, m.role, m.kind, "kept",
                                                "error entry sent with an LLM_ERROR block"
                                                if m.kind == "error" else "fits the budget",
                                                tokens))
        else:
            report.entries.append(EntryDecision(m.id, m.role, m.kind, "dropped",
                                                dropped_reason.get(m.id, "over budget"), tokens))
    for note in notes:
        report.normalize_notes.append(f"{note.action}: {note.reason}")
        if note.action == "synthetic":
            report.entries.append(EntryDecision("", "tool", "message", "synthetic", note.reason,
                                                0))
    history_tokens = used - fixed
    report.totals = {"system": system_tokens, "tools": tools_tokens,
                     "history": history_tokens + REPLY_PRIMER,
                     "reserved": budget.reserved_output}
    report.used = used
    report.elapsed_ms = _ms(started)
    return BuiltRequest([system_msg, *normalized], tools, report)


# --- helpers -----------------------------------------------------------------------------------


def _excluded(m: ConversationMessage) -> str | None:
    if not m.include_in_context:
        return "left out by you (include in context is off)"
    if m.kind == "notice":
        return "a notice, not part of the conversation"
    if m.role == "system" and m.kind != "summary":
        return "an old system entry; the system prompt is composed for each request"
    return None


def _project(m: ConversationMessage) -> dict[str, Any]:
    return error_projection(m) if m.kind == "error" else m.to_openai()


def _units(cands: list[tuple[ConversationMessage, int]]) -> list[_Unit]:
    units: list[_Unit] = []
    round_no = 0
    i = 0
    last_user = max((k for k, (m, _) in enumerate(cands)
                     if m.role == "user" and m.kind == "message"), default=-1)
    while i < len(cands):
        m, tokens = cands[i]
        if m.role == "user" and m.kind == "message":
            round_no += 1
        items = [i]
        if m.role == "assistant" and m.tool_calls:
            j = i + 1
            while j < len(cands) and cands[j][0].role == "tool":
                items.append(j)
                j += 1
        protected = any(cands[k][0].pinned or cands[k][0].kind == "summary" for k in items)
        units.append(_Unit(items, round_no, sum(cands[k][1] for k in items), protected,
                           latest_user=(i == last_user),
                           user=(m.role == "user" and m.kind == "message")))
        i = items[-1] + 1
    return units


def _trim(units: list[_Unit], keep: list[bool], reasons: dict[int, str], fixed: int,
          usable: int, user_cap: int, recent_rounds: int) -> int:
    """Drop units until the total fits; returns the new total."""
    total = fixed + sum(u.tokens for u in units)
    last_round = max((u.round_no for u in units), default=0)
    recent = {r for r in range(last_round - recent_rounds + 1, last_round + 1)}
    users_newest_first = [n for n in range(len(units) - 1, -1, -1) if units[n].user]
    capped_users = set(users_newest_first[:user_cap])

    def drop(n: int, why: str) -> None:
        nonlocal total
        if keep[n]:
            keep[n] = False
            reasons[n] = why
            total -= units[n].tokens

    # A: old rounds, oldest first, keeping their user messages (up to the cap) and protected.
    for n, u in enumerate(units):
        if total <= usable:
            return total
        if u.round_no in recent or u.protected or u.latest_user:
            continue
        if u.user and n in capped_users:
            continue
        drop(n, "older round dropped to fit the budget")
    # B: the kept user messages of old rounds, oldest first.
    for n, u in enumerate(units):
        if total <= usable:
            return total
        if u.user and not u.latest_user and u.round_no not in recent and not u.protected:
            drop(n, "older user message dropped to fit the budget")
    # C: inside the recent rounds, oldest first, whole units (never the latest user message).
    for n, u in enumerate(units):
        if total <= usable:
            return total
        if not u.latest_user and not u.protected:
            drop(n, "recent message dropped: even the latest rounds exceed the budget")
    # D: protected entries last.
    for n, u in enumerate(units):
        if total <= usable:
            return total
        if not u.latest_user:
            drop(n, "pinned or summary entry dropped: nothing else was left to drop")
    return total


def _drop_one_more(units: list[_Unit], keep: list[bool], reasons: dict[int, str],
                   recent_rounds: int) -> bool:
    """Normalizing added synthetic results and went over: drop the oldest droppable unit."""
    for n, u in enumerate(units):
        if keep[n] and not u.latest_user:
            keep[n] = False
            reasons[n] = "dropped to make room for a synthetic tool result"
            return True
    return False


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)
