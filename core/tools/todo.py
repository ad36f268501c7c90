"""manage_todo_list: the agent's task list, kept in the log itself.

What a change means and the list a log leaves are in core/todo.py (compaction's digest replays
the same list); this is the tool: its arguments, and a batch's calls sharing one board.
"""

from __future__ import annotations

from core.todo import TODO_TOOL, TodoBoard, TodoChange, TodoError, apply, render, todo_state
from core.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolOutput

__all__ = ["MANAGE_TODO_LIST", "TODO_TOOL", "TodoArgs", "TodoBoard", "apply", "render",
           "todo_state"]


class TodoArgs(ToolArgs, TodoChange):
    pass  # the tool's arguments: a change to the list (no docstring: it would join the schema)


async def manage_todo_list(args: TodoArgs, ctx: ToolContext) -> ToolOutput:
    board = ctx.todo if ctx.todo is not None else TodoBoard(todo_state(ctx.history))
    try:
        board.items = apply(board.items, args)
    except TodoError as e:
        raise ToolError(str(e)) from None
    return ToolOutput(render(board.items))


MANAGE_TODO_LIST = Tool(
    TODO_TOOL,
    "Keep your task list for this work: set it when you plan, mark items in progress and done "
    "as you go. The user sees it while you work.",
    TodoArgs, "read", manage_todo_list, key_arg="action")
