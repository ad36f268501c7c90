"""normalize() over random, messy logs: the output always passes the protocol rules."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.context.normalize import ABORTED_RESULT, normalize, protocol_errors

IDS = st.sampled_from(["a", "b", "c", "d", "", "a"])


@st.composite
def messages(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["user", "text", "calls", "tool", "empty"]))
        if kind == "user":
            out.append({"role": "user", "content": draw(st.text(max_size=20))})
        elif kind == "text":
            out.append({"role": "assistant", "content": draw(st.text(min_size=1, max_size=20))})
        elif kind == "empty":
            out.append({"role": "assistant", "content": None})
        elif kind == "calls":
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                args = draw(st.sampled_from(['{"x": 1}', "", "not json", "[1, 2]", "{}"]))
                name = draw(st.sampled_from(["read_file", "run_shell", ""]))
                calls.append({"id": draw(IDS), "type": "function",
                              "function": {"name": name, "arguments": args}})
            out.append({"role": "assistant", "content": draw(st.sampled_from([None, "ok"])),
                        "tool_calls": calls})
        else:
            out.append({"role": "tool", "tool_call_id": draw(IDS), "content": "result"})
    return out


@settings(max_examples=400, deadline=None)
@given(messages())
@example([  # found by a CI run: results answered out of call order
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": c, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        for c in ("a", "b")]},
    {"role": "tool", "tool_call_id": "b", "content": "result"},
    {"role": "tool", "tool_call_id": "a", "content": "result"}])
def test_output_always_passes_the_protocol_rules(raw: list[dict[str, Any]]) -> None:
    fixed, notes = normalize(raw)
    assert protocol_errors(fixed) == []
    if fixed != raw:
        assert notes, "every change is reported"


def test_valid_conversations_pass_through_untouched() -> None:
    raw: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "assistant", "content": "done"},
    ]
    assert normalize(raw) == (raw, [])


def test_missing_result_gets_an_aborted_stand_in_and_orphans_go() -> None:
    raw: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": "zz", "content": "orphan"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "second"},
        {"role": "tool", "tool_call_id": "c2", "content": "duplicate"},
    ]
    fixed, notes = normalize(raw)
    assert [m.get("tool_call_id") for m in fixed[1:]] == ["c1", "c2"]
    assert fixed[1]["content"] == ABORTED_RESULT and fixed[2]["content"] == "second"
    assert {n.action for n in notes} == {"dropped", "synthetic"}


def test_results_out_of_call_order_are_reordered_and_reported() -> None:
    raw: list[dict[str, Any]] = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "b", "content": "second"},
        {"role": "tool", "tool_call_id": "a", "content": "first"}]
    fixed, notes = normalize(raw)
    assert [m["content"] for m in fixed[1:]] == ["first", "second"]
    assert [n.action for n in notes] == ["repaired"]
    assert "order" in notes[0].reason


def test_malformed_arguments_are_kept_as_text_not_lost() -> None:
    raw: list[dict[str, Any]] = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{broken"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"}]
    fixed, notes = normalize(raw)
    assert json.loads(fixed[0]["tool_calls"][0]["function"]["arguments"]) == {"_raw": "{broken"}
    assert notes[0].action == "repaired"
