"""MCP tools as tools of ours: the same runner (approvals, offloading of large results, cards,
Stop), their schema as the server gave it, their call made through the project's McpHub.

A tool asks before it runs, as a command does: its server's process runs with the user's
rights, outside our sandbox. Only a tool its server marks `readOnlyHint`, of a server the user
lets run those without asking (`autoApproveReadOnly`), runs at once.

A large result is written to disk as it is taken apart, as a command's output is, and kept
(redacted, offloaded) from there; past run_shell's 256 MB, the rest is left out and the result
says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict

from core.mcp import McpHub
from core.mcp_state import McpToolInfo
from core.mcp_text import result_parts
from core.redact import redact
from core.tools.base import Tool, ToolArgs, ToolContext, ToolOutput, running_file
from core.tools.shell import MAX_OUTPUT_BYTES

IN_MEMORY = 1 << 16  # characters of a result kept as text; a longer one goes to disk


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
            result = await hub.call_result(info.server, info.tool, arguments)
            if isinstance(result, str):  # no result: why, in a sentence
                return ToolOutput(result, "error")
            return output(result_parts(result), bool(result.isError), ctx)

        description = f"(MCP server {info.server}) {info.description}".strip()
        key = next(iter(info.schema.get("properties", {})), "")
        return McpTool(info.name, description, McpArgs, "read" if read else "execute", run,
                       key, info, remote)


def output(parts: list[str], failed: bool, ctx: ToolContext,
           limit: int = MAX_OUTPUT_BYTES) -> ToolOutput:
    """A result's text (its parts joined by line ends): as text when short, else written to
    the call's output file a megabyte at a time, stopping past `limit` bytes."""
    status: Literal["ok", "error"] = "error" if failed else "ok"
    if sum(len(p) for p in parts) <= IN_MEMORY:
        return ToolOutput(redact("\n".join(parts)), status)
    ctx.results_dir.mkdir(parents=True, exist_ok=True)
    path = running_file(ctx.state, ctx.conv_id, ctx.call_id)
    written, header = 0, ""
    with open(path, "wb") as out:
        for n, part in enumerate(parts):
            for start in range(0, len(part), 1 << 20):
                data = (("\n" if n and not start else "") + part[start:start + (1 << 20)]
                        ).encode("utf-8", "surrogatepass")
                if written + len(data) > limit:
                    header = (f"[the result is larger than {limit // 2**20} MB; only its first "
                              f"{limit // 2**20} MB are kept]\n")
                    break
                out.write(data)
                written += len(data)
            if header:
                break
    return ToolOutput(status=status, file=path, header=header)
