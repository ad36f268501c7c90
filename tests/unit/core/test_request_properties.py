"""What every request must be, whatever happened before it: random sequences of sends, tool
rounds, pins, exclusions, summaries, stops, continues and retries, each followed by a build the
way the engine and the meter make one (one cache reused across appends), checked for

- protocol validity, the user's turn first;
- every pinned entry sent with its whole tool round;
- no synthetic "aborted" result for a call whose result is in the log;
- no sentence of ours meant for the user inside a message the model reads;
- the meter's figure equal to the request's counted tokens."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.context.budget import Budget
from core.context.builder import BudgetError, BuiltRequest, build_request
from core.context.candidates import BuildCache
from core.context.normalize import ABORTED_RESULT, protocol_errors
from core.context.prompts import PromptComposer
from core.context.summary import NothingToSummarize, plan_summary
from core.llm.tokens import REPLY_PRIMER, TokenCounter
from core.model import ConversationMessage, ErrorInfo, ToolCall, annotation, apply_annotations

COUNTER = TokenCounter("o200k_base")
COMPOSER = PromptComposer()
# What the window says to the user about an entry, never meant for the model.
USER_SENTENCES = ("Continue resumes", "Retry", "Stopped by you", "LLM_ERROR",
                  "The partial answer is kept", "Open settings")
WORDS = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "parser", "file", "line",
                                  "42", "ok", "test", "build", "ran"]),
                 min_size=1, max_size=40).map(" ".join)
ERROR_TYPES = ["stopped", "max_tokens", "app_closed", "stream_interrupted", "timeout",
               "provider_error", "network"]


@dataclass
class Log:
    raw: list[ConversationMessage] = field(default_factory=list)
    calls: int = 0

    def add(self, m: ConversationMessage) -> None:
        self.raw.append(COUNTER.with_count(m))

    def dialogue(self) -> list[ConversationMessage]:
        return [m for m in self.raw if m.kind not in ("annotation", "notice", "summary")]

    def entries(self) -> list[ConversationMessage]:
        return [m for m in self.raw if m.kind != "annotation"]


def _apply(log: Log, op: tuple[Any, ...]) -> None:
    kind = op[0]
    last = log.dialogue()[-1] if log.dialogue() else None
    if kind == "send":
        log.add(ConversationMessage(role="user", content=op[1]))
        log.add(ConversationMessage(role="assistant", content=op[2]))
    elif kind == "ask":
        log.add(ConversationMessage(role="user", content=op[1]))
    elif kind == "tools":
        _, n, with_text, missing = op
        calls = []
        for _ in range(n):
            log.calls += 1
            calls.append(ToolCall.model_validate({
                "id": f"call_{log.calls}", "type": "function",
                "function": {"name": "read_file",
                             "arguments": json.dumps({"path": f"f{log.calls}.py"})}}))
        log.add(ConversationMessage(role="assistant", content="Let me look." if with_text
                                    else None, tool_calls=calls))
        for k, c in enumerate(calls):
            if k < n - missing:
                log.add(ConversationMessage(role="tool", tool_call_id=c.id,
                                            tool_name="read_file", status="ok",
                                            content=f"contents of {c.id} " * 5))
    elif kind == "fail":
        _, type_, partial = op
        log.add(ConversationMessage(
            role="assistant", kind="error", content=partial or None,
            error=ErrorInfo(type=type_, message=f"{type_}: Continue resumes it. Retry.",
                            retryable=True, partial=bool(partial))))
    elif kind == "continue" and last is not None and last.kind == "error" and last.text():
        log.add(ConversationMessage(role="assistant", content=op[1], continues=last.id))
    elif kind == "retry" and last is not None and last.kind == "error":
        log.add(ConversationMessage(role="assistant", content=op[1]))
    elif kind in ("pin", "unpin", "exclude", "include"):
        targets = log.entries()
        if targets:
            log.raw.append(annotation(targets[op[1] % len(targets)].id, kind))
    elif kind == "summarize":
        history = apply_annotations(log.raw)
        try:
            plan = plan_summary(history, COUNTER, keep_rounds=1)
        except NothingToSummarize:
            return
        log.add(ConversationMessage(role="system", kind="summary", covers=plan.covers,
                                    content="## Progress\nread the files; " + op[1]))


OPS = st.one_of(
    st.tuples(st.just("send"), WORDS, WORDS),
    st.tuples(st.just("ask"), WORDS),
    st.tuples(st.just("tools"), st.integers(1, 3), st.booleans(), st.integers(0, 1)),
    st.tuples(st.just("fail"), st.sampled_from(ERROR_TYPES), st.sampled_from(["", "Half an an"])),
    st.tuples(st.just("continue"), WORDS),
    st.tuples(st.just("retry"), WORDS),
    st.tuples(st.sampled_from(["pin", "unpin", "exclude", "include"]), st.integers(0, 10**6)),
    st.tuples(st.just("summarize"), WORDS),
)


def _build(history: list[ConversationMessage], usable: int,
           cache: BuildCache | None) -> BuiltRequest:
    budget = Budget(usable + 1000, 1000, 0, "override", calibration=0.9)
    return build_request(history, "chat", model="gpt-4o", budget=budget, counter=COUNTER,
                         composer=COMPOSER, cache=cache)


def _check(history: list[ConversationMessage], built: BuiltRequest) -> None:
    sent = built.messages
    assert protocol_errors(sent[1:]) == []
    if len(sent) > 1:  # the user's turn first (Anthropic refuses anything else)
        assert sent[1]["role"] == "user", sent[1]
    # the meter's figure is the request's counted tokens
    counted = sum(COUNTER.openai_message(m) for m in sent) + REPLY_PRIMER
    assert built.report.used == counted
    assert built.report.provider_estimate == round(counted * built.report.calibration)
    # no synthetic result for a call whose result is in the log
    results = {m.tool_call_id for m in history if m.role == "tool"}
    for msg in sent:
        if msg.get("role") == "tool" and msg.get("content") == ABORTED_RESULT:
            assert msg["tool_call_id"] not in results, msg
    # no sentence of ours meant for the user
    text = json.dumps([m.get("content") for m in sent[1:]])
    for s in USER_SENTENCES:
        assert s not in text, s
    # every pinned entry sent with its whole tool round
    decided = {e.id: e.decision for e in built.report.entries}
    sent_decisions = ("kept", "previewed", "referenced")
    by_call = {c.id: m for m in history if m.tool_calls for c in m.tool_calls}
    for m in history:
        if not m.pinned or decided.get(m.id) not in sent_decisions:
            continue
        call = m if m.tool_calls else by_call.get(m.tool_call_id or "")
        if call is None:
            continue
        ids = [call.id] + [r.id for r in history if r.role == "tool"
                           and any(r.tool_call_id == c.id for c in call.tool_calls or ())]
        assert all(decided.get(i) in sent_decisions for i in ids), (m.id, ids, decided)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=30), st.sampled_from([400, 1500, 100_000]))
def test_every_request_is_valid_complete_honest_and_counted_as_shown(
        ops: list[tuple[Any, ...]], usable: int) -> None:
    log = Log()
    cache = BuildCache()
    for op in ops:
        _apply(log, op)
        history = apply_annotations(log.raw)
        if not history or history[-1].role != "user" and not log.dialogue():
            continue
        try:
            built = _build(history, usable, cache)
        except BudgetError:
            continue
        _check(history, built)
