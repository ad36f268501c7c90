"""What the MCP hub (core.mcp) knows of each server: its entry in `mcp.json` (`ServerConfig`),
the tools it listed (`McpToolInfo`) and its state (`ServerState`). Below the hub and its calls
(core.mcp_calls), which both read them."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

State = Literal["not started", "starting", "ready", "failed"]


class ServerConfig(BaseModel):
    """One entry of `mcpServers`: a command (stdio) or a URL (streamable HTTP)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    auto_approve_read_only: bool = Field(default=False, alias="autoApproveReadOnly")
    timeout: float | None = Field(default=None, gt=0)  # seconds a call may take (ours)

    def describe(self) -> str:
        return self.url or " ".join([self.command or "", *self.args]).strip()

    def fingerprint(self) -> str:
        """What the kept tool list was listed for (a changed entry lists anew)."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]


@dataclass(frozen=True)
class McpToolInfo:
    """A tool a server listed. `name` is what the model calls (`server__tool`)."""

    server: str
    tool: str
    name: str
    description: str
    schema: dict[str, Any]
    read_only: bool = False


@dataclass
class ServerState:
    name: str
    config: ServerConfig
    status: State = "not started"
    tools: list[McpToolInfo] = field(default_factory=list)
    error: str = ""
    session: Any = None  # the SDK's ClientSession while ready
    stop: asyncio.Event | None = None
    task: asyncio.Task[None] | None = None

    def line(self) -> str:
        """Its state in a few words, for Settings and `workbench mcp`."""
        if self.status == "ready":
            n = len(self.tools)
            return f"ready with {n} tool{'s' if n != 1 else ''}"
        if self.status == "failed":
            return f"failed: {self.error}"
        return self.status
