"""The agent's todo list: what a change to it means, and the list a log leaves.

The list is never stored anywhere else: it is the replay of every successful call in the log,
so it survives restarts, exports and imports, and the window, the CLI, the tool itself and
compaction's digest all see the same list. Two forms are replayed: the app's own
`manage_todo_list` (set/add/update/complete/remove by item number) and an imported Claude Code
session's `TodoWrite` (the whole list each time, statuses `pending`/`in_progress`/`completed`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.model import ConversationMessage

TODO_TOOL = "manage_todo_list"
IMPORTED_TODO_TOOL = "TodoWrite"
TODO_TOOLS = frozenset({TODO_TOOL, IMPORTED_TODO_TOOL})
TodoStatus = Literal["pending", "in_progress", "done"]
MARK = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}
_IMPORTED_STATUS: dict[object, TodoStatus] = {"completed": "done", "done": "done",
                                              "in_progress": "in_progress"}


class TodoError(Exception):
    """A change that cannot be made (the message says why, to the model)."""


class TodoItem(BaseModel):
    text: str
    status: TodoStatus = "pending"


class TodoBoard:
    """The list shared by the calls of one batch (each sees the ones before it); a tool's
    context carries it (core.tools.base)."""

    def __init__(self, items: list[TodoItem]) -> None:
        self.items = items


class TodoChange(BaseModel):
    """One call of `manage_todo_list` (unknown fields are refused)."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["set", "add", "update", "complete", "remove"] = Field(
        description="set: replace the list by `items`; add: append `items`; update: change "
                    "item `number` (its `text` and/or `status`); complete: mark item `number` "
                    "done; remove: delete item `number`.")
    items: list[str] | None = Field(default=None, description="Item texts (set, add).")
    number: int | None = Field(default=None, ge=1, description="1-based item number.")
    text: str | None = None
    status: TodoStatus | None = None


def apply(items: list[TodoItem], change: TodoChange) -> list[TodoItem]:
    """The list after `change`; raises TodoError for an impossible change."""
    out = list(items)
    if change.action in ("set", "add"):
        if not change.items:
            raise TodoError(f"{change.action} needs `items`, a list of item texts.")
        new = [TodoItem(text=t.strip()) for t in change.items if t.strip()]
        return new if change.action == "set" else out + new
    if change.number is None:
        raise TodoError(f"{change.action} needs `number`, the item's 1-based number.")
    if not 1 <= change.number <= len(out):
        raise TodoError(f"There is no item {change.number}; the list has {len(out)} item(s).")
    i = change.number - 1
    if change.action == "remove":
        del out[i]
    elif change.action == "complete":
        out[i] = TodoItem(text=out[i].text, status="done")
    else:
        if change.text is None and change.status is None:
            raise TodoError("update needs `text` and/or `status`.")
        out[i] = TodoItem(text=change.text or out[i].text,
                          status=change.status or out[i].status)
    return out


def render(items: list[TodoItem]) -> str:
    if not items:
        return "The todo list is empty."
    done = sum(1 for i in items if i.status == "done")
    lines = [f"Todo list ({done} of {len(items)} done):"]
    lines += [f"{n}. {MARK[i.status]} {i.text}" for n, i in enumerate(items, 1)]
    return "\n".join(lines)


def _imported(arguments: object) -> list[TodoItem] | None:
    """The whole list a TodoWrite call states, or None when it states none."""
    todos = arguments.get("todos") if isinstance(arguments, dict) else None
    if not isinstance(todos, list):
        return None
    out = []
    for todo in todos:
        if isinstance(todo, dict):
            text = todo.get("content") or todo.get("text") or todo.get("title")
            if isinstance(text, str) and text.strip():
                out.append(TodoItem(text=text.strip(),
                                    status=_IMPORTED_STATUS.get(todo.get("status"), "pending")))
    return out


def _todo_calls(history: list[ConversationMessage]
                ) -> tuple[list[tuple[int, ConversationMessage]], set[str]]:
    """The messages that call a todo tool (with their place in `history`) and the ids of those
    calls that ran well. The calls are found first: most logs have none, or a few among
    thousands of entries (this runs at every round of tool calls, on a 10,000-entry log too)."""
    todo = [(n, m) for n, m in enumerate(history) if m.tool_calls
            and any(c.function.name in TODO_TOOLS for c in m.tool_calls)]
    if not todo:
        return [], set()
    called = {c.id for _, m in todo for c in m.tool_calls or () if c.function.name in TODO_TOOLS}
    ok = {m.tool_call_id for m in history if m.tool_call_id is not None
          and m.tool_call_id in called and m.role == "tool" and m.status in ("ok", None)
          and m.tool_name in (TODO_TOOL, IMPORTED_TODO_TOOL, None)}
    return todo, ok


def todo_state(history: Iterable[ConversationMessage], until: str | None = None
               ) -> list[TodoItem]:
    """The list as the log leaves it: every successful call replayed in order (up to and
    including the message `until`, when given). A call without a successful result (it
    failed, or has not run yet) or one that cannot apply changes nothing, as it changed
    nothing when it ran."""
    history = list(history)
    todo, ok = _todo_calls(history)
    if not todo:
        return []
    stop = len(history) if until is None else next(
        (n for n, m in enumerate(history) if m.id == until), len(history))
    items: list[TodoItem] = []
    for n, m in todo:
        if n > stop:
            break
        for call in m.tool_calls or ():
            name = call.function.name
            if name not in TODO_TOOLS or call.id not in ok:
                continue
            try:
                arguments = json.loads(call.function.arguments or "{}")
                if name == IMPORTED_TODO_TOOL:
                    items = _imported(arguments) or items
                else:
                    items = apply(items, TodoChange.model_validate(arguments))
            except (ValueError, ValidationError, TodoError):
                continue
    return items
