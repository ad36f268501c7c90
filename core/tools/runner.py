"""Running the tool calls of one answer: check, ask, run, keep; one log entry per call.

Whatever the model sends becomes a result it can read, never an exception: arguments that are
not JSON, a tool it made up, a tool the mode does not offer, arguments the tool's model refuses,
a tool that fails. Writes and commands ask the user first (unless the approval policy says
otherwise) and the decision is recorded on the entry. Consecutive read-only calls run
concurrently; the rest one at a time, in order. Results are yielded in the calls' order.
"""

from __future__ import annotations

import asyncio
import json
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from core.llm.tokens import TokenCounter
from core.model import ConversationMessage, Mode, Status, ToolCall
from core.questions import Question
from core.redact import redact
from core.tools.base import (
    Tool,
    ToolArgs,
    ToolContext,
    ToolError,
    ToolOutput,
    started_file,
)
from core.tools.files import planned_content, unified_diff
from core.tools.mcp_tools import McpTool
from core.tools.results import OFFLOAD_TOKENS, READ_TOOL_RESULT, Kept, keep
from core.tools.sandbox import Sandbox
from core.tools.shell import ShellArgs
from core.tools.todo import TodoBoard, todo_state
from core.workflows.state import RunState

ApprovalPolicy = Literal["never", "ask", "always"]
ALLOW_ONCE = "Allow once"
ALLOW_CONVERSATION = "Allow for this conversation"
DENY = "Deny"
APPROVAL_CHOICES = (ALLOW_ONCE, ALLOW_CONVERSATION, DENY)


# Read-only calls of one answer run together, this many at a time: each runs on a thread of its
# own, and forty threads at once (an agent reading a folder) only fought over the interpreter,
# the window's thread among them (a fifth of a second without a paint).
PARALLEL_READS = 4


@dataclass(frozen=True)
class ToolStarted:
    """A tool call began running (the card shows a spinner and the elapsed time)."""

    call_id: str
    name: str
    key: str
    started: float = field(default_factory=time.time)


@dataclass(frozen=True)
class ToolResult:
    """A call's finished log entry, to be persisted before the next request."""

    entry: ConversationMessage


RunnerEvent = ToolStarted | ToolResult | Question


def allowed_for_conversation(history: Sequence[ConversationMessage],
                             honoured: Callable[[ConversationMessage], bool]) -> set[str]:
    """Tools the user allowed for the rest of the conversation (read from the log): only the
    allowances `honoured` says the app itself wrote."""
    return {m.tool_name for m in history
            if m.role == "tool" and m.approval == "conversation" and m.tool_name
            and honoured(m)}


def key_argument(tool: Tool | None, arguments: dict[str, Any]) -> str:
    value = arguments.get(tool.key_arg) if tool is not None and tool.key_arg else None
    if value is None:
        value = next((v for v in arguments.values() if isinstance(v, str)), "")
    text = " ".join(str(value).split())
    return text if len(text) <= 120 else text[:119] + "…"


def parse_arguments(raw: str) -> dict[str, Any]:
    """The call's arguments as a JSON object; raises ToolError saying what is wrong."""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError as e:
        raise ToolError(f"The arguments are not valid JSON ({e.msg} at character {e.pos}); "
                        "nothing ran. Send them again as one JSON object.") from e
    if not isinstance(value, dict):
        raise ToolError("The arguments must be a JSON object; nothing ran.")
    return value


def _validation_text(tool: Tool, e: ValidationError) -> str:
    problems = []
    for err in e.errors()[:8]:
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return (f"Invalid arguments for {tool.name}: " + "; ".join(problems)
            + ". Nothing ran.")


@dataclass(frozen=True)
class _Plan:
    """One call, checked: its tool and validated arguments, or the problem the model reads;
    the key argument its card shows; for a write, (path, text now, text after)."""

    tool: Tool | None
    args: ToolArgs | None
    problem: str | None
    key: str = ""
    change: tuple[Path, str | None, str] | None = None


