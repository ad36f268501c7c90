"""The fuzzer's invariants as plain functions: over a stored log, and over a request body the
loopback server received. Each returns the problems it sees (empty when it holds)."""

from __future__ import annotations

from typing import Any

from core.model import ConversationMessage

# What the engine tells the model about a call that never ran (core/engine.py, exchange).
NOT_RUN = ("Not run",)


def log_problems(messages: list[ConversationMessage]) -> list[str]:
    """The log reads back protocol-complete: every result answers one earlier call, no call is
    answered twice, and a call has its result before the next message of the user's or the
    model's. Only the batch the log ends in may still wait (a crash, a fork: the engine answers
    it when the conversation is next used)."""
    problems: list[str] = []
    pending: list[str] = []
    answered: set[str] = set()
    called: set[str] = set()
    for i, m in enumerate(messages):
        if m.kind == "annotation":
            continue
        if m.role == "tool":
            cid = m.tool_call_id or ""
            if cid in answered:
                problems.append(f"entry {i}: a second result for call {cid}")
            elif cid not in pending:
                problems.append(f"entry {i}: a result for call {cid}, which no earlier entry "
                                "made" + (" (its batch was closed)" if cid in called else ""))
            else:
                pending.remove(cid)
                answered.add(cid)
            continue
        if m.role in ("user", "assistant") and m.kind in ("message", "error") and pending:
            problems.append(f"entry {i} ({m.role}) comes while calls {pending} have no result")
            pending = []
        for call in m.tool_calls or []:
            if call.id in called:
                problems.append(f"entry {i}: call id {call.id} made twice")
            called.add(call.id)
            pending.append(call.id)
    return problems


def _empty(content: Any) -> bool:
    if content is None:
        return True
    if isinstance(content, str):
        return not content.strip()
    if isinstance(content, list):
        return all(isinstance(p, dict) and p.get("type") == "text"
                   and not str(p.get("text") or "").strip() for p in content)
    return False


def has_image(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "image_url" for p in content)


def request_problems(body: dict[str, Any]) -> list[str]:
    """Valid for OpenAI and for Anthropic's stricter rules: the first message after the system
    prompt is the user's, each assistant message with tool calls is followed by exactly one
    result per call (and a result only follows its call), and no assistant message is empty."""
    problems: list[str] = []
    messages: list[dict[str, Any]] = body.get("messages") or []
    rest = [m for m in messages if m.get("role") != "system"]
    if not rest:
        return ["no message besides the system prompt"]
    if rest[0].get("role") != "user":
        problems.append(f"the first message after the system prompt is {rest[0].get('role')}'s")
    waiting: list[str] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            cid = m.get("tool_call_id")
            if cid in waiting:
                waiting.remove(cid)
            else:
                problems.append(f"message {i}: result for {cid} does not follow its call")
            continue
        if waiting:
            problems.append(f"message {i} ({role}) comes before the results of {waiting}")
            waiting = []
        if role == "assistant":
            calls = m.get("tool_calls") or []
            if not calls and _empty(m.get("content")):
                problems.append(f"message {i}: an empty assistant message")
            waiting = [c.get("id") for c in calls]
            if len(set(waiting)) != len(waiting):
                problems.append(f"message {i}: a call id twice in one batch")
    if waiting:
        problems.append(f"the request ends before the results of {waiting}")
    return problems


def false_claims(body: dict[str, Any], ran: set[str]) -> list[str]:
    """Results the request tells the model that say a call did nothing, though a result of that
    call (in this conversation or the one it came from) shows it ran."""
    return [f"call {m.get('tool_call_id')} is said not to have run: {str(m.get('content'))[:80]}"
            for m in body.get("messages") or []
            if m.get("role") == "tool" and m.get("tool_call_id") in ran
            and str(m.get("content") or "").startswith(NOT_RUN)]


def ran_calls(messages: list[ConversationMessage]) -> set[str]:
    """The calls a log shows a real result of (not one that says the call never ran)."""
    return {m.tool_call_id for m in messages
            if m.role == "tool" and m.tool_call_id and not m.text().startswith(NOT_RUN)}


def plain(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as the wire may carry them: without null fields (litellm leaves out
    `"content": null`), and an assistant's tool calls without text the same whether their
    content is left out or "" (what a local server's profile sends: core.llm.compat)."""
    return [{k: v for k, v in m.items() if v is not None
             and not (k == "content" and v == "" and m.get("tool_calls"))} for m in messages]
