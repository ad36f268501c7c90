"""What a conversation is besides its messages: `conversation.json` (ConversationMeta) and its
row of `index.json` (ConversationSummary)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.model import Mode, utc_now

DEFAULT_TITLE = "New conversation"


class ConversationMeta(BaseModel):
    """What `conversation.json` holds: everything about a conversation except its messages."""

    model_config = ConfigDict(extra="allow")
    id: str
    title: str = DEFAULT_TITLE
    titled: str | None = None  # who set the title: "user", "model", "opening" (None: untitled)
    created_at: datetime = Field(default_factory=utc_now)
    mode: Mode = "chat"
    model: str | None = None
    context_window: int | None = Field(default=None, gt=0)  # overrides the model's window
    compaction: dict[str, Any] = Field(default_factory=dict)
    agent: str | None = None  # the agent chosen for the conversation (None: the default)
    allow_network: bool = False  # commands the agent runs may use the network (when sealed)
    network_seal: str | None = None  # the app's seal on allow_network (core.approval_seal)
    project_instructions: bool = True  # send the project's AGENTS.md (core.context.instructions)
    tools_off: list[str] = Field(default_factory=list)  # MCP tools switched off (core.mcp)
    # A branch: the conversation it grew from and the last entry they share ("" for none);
    # see core.store.branches.
    branch_of: str | None = None
    branch_at: str | None = None
    # What the title's request spent ({"model", "usage", "cost"}): it made no entry (core.cost)
    title_request: dict[str, Any] | None = None


class ConversationSummary(BaseModel):
    """One row of `index.json` (and of the conversation list)."""

    id: str
    title: str
    created_at: datetime
    updated_at: datetime
    mode: Mode
    message_count: int
    cost: float | None = None  # USD its entries and title cost (core.cost); None: not tallied
    title_cost: float = 0.0
    branch_of: str | None = None
    branch_at: str | None = None
    # Size and mtime of the files the row was computed from: how staleness is detected.
    stamp: list[int] = Field(default_factory=list)
