"""manage_todo_list: the agent's task list, kept in the log itself.

The list is never stored anywhere else: it is the replay of every successful call in the log,
so it survives restarts, exports and imports, and a window, the CLI and (later) compaction all
see the same list. The window shows it while the agent works; compaction keeps it.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from core.model import ConversationMessage
from core.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolOutput

TODO_TOOL = "manage_todo_list"
TodoStatus = Literal["pending", "in_progress", "done"]
MARK = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}


class TodoItem(BaseModel):
    text: str
    status: TodoStatus = "pending"


class TodoArgs(ToolArgs):
    action: Literal["set", "add", "update", "complete", "remove"] = Field(
        description="set: replace the list by `items`; add: append `items`; update: change "
                    "item `number` (its `text` and/or `status`); complete: mark item `number` "
                    "done; remove: delete item `number`.")
    items: list[str] | None = Field(default=None, description="Item texts (set, add).")
    number: int | None = Field(default=None, ge=1, description="1-based item number.")
    text: str | None = None
    status: TodoStatus | None = None


def apply(items: list[TodoItem], args: TodoArgs) -> list[TodoItem]:
    """The list after `args`; raises ToolError for an impossible change."""
    out = list(items)
    if args.action in ("set", "add"):
        if not args.items:
            raise ToolError(f"{args.action} needs `items`, a list of item texts.")
        new = [TodoItem(text=t.strip()) for t in args.items if t.strip()]
        return new if args.action == "set" else out + new
    if args.number is None:
        raise ToolError(f"{args.action} needs `number`, the item's 1-based number.")
    if not 1 <= args.number <= len(out):
        raise ToolError(f"There is no item {args.number}; the list has {len(out)} item(s).")
    i = args.number - 1
    if args.action == "remove":
        del out[i]
    elif args.action == "complete":
        out[i] = TodoItem(text=out[i].text, status="done")
    else:
        if args.text is None and args.status is None:
            raise ToolError("update needs `text` and/or `status`.")
        out[i] = TodoItem(text=args.text or out[i].text, status=args.status or out[i].status)
    return out


def render(items: list[TodoItem]) -> str:
    if not items:
        return "The todo list is empty."
    done = sum(1 for i in items if i.status == "done")
    lines = [f"Todo list ({done} of {len(items)} done):"]
    lines += [f"{n}. {MARK[i.status]} {i.text}" for n, i in enumerate(items, 1)]
    return "\n".join(lines)


def todo_state(history: list[ConversationMessage]) -> list[TodoItem]:
    """The list as the log leaves it: every successful call replayed in order."""
    ok = {m.tool_call_id for m in history if m.role == "tool" and m.status in ("ok", None)
          and m.tool_name in (TODO_TOOL, None)}
    items: list[TodoItem] = []
    for m in history:
        for call in m.tool_calls or []:
            if call.function.name != TODO_TOOL or call.id not in ok:
                continue
            try:
                items = apply(items, TodoArgs.model_validate(json.loads(call.function.arguments)))
            except (ValueError, ValidationError, ToolError):
                continue
    return items


class TodoBoard:
    """The list shared by the calls of one batch (each sees the ones before it)."""

    def __init__(self, items: list[TodoItem]) -> None:
        self.items = items


async def manage_todo_list(args: TodoArgs, ctx: ToolContext) -> ToolOutput:
    board = ctx.todo if ctx.todo is not None else TodoBoard(todo_state(ctx.history))
    board.items = apply(board.items, args)
    return ToolOutput(render(board.items))


MANAGE_TODO_LIST = Tool(
    TODO_TOOL,
    "Keep your task list for this work: set it when you plan, mark items in progress and done "
    "as you go. The user sees it while you work.",
    TodoArgs, "read", manage_todo_list, key_arg="action")
