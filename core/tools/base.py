"""What a tool is: a name, a description, a pydantic argument model, a risk and a run function.

A tool never raises for something the model did (a bad path, a missing snippet, a command that
fails): it returns a `ToolOutput` with status "error" and a sentence the model can act on.
`ToolError` is the short way to say so from deep inside a tool; the runner turns it into such an
output. The argument model's JSON schema is what the request's `tools` offers the model.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from core.model import ConversationMessage
from core.todo import TodoBoard
from core.tools.sandbox import Sandbox
from core.workflows.state import RunState

Risk = Literal["read", "write", "execute"]


class ToolError(Exception):
    """Something the model asked for that cannot be done; the message is what it reads."""


class ToolArgs(BaseModel):
    """Base of every tool's arguments: unknown fields are refused, so a typo is an error the
    model sees rather than an argument silently ignored."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class ToolOutput:
    """What a tool returns.

    Attributes:
        text: the result for the model (the runner offloads it when it is large).
        status: "ok", or "error" when the tool could not do what was asked.
        exit_code: a command's exit status.
        file: the result already written to disk whole (a command's output), instead of `text`;
            the runner keeps it as the offloaded output or reads it back when it is small.
        header: a line put before the file's content in the result (the exit code).
    """

    text: str = ""
    status: Literal["ok", "error"] = "ok"
    exit_code: int | None = None
    file: Path | None = None
    header: str = ""


RESULTS_DIR = "tool-results"  # in `.workbench/`: full outputs, one folder per conversation


def safe_name(name: str) -> str:
    """`name` as a file name (ids from providers may hold any character)."""
    return (re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip(".") or "call")[:120]


def results_dir(state: Path, conv_id: str) -> Path:
    """The folder of a conversation's full outputs."""
    return state / RESULTS_DIR / safe_name(conv_id)


def started_file(state: Path, conv_id: str, call_id: str) -> Path:
    """Marks a call that has started (written before it runs, removed once its result is in
    the log): after a crash, a call without it never ran."""
    return results_dir(state, conv_id) / f".started-{safe_name(call_id)}"


def running_file(state: Path, conv_id: str, call_id: str) -> Path:
    """Where a command's output goes while it runs (removed when it is kept or abandoned)."""
    return results_dir(state, conv_id) / f".running-{safe_name(call_id)}"


@dataclass
class ToolContext:
    """Everything a tool may touch.

    Attributes:
        root: the project folder (resolved); every path resolves inside it.
        state: the project's `.workbench` folder.
        conv_id, call_id: the conversation and the tool call being answered.
        history: the conversation's log as it stood when the tools started.
        sandbox: how commands are contained (see core.tools.sandbox).
        network: commands may use the network (the user allowed it for the conversation).
        env: the environment commands get (no API keys).
    """

    root: Path
    state: Path
    conv_id: str
    call_id: str
    history: list[ConversationMessage] = field(default_factory=list)
    sandbox: Sandbox | None = None
    network: bool = False
    env: dict[str, str] | None = None
    todo: TodoBoard | None = None  # the todo list shared by one batch of calls
    shared: dict[str, object] = field(default_factory=dict)  # what one batch's calls share
    run: RunState | None = None  # in run mode: the run as the log left it (the project's replay)
    # a write's change as it was approved: (path, its text then or None when new, text after)
    change: tuple[Path, str | None, str] | None = None

    @property
    def results_dir(self) -> Path:
        """Where this conversation's full outputs are kept (one folder per conversation:
        call ids repeat across conversations, and within one)."""
        return results_dir(self.state, self.conv_id)


@dataclass(frozen=True)
class Tool:
    """Attributes:
        name: what the model calls.
        description: what the model reads to decide when to call it.
        args: the pydantic model of its arguments.
        risk: read (never asks), write or execute (ask first).
        run: the coroutine doing the work.
        key_arg: the argument a collapsed card shows (a path, a command).
    """

    name: str
    description: str
    args: type[ToolArgs]
    risk: Risk
    run: Callable[[Any, ToolContext], Awaitable[ToolOutput]]
    key_arg: str = ""

    def schema(self) -> dict[str, Any]:
        """The OpenAI `tools[]` entry (deterministic: the same bytes every time)."""
        params = self.args.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        return {"type": "function",
                "function": {"name": self.name, "description": self.description,
                             "parameters": params}}
