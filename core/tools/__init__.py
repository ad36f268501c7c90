"""The tools the model can call, and which ones each mode offers.

Chat offers the read-only tools; agent mode all of them; run mode (core.runs) adds
complete_step. An agent may narrow the list further. The schemas are always in the same order,
so the request's `tools` are byte-identical from one request to the next.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from functools import cache
from typing import Any

from core.model import Mode
from core.tool_names import BUILTIN_TOOL_NAMES, READ_ONLY_TOOL_NAMES
from core.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolOutput
from core.tools.files import EDIT_FILE, LIST_DIR, READ_FILE, SEARCH_FILES, WRITE_FILE
from core.tools.results import READ_TOOL_RESULT
from core.tools.shell import RUN_SHELL
from core.tools.step import COMPLETE_STEP_TOOL
from core.tools.todo import MANAGE_TODO_LIST

BUILTIN_TOOLS: tuple[Tool, ...] = (READ_FILE, LIST_DIR, SEARCH_FILES, READ_TOOL_RESULT,
                                   MANAGE_TODO_LIST, WRITE_FILE, EDIT_FILE, RUN_SHELL)
READ_ONLY_TOOLS = READ_ONLY_TOOL_NAMES
TOOL_NAMES = BUILTIN_TOOL_NAMES

__all__ = ["BUILTIN_TOOLS", "READ_ONLY_TOOLS", "TOOL_NAMES", "Tool", "ToolArgs", "ToolContext",
           "ToolError", "ToolOutput", "tool_schemas", "tools_for"]


def tools_for(mode: Mode, allowed: Collection[str] | None = None,
              step: Collection[str] | None = None, completing: bool = False) -> list[Tool]:
    """The tools a request in `mode` offers; `allowed` (an agent's list) and `step` (the
    active step's list, in run mode) narrow them; `completing`: a run has an active step, so
    run mode offers complete_step too (last, whatever the lists say)."""
    out = [t for t in BUILTIN_TOOLS if mode != "chat" or t.name in READ_ONLY_TOOLS]
    if allowed is not None:
        out = [t for t in out if t.name in allowed]
    if mode == "run" and step is not None:
        out = [t for t in out if t.name in step]
    if mode == "run" and completing:
        out.append(COMPLETE_STEP_TOOL)
    return out


@cache
def _schema(tool: Tool) -> str:
    return json.dumps(tool.schema(), sort_keys=True)


def tool_schemas(tools: Collection[Tool]) -> list[dict[str, Any]]:
    """The request's `tools[]` (each schema built once per process)."""
    return [json.loads(_schema(t)) for t in tools]