@dataclass
class ToolRunner:
    """Runs calls for one conversation turn.

    Attributes:
        root: the project folder; state: its `.workbench`.
        tools: the tools this turn offers (by mode and agent).
        policy: never | ask | always for writes and commands.
        sandbox: how commands are contained; network: commands may use the network.
        counter: counts result tokens (for offloading).
        mode: recorded on the entries.
        run_state: in run mode, the conversation's run as the log left it (what complete_step
            checks a call against).
    """

    root: Path
    state: Path
    tools: Sequence[Tool]
    counter: TokenCounter
    policy: ApprovalPolicy = "ask"
    sandbox: Sandbox = field(default_factory=lambda: Sandbox("none", why="not set up"))
    network: bool = False
    mode: Mode = "agent"
    offload_tokens: int = OFFLOAD_TOKENS
    env: dict[str, str] | None = None
    run_state: RunState | None = None  # in run mode, the run the calls belong to
    # which remembered allowances the app itself wrote (none, unless told)
    honoured: Callable[[ConversationMessage], bool] = lambda _entry: False
    # the keys in use, kept out of full outputs on disk too (the log writer's; by default the
    # environment's)
    secrets: Callable[[], Iterable[str]] | None = None
    # what the model is told of a name no tool offered has, when there is something to say
    # (an MCP server's tool while the server restarts or is stopped); None: "no tool named"
    missing: Callable[[str], str | None] = lambda _name: None

    def __post_init__(self) -> None:
        self.root = self.root.resolve()
        self._by_name = {t.name: t for t in self.tools}

    async def run(self, conv_id: str, calls: Sequence[ToolCall],
                  history: list[ConversationMessage]) -> AsyncIterator[RunnerEvent]:
        """Yield ToolStarted, Question (an approval to answer) and ToolResult events, one
        ToolResult per call, in the calls' order. Cancelling stops the running tools."""
        allowed = allowed_for_conversation(history, self.honoured)
        board = TodoBoard(todo_state(history))
        shared: dict[str, object] = {}
        i = 0
        while i < len(calls):
            group = [calls[i]]
            if self._risk(calls[i]) == "read":
                while i + len(group) < len(calls) and self._risk(calls[i + len(group)]) == "read":
                    group.append(calls[i + len(group)])
            i += len(group)
            if len(group) > 1:
                plans = [self._plan(c) for c in group]
                for c, plan in zip(group, plans, strict=True):
                    yield ToolStarted(c.id, c.function.name, plan.key)
                gate = asyncio.Semaphore(PARALLEL_READS)
                entries = await asyncio.gather(*(
                    self._execute(c, plan, self._context(conv_id, c, history, board, shared),
                                  None, gate)
                    for c, plan in zip(group, plans, strict=True)))
                for entry in entries:
                    yield ToolResult(entry)
                continue
            call = group[0]
            plan = self._plan(call)
            ctx = self._context(conv_id, call, history, board, shared)
            approval: str | None = None
            if plan.problem is None and self._risk(call) != "read":
                decision = None
                async for event in self._approve(call, allowed, plan):
                    if isinstance(event, Question):
                        yield event
                    else:
                        decision = event
                assert decision is not None
                approval, denied_text = decision
                if denied_text is not None:
                    yield ToolResult(self._entry(call, ToolOutput(denied_text), 0, "denied",
                                                 approval, ctx))
                    continue
                if approval == "conversation":
                    allowed.add(call.function.name)
            yield ToolStarted(call.id, call.function.name, plan.key)
            yield ToolResult(await self._execute(call, plan, ctx, approval))

    def aborted(self, call: ToolCall, why: str, started: float | None = None
                ) -> ConversationMessage:
        """The entry answering a call that never finished (Stop, a crash)."""
        ms = int((time.monotonic() - started) * 1000) if started is not None else None
        return self.counter.with_count(ConversationMessage(
            role="tool", tool_call_id=call.id, content=why, tool_name=call.function.name,
            status="aborted", duration_ms=ms, mode=self.mode))

    # --- steps ---------------------------------------------------------------------------------

    def may_change(self, call: ToolCall) -> bool:
        """Whether the call may change files (a write, a command, an MCP tool that is not
        read-only): the checkpoints are taken before the first such call of a round."""
        return self._risk(call) != "read"

    def _risk(self, call: ToolCall) -> str:
        tool = self._by_name.get(call.function.name)
        return tool.risk if tool is not None else "read"  # unknown: answered at once

    def _context(self, conv_id: str, call: ToolCall, history: list[ConversationMessage],
                 board: TodoBoard, shared: dict[str, object]) -> ToolContext:
        return ToolContext(self.root, self.state, conv_id, call.id, history, self.sandbox,
                           self.network, self.env, board, shared, self.run_state)

    def _plan(self, call: ToolCall) -> _Plan:
        """The call checked once: its tool and arguments, or why it cannot run at all (it is
        answered without asking), and for a write the change it would make."""
        tool = self._by_name.get(call.function.name)
        try:
            raw = parse_arguments(call.function.arguments)
        except ToolError as e:
            return _Plan(tool, None, str(e))
        key = key_argument(tool, raw)
        if tool is None and (why := self.missing(call.function.name)) is not None:
            return _Plan(None, None, why, key)
        if tool is None:
            offered = ", ".join(t.name for t in self.tools) or "none"
            return _Plan(None, None, f"There is no tool named {call.function.name!r} in "
                                     f"{self.mode} mode; the tools available are: {offered}.",
                         key)
        try:
            args = tool.args.model_validate(raw)
        except ValidationError as e:
            return _Plan(tool, None, _validation_text(tool, e), key)
        if tool.risk != "write":
            return _Plan(tool, args, None, key)
        try:  # a change that cannot apply is answered at once, never put up for approval
            change = planned_content(args, self.root)
        except ToolError as e:
            return _Plan(tool, args, str(e), key)
        return _Plan(tool, args, None, key, change)

    async def _approve(self, call: ToolCall, allowed: set[str], plan: _Plan
                       ) -> AsyncIterator[Question | tuple[str, str | None]]:
        """Yields the question to ask, if any, then (approval, denial text or None)."""
        name = call.function.name
        if self.policy == "always":
            yield ("always", None)
            return
        if self.policy == "never":  # an explicit policy wins over anything remembered
            yield ("never", f"Not run: this session does not allow {name} (approval policy "
                            "'never'); nothing was changed. Say what you would have done, or "
                            "ask the user to allow it.")
            return
        if name in allowed:
            yield ("remembered", None)
            return
        question = Question(f"Allow {name}?", APPROVAL_CHOICES, self._describe(plan),
                            kind="approval")
        yield question
        choice = await question.wait()
        if choice == DENY:
            reason = f" Their reason: {question.note}" if question.note else ""
            yield ("denied", f"The user denied this {name} call; nothing was changed.{reason}")
            return
        yield ("conversation" if choice == ALLOW_CONVERSATION else "once", None)

    def _describe(self, plan: _Plan) -> str:
        """What the user approves: the diff of a write, the command and its sandbox, an MCP
        tool's server and arguments."""
        if isinstance(plan.tool, McpTool) and plan.tool.info is not None and plan.args:
            info = plan.tool.info
            arguments = json.dumps(plan.args.model_dump(), ensure_ascii=False, indent=1)
            where = ("The server is a remote service: what the tool does there is up to it."
                     if plan.tool.remote else "The server is a program of its own and runs "
                     "with your rights, outside Context Workbench's sandbox.")
            return (f"MCP server {info.server!r}, tool {info.tool!r}\n\n{arguments}\n\n"
                    f"Protection: none of ours. {where}")
        if isinstance(plan.args, ShellArgs):
            return (f"$ {plan.args.command}\n\nin {self.root}, timeout {plan.args.timeout} s\n"
                    f"Protection: {self.sandbox.describe(self.network)}")
        if plan.change is None:
            return ""
        return unified_diff(self.root, *plan.change)

    async def _execute(self, call: ToolCall, plan: _Plan, ctx: ToolContext,
                       approval: str | None,
                       gate: asyncio.Semaphore | None = None) -> ConversationMessage:
        """Run the call (once `gate` lets it: read-only calls run a few at a time)."""
        if gate is not None:
            async with gate:
                return await self._execute(call, plan, ctx, approval)
        started = time.monotonic()
        if plan.problem is not None or plan.tool is None or plan.args is None:
            return self._entry(call, ToolOutput(plan.problem or "", "error"), 0, "error",
                               approval, ctx)
        tool = plan.tool
        ctx.change = plan.change  # a write does what was approved, or nothing
        mark_started(ctx)
        try:
            output = await tool.run(plan.args, ctx)
        except ToolError as e:
            output = ToolOutput(str(e), "error")
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as e:  # a tool's bug is a result the model reads
            tail = "".join(traceback.format_exception_only(e)).strip()
            output = ToolOutput(f"{tool.name} failed unexpectedly: {redact(tail)[:2000]}",
                                "error")
        ms = int((time.monotonic() - started) * 1000)
        return self._entry(call, output, ms, output.status, approval, ctx)

    def _entry(self, call: ToolCall, output: ToolOutput, ms: int, status: Status,
               approval: str | None, ctx: ToolContext) -> ConversationMessage:
        # A page of an offloaded output is already a view of the whole: never offloaded again.
        threshold = 10**9 if call.function.name == READ_TOOL_RESULT.name else self.offload_tokens
        try:
            kept = keep(output, ctx, self.counter, threshold, self.secrets)
        except OSError as e:  # the output could not be kept on disk: say so, keep the rest
            kept_text = output.text or f"{output.header}(the output could not be read: {e})"
            kept = Kept(kept_text)
        entry = ConversationMessage(
            role="tool", tool_call_id=call.id, content=kept.content or "(no output)",
            tool_name=call.function.name, duration_ms=ms, status=status,
            offload=kept.offload, exit_code=output.exit_code, approval=approval, mode=self.mode)
        return self.counter.with_count(entry)


def mark_started(ctx: ToolContext) -> None:
    """Leave word that the call is about to run (see `started_file`): a crash from here on
    leaves its outcome unknown; before, it certainly did nothing. A mark that cannot be made
    only makes a crash's report more cautious."""
    mark = started_file(ctx.state, ctx.conv_id, ctx.call_id)
    try:
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()
    except OSError:
        pass
