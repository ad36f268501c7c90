"""MCP tools as tools of ours: the same runner (approvals, offloading of large results, cards,
Stop), their schema as the server gave it, their call made through the project's McpHub.

A tool asks before it runs, as a command does: its server's process runs with the user's
rights, outside our sandbox. Only a tool its server marks `readOnlyHint`, of a server the user
lets run those without asking (`autoApproveReadOnly`), runs at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict

from core.mcp import McpHub, McpToolInfo
from core.tools.base import Tool, ToolArgs, ToolContext, ToolOutput


class McpArgs(ToolArgs):
    """Any arguments: the server's schema checks them (see `_check`)."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True, eq=False)
class McpTool(Tool):
    """A server's tool; `info` holds its schema as listed."""

    info: McpToolInfo | None = None
    remote: bool = False  # its server is a URL (not a program of the user's machine)

    def schema(self) -> dict[str, Any]:
        assert self.info is not None
        return {"type": "function",
                "function": {"name": self.name, "description": self.description,
                             "parameters": self.info.schema}}


def _check(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """Why `arguments` do not fit the tool's schema, in a sentence the model can act on."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(schema).iter_errors(arguments), key=str)
    if not errors:
        return None
    e = errors[0]
    where = ".".join(map(str, e.absolute_path)) or "the arguments"
    return f"Invalid arguments for this tool: {where}: {e.message}. Nothing was run."


class McpToolset:
    """The hub's tools as Tool objects, made once per tool (the request's schemas are cached
    per tool object: the same bytes every turn)."""

    def __init__(self, hub: McpHub) -> None:
        self.hub = hub
        self._made: dict[tuple[str, str, str], McpTool] = {}

    def tools(self) -> list[Tool]:
        out: list[Tool] = []
        for info in self.hub.tools():
            server = self.hub.servers.get(info.server)
            read = info.read_only and server is not None and \
                server.config.auto_approve_read_only
            remote = server is not None and server.config.url is not None
            key = (info.name, json.dumps([info.schema, info.description], sort_keys=True),
                   f"{read}{remote}")
            tool = self._made.get(key)
            if tool is None:
                tool = self._made[key] = self._make(info, read, remote)
            out.append(tool)
        return out

    def _make(self, info: McpToolInfo, read: bool, remote: bool) -> McpTool:
        hub = self.hub

        async def run(args: McpArgs, ctx: ToolContext) -> ToolOutput:
            arguments = args.model_dump()
            problem = _check(info.schema, arguments)
            if problem is not None:
                return ToolOutput(problem, "error")
            text, failed = await hub.call(info.server, info.tool, arguments)
            return ToolOutput(text, "error" if failed else "ok")

        description = f"(MCP server {info.server}) {info.description}".strip()
        key = next(iter(info.schema.get("properties", {})), "")
        return McpTool(info.name, description, McpArgs, "read" if read else "execute", run,
                       key, info, remote)
