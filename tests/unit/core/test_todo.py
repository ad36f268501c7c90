"""The todo list a log leaves: the app's own calls and an imported session's TodoWrite."""

from __future__ import annotations

import json
from typing import Any

from core.model import ConversationMessage, Status
from core.todo import render, todo_state


def call(cid: str, name: str, args: dict[str, Any],
         status: Status | None = "ok") -> list[ConversationMessage]:
    out = [ConversationMessage.from_openai({"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})]
    if status is not None:
        out.append(ConversationMessage(role="tool", tool_call_id=cid, status=status,
                                       content="..."))
    return out


def test_an_imported_todowrite_list_and_later_changes_replay_in_order() -> None:
    history = [
        *call("a", "TodoWrite", {"todos": [
            {"content": "Read the parser", "status": "completed", "activeForm": "Reading"},
            {"content": "Fix line numbers", "status": "in_progress", "activeForm": "Fixing"}]}),
        *call("b", "manage_todo_list", {"action": "add", "items": ["Run the tests"]}),
        *call("c", "manage_todo_list", {"action": "complete", "number": 2}),
        *call("d", "manage_todo_list", {"action": "remove", "number": 9}),  # cannot apply
        *call("e", "manage_todo_list", {"action": "set", "items": ["x"]}, status="error"),
        *call("f", "manage_todo_list", {"action": "complete", "number": 3}, status=None),  # running
    ]
    assert render(todo_state(history)) == ("Todo list (2 of 3 done):\n1. [x] Read the parser\n"
                                           "2. [x] Fix line numbers\n3. [ ] Run the tests")
    # up to a message: the list as it stood then
    assert render(todo_state(history, until=history[2].id)).startswith("Todo list (1 of 3 done)")
