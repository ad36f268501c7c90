"""Normalize: the last step of every request build, so what is sent passes the protocol rules.

Contract: given OpenAI messages in log order, return messages where
- every assistant tool call has a unique id, a name, and arguments that are a JSON object text;
- each call is answered by exactly one tool message, right after its assistant message, in call
  order (a synthetic "aborted" result stands in for a missing one);
- no tool message appears anywhere else (orphans and duplicates are dropped);
- every assistant message has content or tool calls.
Each change is reported as a Note (what, which position in the input, why), never silently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ABORTED_RESULT = "[aborted: no result was recorded for this tool call]"


@dataclass(frozen=True)
class Note:
    index: int  # position in the input list
    action: str  # dropped | synthetic | repaired | added (a first user message, in fit)
    reason: str


def normalize(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Note]]:
    out: list[dict[str, Any]] = []
    notes: list[Note] = []
    used_ids: set[str] = set()
    i = 0
    n = len(messages)
    while i < n:
        m = messages[i]
        role = m.get("role")
        if role == "tool":
            notes.append(Note(i, "dropped", "tool result without a tool call right before it"))
            i += 1
            continue
        if role != "assistant" or not m.get("tool_calls"):
            if role == "assistant" and not _has_content(m):
                notes.append(Note(i, "dropped", "assistant message with neither text nor calls"))
            else:
                out.append(m)
            i += 1
            continue

        # An assistant message with tool calls, and the tool results that follow it.
        calls, renamed = _clean_calls(m["tool_calls"], i, used_ids, notes)
        results, j = _results(messages, i + 1, calls, renamed, notes)
        if not calls:
            if _has_content(m):
                out.append({k: v for k, v in m.items() if k != "tool_calls"})
            else:
                notes.append(Note(i, "dropped", "assistant message whose calls were all unusable"))
            for k in range(i + 1, j):
                if not any(x.index == k for x in notes):
                    notes.append(Note(k, "dropped", "result of a call that was dropped"))
            i = j
            continue
        out.append(m if calls == m["tool_calls"] else {**m, "tool_calls": calls})
        for c in calls:
            found = results.get(c["id"])
            if found is None:
                notes.append(Note(i, "synthetic",
                                  f"no result for call {c['id']!r}: marked aborted"))
                found = {"role": "tool", "tool_call_id": c["id"], "content": ABORTED_RESULT}
            out.append(found)
        i = j
    return out, notes


def _results(messages: list[dict[str, Any]], j: int, calls: list[dict[str, Any]],
             renamed: dict[str, str], notes: list[Note]) -> tuple[dict[str, dict[str, Any]], int]:
    """The tool messages from `j` on that answer `calls` (by call id), and where they end."""
    ids = [c["id"] for c in calls]
    start, results = j, {}
    while j < len(messages) and messages[j].get("role") == "tool":
        r = messages[j]
        call_id = renamed.get(str(r.get("tool_call_id")), str(r.get("tool_call_id")))
        if call_id not in ids:
            notes.append(Note(j, "dropped", f"result for unknown call {call_id!r}"))
        elif call_id in results:
            notes.append(Note(j, "dropped", f"second result for call {call_id!r}"))
        else:
            results[call_id] = r if r.get("tool_call_id") == call_id else \
                {**r, "tool_call_id": call_id}
        j += 1
    if list(results) != [c for c in ids if c in results]:
        notes.append(Note(start - 1, "repaired", "tool results put in the order of their calls"))
    return results, j


def protocol_errors(messages: list[dict[str, Any]]) -> list[str]:
    """Every way `messages` breaks the tool-call rules (empty when valid). Used by tests and as
    a last check before sending."""
    errors: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(messages):
        m = messages[i]
        if m.get("role") == "tool":
            errors.append(f"{i}: tool message not right after its call")
            i += 1
            continue
        if m.get("role") == "assistant":
            calls = m.get("tool_calls") or []
            if not calls and not _has_content(m):
                errors.append(f"{i}: empty assistant message")
            for k, c in enumerate(calls):
                cid = c.get("id")
                if not cid or cid in seen:
                    errors.append(f"{i}: missing or repeated call id {cid!r}")
                seen.add(cid)
                try:
                    json.loads(c["function"]["arguments"])
                except (KeyError, TypeError, ValueError):
                    errors.append(f"{i}: arguments of call {cid!r} are not JSON")
                r = messages[i + 1 + k] if i + 1 + k < len(messages) else None
                if r is None or r.get("role") != "tool" or r.get("tool_call_id") != cid:
                    errors.append(f"{i}: call {cid!r} is not answered right after, in order")
            i += 1 + len(calls)
            continue
        i += 1
    return errors


def _has_content(m: dict[str, Any]) -> bool:
    content = m.get("content")
    return content not in (None, "", [])


def _clean_calls(
    raw: list[Any], index: int, used: set[str], notes: list[Note]
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Repair or drop malformed calls; returns the calls and old-id -> new-id renames."""
    calls: list[dict[str, Any]] = []
    renamed: dict[str, str] = {}
    for k, c in enumerate(raw):
        fn = c.get("function") if isinstance(c, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not name or not isinstance(fn, dict):
            notes.append(Note(index, "dropped", f"tool call {k} has no function name"))
            continue
        call_id = str(c.get("id") or "")
        if not call_id or call_id in used:
            new_id = _fresh_id(used, index, k)
            notes.append(Note(index, "repaired",
                              f"call id {call_id or '(missing)'!r} replaced by {new_id!r}"))
            if call_id:
                renamed[call_id] = new_id
            call_id = new_id
        used.add(call_id)
        args = fn.get("arguments")
        text = args if isinstance(args, str) else json.dumps(args if args is not None else {})
        try:
            parsed = json.loads(text) if text.strip() else {}
            if not isinstance(parsed, dict):
                raise ValueError
            if not text.strip():
                notes.append(Note(index, "repaired", f"arguments of {call_id!r} were empty; "
                                                     "sent as {}"))
                text = "{}"
        except ValueError:
            notes.append(Note(index, "repaired", f"arguments of {call_id!r} were not a JSON "
                                                 "object; kept as text under \"_raw\""))
            text = json.dumps({"_raw": text})
        calls.append({"id": call_id, "type": "function",
                      "function": {"name": name, "arguments": text}})
    return calls, renamed


def _fresh_id(used: set[str], index: int, k: int) -> str:
    candidate = f"call_{index}_{k}"
    n = 0
    while candidate in used:
        n += 1
        candidate = f"call_{index}_{k}_{n}"
    return candidate
