"""One turn: user input -> request -> stream -> persisted log entries, reported as events.

The engine is the only code that turns a user's action into log entries, for the GUI, the CLI and
the tests alike. Every outcome is persisted before it is reported: a complete answer becomes an
assistant entry; any failure, including the user pressing Stop, becomes a visible `kind=error`
entry that carries the partial text streamed so far, so nothing shown on screen is ever lost.

The verbs, each an iterator of events (core.turn_events) the last of which settles it:

    verb               appends first       builds requests (1) from      settles with
    send               the user's message  the log                       TurnFinished
    continue_          -                   the log + "continue" (2)      TurnFinished
    retry              -                   the log less its failed tail  TurnFinished
    proceed            -                   the log (+ a nudge)           TurnFinished
    exchange           -                   the log, once; runs no tool   TurnFinished
    summarize          -                   no: its own prompt (3)        CompactionFinished
    close_interrupted  "aborted" results   no                            its end (synchronous)

(1) Through the one context service, `ProjectContext.build`. The "continue" instruction and the
nudge are sent once, never stored. (2) On a log that ends in tool results or a pause (the step
limit, the cost cap), continue_ is proceed. (3) Planned by core.context.summary; the summary is
appended at the end, or nothing is.

A turn (send, continue_, retry, proceed) answers the calls a crash left without results
(close_interrupted), appends what the table says, then goes round: an exchange (core.exchange:
one request, streamed; it appends the answer, or an error entry with what arrived), then the
tools the answer calls (a result entry each), until an answer calls none, a request fails, Stop,
the step limit or the cost cap (an error entry Continue goes on from), or the user pauses (or
aborts) the run. Its TurnFinished is "ok", "error" or "stopped", with the entry that ended it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from core.attachments import Attachment, user_message
from core.checkpoints.turn import Checkpointer, TurnRecorder
from core.context.builder import BudgetError, BuiltRequest
from core.context.service import ProjectContext
from core.cost import cap_refusal
from core.exchange import Exchange, error_entry, settled
from core.last_turn import last_turn
from core.llm.adapter import LLMClient
from core.model import PAUSES, ConversationMessage, ErrorInfo, ToolCall, continuable
from core.questions import Question
from core.request_copies import RequestCopies
from core.settings import LLMSettings
from core.store.errors import ReadOnlyError
from core.summarize import summarize
from core.tools.base import running_file, started_file
from core.tools.runner import ToolResult, ToolRunner
from core.turn_events import (
    DEFAULT_TURN,
    CompactionFinished,
    CompactionProgress,
    CompactionStarted,
    EngineEvent,
    EntryAppended,
    QuestionAsked,
    RequestBuilt,
    RequestStarted,
    Retrying,
    RunUpdated,
    SaveFailed,
    StoreNotice,
    StreamText,
    ToolSetup,
    ToolStarted,
    TurnFinished,
    TurnOptions,
)

# The events and options are re-exported: callers import everything about a turn from here.
__all__ = ["DEFAULT_TURN", "CompactionFinished", "CompactionProgress", "CompactionStarted",
           "Engine", "EngineEvent", "EntryAppended", "NothingToContinue",
           "NothingToRetry", "QuestionAsked", "RequestBuilt", "RequestStarted", "Retrying",
           "RunUpdated",
           "SaveFailed", "StoreNotice", "StreamText", "ToolSetup", "ToolStarted", "TurnFinished",
           "TurnOptions"]

NOTHING_TO_SEND = ("Nothing was sent: every message of this conversation is left out of the "
                   "context (⊘ not sent). Include one again (right-click it: Include in the "
                   "context again; `workbench include`) or write a new message.")
RETRY_DELAYS = (2.0, 5.0, 15.0)  # backoff for transient failures before any text arrived
CONTINUE_INSTRUCTION = (
    "[Your previous answer was cut off ({cause}). Continue exactly where it stopped, without "
    "repeating anything you already wrote.]"
)


class NothingToContinue(ValueError):
    """The conversation does not end in an answer that can be continued; says why."""


INTERRUPTED_RUNNING = ("Aborted: the app closed while this call was running; whether it ran to "
                       "the end, and what it did, is unknown.")
INTERRUPTED_WAITING = ("Not run: the app closed before this call started (it was waiting for "
                       "approval, or for its turn); it did nothing.")

LEFT_UPSTREAM = ("Not in this branch: this call ran in the conversation the branch was made "
                 "from, and its result was left out when the branch was made; what it did (to "
                 "files, for one) may still be there.")



class NothingToRetry(ValueError):
    """The conversation does not end in a failed answer, so there is nothing to run again."""


class Engine:
    """Runs turns against one project's conversations.

    Attributes:
        context: the project context (builds, caches, run state; its writer appends).
        client: the LLM adapter.
        tools: what running tools needs (None: a read-only project, no tools run).
        sent: the last request sent per conversation: the next one's stable prefix is
            measured against it (and, for providers that need them, cache marks placed).
        saved: conversation -> (its newest saved request copy, the request it holds): what
            was last sent, in memory, so nothing reads a copy of megabytes back while a turn
            runs.
    """

    def __init__(
        self,
        context: ProjectContext,
        client: LLMClient | None = None,
        requests_dir: Path | None = None,
        retry_delays: tuple[float, ...] = RETRY_DELAYS,
        tools: ToolSetup | None = None,
    ) -> None:
        self.context = context
        self.store = context.store
        self.writer = context.writer
        self.tools = tools
        self.requests_dir = requests_dir
        self.retry_delays = retry_delays
        self.client = client or LLMClient()
        self.sent: dict[str, list[dict[str, Any]]] = {}
        self.saved: dict[str, tuple[Path, BuiltRequest]] = {}
        # the project's file checkpoints around agent turns (see core.checkpoints)
        self.checkpoints = Checkpointer(tools.root, tools.state) if tools is not None else None
        self._recorders: dict[str, TurnRecorder] = {}

    async def send(
        self, conv_id: str, text: str, settings: LLMSettings, options: TurnOptions = DEFAULT_TURN,
        attachments: list[Attachment] | None = None,
    ) -> AsyncIterator[EngineEvent]:
        """Append the user's message (with its attachments as content parts, see
        core.attachments) and stream the answer (running the tools it calls)."""
        settings = _for_agent(settings, options)
        for event in self.close_interrupted(conv_id):
            yield event
        user = self.context.counter(settings.model).with_count(
            user_message(text, attachments or [], mode=options.mode))
        written = self.writer.write(conv_id, [user], "your message")
        for event in written.events:
            yield event
        if not written.ok:  # nothing was sent: the message goes back to the user, untouched
            yield TurnFinished("error", written.entries[0])
            return
        async for event in self._turn(conv_id, settings, options):
            yield event

    async def continue_(
        self, conv_id: str, settings: LLMSettings, options: TurnOptions = DEFAULT_TURN
    ) -> AsyncIterator[EngineEvent]:
        """Resume the answer the conversation ends in (a stopped, cut or interrupted one).

        The model sees its own partial answer and its "unfinished" marker, then a one-off
        instruction (never stored) to continue it; the new entry records which one it
        continues. After a pause (the step limit, the cost cap), or tool results the model has
        not seen yet, it is `proceed` instead. Pins, exclusions and notices after the answer do
        not matter.

        Raises:
            NothingToContinue: the conversation does not end in a continuable answer.
        """
        settings = _for_agent(settings, options)
        for event in self.close_interrupted(conv_id):
            yield event
        last = last_turn(self.store.load(conv_id).messages).last
        if last is not None and (last.role == "tool" or (
                last.error is not None and last.error.type in PAUSES)):
            async for event in self._turn(conv_id, settings, options):
                yield event
            return
        if not continuable(last):
            raise NothingToContinue(_why_not_continuable(last))
        assert last is not None
        cause = last.error.type.replace("_", " ") if last.error else "output token limit"
        async for event in self._turn(conv_id, settings, options, continues=last.id,
                                      instruction=CONTINUE_INSTRUCTION.format(cause=cause)):
            yield event

    async def retry(
        self, conv_id: str, settings: LLMSettings, options: TurnOptions = DEFAULT_TURN
    ) -> AsyncIterator[EngineEvent]:
        """Run the failed request again from scratch: the error entries the conversation ends
        in stay in the log (nothing is rewritten) but are left out of the new request.

        Raises:
            NothingToRetry: the conversation does not end in a failed answer.
        """
        settings = _for_agent(settings, options)
        for event in self.close_interrupted(conv_id):
            yield event
        self.check_retry(conv_id)
        async for event in self._turn(conv_id, settings, options, drop_failed=True):
            yield event

    def check_retry(self, conv_id: str) -> None:
        """Raises NothingToRetry unless the conversation ends in a failed answer."""
        if not last_turn(self.store.load(conv_id).messages).retryable:
            raise NothingToRetry(
                "The conversation does not end in a failed answer, so there is nothing to run "
                "again; send a new message instead.")

    async def proceed(
        self, conv_id: str, settings: LLMSettings, options: TurnOptions = DEFAULT_TURN,
        instruction: str | None = None,
    ) -> AsyncIterator[EngineEvent]:
        """A turn from the log as it stands (a run's next request, an answer regenerated):
        nothing is appended first; `instruction` is a one-off nudge, never stored."""
        settings = _for_agent(settings, options)
        for event in self.close_interrupted(conv_id):
            yield event
        async for event in self._turn(conv_id, settings, options, instruction=instruction):
            yield event

    async def exchange(
        self, conv_id: str, settings: LLMSettings, options: TurnOptions = DEFAULT_TURN,
        drop_failed: bool = False, continues: str | None = None,
        instruction: str | None = None, later: list[RequestCopies] | None = None,
    ) -> AsyncIterator[EngineEvent]:
        """One exchange, a turn's round without its tools: build the request from the
        conversation as it stands on disk and make the exchange (see core.exchange);
        `_rounds` calls it again after appending the tools' results. `drop_failed`: leave out
        the failed answer the log ends in (Retry).
        `later`: where an answer that calls tools leaves its request's copies, for the loop
        to settle when the turn ends (the tools do not wait for them)."""
        if not self.store.writable:  # a read-only view never sends: it could not keep the answer
            raise ReadOnlyError(self.store.read_only_reason or "the project is read-only")
        await self._start_servers(options)
        history = self.store.load(conv_id).messages
        if drop_failed:
            history = last_turn(history).without_failed(history)
        run = self.context.run_state(conv_id, history) if options.mode == "run" else None
        self.writer.expect(conv_id, run.tags() if run is not None and run.open else None)
        try:
            built = self.context.build(conv_id, history, settings, options.mode,
                                       run_context=options.run_context, agent=options.agent)
        except BudgetError as e:
            for event in self._not_sent(conv_id, settings, options, ErrorInfo(
                    type="context_overflow", retryable=False,
                    message=self.context.budget_message(e, settings))):
                yield event
            return
        if instruction is None and all(m.get("role") == "system" for m in built.messages):
            # every entry is excluded from the context: a request of the system prompt alone
            # asks the model nothing (Anthropic refuses it); a one-off instruction (Continue's,
            # a run's nudge) would be its user message
            for event in self._not_sent(conv_id, settings, options, ErrorInfo(
                    type="nothing_to_send", retryable=False, message=NOTHING_TO_SEND)):
                yield event
            return
        async for event in Exchange(self, conv_id, settings, options, history, built,
                                    continues, instruction, later).run():
            yield event

    def _not_sent(self, conv_id: str, settings: LLMSettings, options: TurnOptions,
                  info: ErrorInfo) -> Iterator[EngineEvent]:
        """The request could not be made: the error entry that says why ends the turn."""
        entry = self.context.counter(settings.model).with_count(
            error_entry(info, "", settings, options.mode))
        written = self.writer.write(conv_id, [entry], "the error")
        yield from written.events
        yield TurnFinished("error", written.entries[0])

    async def _turn(
        self, conv_id: str, settings: LLMSettings, options: TurnOptions, **first: Any
    ) -> AsyncIterator[EngineEvent]:
        """The turn after its first appends: its rounds (`_rounds`), then the copies of the
        requests whose answers called tools settled once, and the turn's "after" checkpoint;
        the rounds' TurnFinished comes last."""
        later: list[RequestCopies] = []
        finished: TurnFinished | None = None
        recorder = self._recorder(conv_id, options)
        try:
            async for event in self._rounds(conv_id, settings, options, later, first):
                if isinstance(event, TurnFinished):
                    finished = event
                else:
                    yield event
            assert finished is not None
            for copies in later:
                notes, stop = await settled(copies)
                for note in notes:
                    yield StoreNotice(note)
                if stop:  # a Stop while they were written: the rest finish on their thread
                    if finished.status == "ok":
                        finished = TurnFinished("stopped", finished.message)
                    break
            if recorder is not None and (said := await asyncio.to_thread(recorder.after)):
                yield StoreNotice(said)
            yield finished
        finally:  # Stop, or a crash of the turn: the "after" checkpoint all the same
            if recorder is not None:
                self._recorders.pop(conv_id, None)
                recorder.after()

    def _recorder(self, conv_id: str, options: TurnOptions) -> TurnRecorder | None:
        """The checkpoints of this turn (none in chat mode or without tools)."""
        if self.checkpoints is None or options.mode == "chat":
            return None

        def entry() -> str:
            users = [m for m in self.store.load(conv_id).messages if m.role == "user"]
            return users[-1].id if users else ""

        recorder = self._recorders[conv_id] = self.checkpoints.turn(conv_id, entry)
        return recorder

    async def _rounds(
        self, conv_id: str, settings: LLMSettings, options: TurnOptions,
        later: list[RequestCopies], first: dict[str, Any],
    ) -> AsyncIterator[EngineEvent]:
        """Rounds, each an exchange then the tools its answer calls, until an answer calls
        none, a request fails, Stop, the step limit or the cost cap (an error entry Continue
        goes on from), or the user pauses or aborts the run; a TurnFinished comes last.
        `first`: the first exchange's arguments (what the verb asked for)."""
        steps = 0
        kwargs: dict[str, Any] = {**first, "later": later}
        while True:
            finished: TurnFinished | None = None
            async for event in self.exchange(conv_id, settings, options, **kwargs):
                if isinstance(event, TurnFinished):
                    finished = event
                else:
                    yield event
            kwargs = {"later": later}
            assert finished is not None
            calls = finished.message.tool_calls
            if finished.status != "ok" or not calls or self.tools is None:
                yield finished
                return
            outcome: list[TurnFinished] = []
            async for event in self._run_tools(conv_id, calls, settings, options, outcome):
                yield event
            if outcome:
                yield outcome[0]
                return
            steps += 1
            limit = self._step_limit(conv_id, steps, settings, options)
            if limit is None:  # the user paused or aborted the run: stop after this round
                yield finished
                return
            if isinstance(limit, ErrorInfo):
                entry = self.context.counter(settings.model).with_count(
                    error_entry(limit, "", settings, options.mode))
                written = self.writer.write(conv_id, [entry], "the step-limit notice")
                for event in written.events:
                    yield event
                yield TurnFinished("error", written.entries[0])
                return

    def _step_limit(self, conv_id: str, steps: int, settings: LLMSettings,
                    options: TurnOptions) -> ErrorInfo | bool | None:
        """After `steps` rounds of tool calls: False to go on, the step-limit error to stop
        at, or None when the user paused or aborted the run meanwhile. A run counts rounds
        per step, not per turn."""
        limit = options.step_limit or settings.step_limit
        message = (f"The agent paused after {steps} round{'s' if steps != 1 else ''} of "
                   "tool calls (the step limit for one turn). Continue lets it go on.")
        run = self.context.run_state(conv_id) if options.mode == "run" else None
        if run is not None and run.status in ("paused", "aborted"):
            return None
        active = run.active if run is not None and run.open else None
        if active is not None:
            steps, limit = active.rounds, active.step.max_rounds or limit
            message = (f"Step {active.step.title!r} paused after {steps} round"
                       f"{'s' if steps != 1 else ''} of tool calls (its step limit). "
                       "Continue lets it go on.")
        if steps >= limit:
            return ErrorInfo(type="step_limit", retryable=False, message=message)
        return self._over_cap(conv_id, settings)

    def _over_cap(self, conv_id: str, settings: LLMSettings) -> ErrorInfo | bool:
        """Between rounds: a conversation (or project) that has spent its cap pauses the
        agent (core.cost); Continue goes on once the cap is raised."""
        why = cap_refusal(self.store, conv_id, settings.model, settings.cost_cap,
                          settings.project_cost_cap, 0)
        if why is None:
            return False
        return ErrorInfo(type="cost_cap", retryable=False,
                         message=f"The agent paused: {why}. Raise the cap (Settings → Cost "
                                 "cap, or WORKBENCH_COST_CAP), then Continue lets it go on.")

    async def summarize(
        self, conv_id: str, settings: LLMSettings, focus: str | None = None,
        automatic: bool = False,
    ) -> AsyncIterator[EngineEvent]:
        """Compaction's LLM stage (see `core.summarize`): merge the entries no summary covers
        yet into the running summary and append it; a failed, empty or oversized summary
        leaves the log as it was and says why."""
        async for event in summarize(self.context, self.client, conv_id, settings, focus,
                                     automatic):
            yield event

    async def _start_servers(self, options: TurnOptions) -> None:
        """The project's MCP servers, started the first time a turn offers tools (they stay
        up until the project closes); their secrets never reach a log."""
        hub = self.context.mcp
        if hub is None or not hub.servers or options.mode == "chat" or self.tools is None:
            return
        await hub.start()
        self.writer.add_secrets(hub.secrets())

    async def close(self) -> None:
        """The project closes: its MCP servers stop."""
        if self.context.mcp is not None:
            await self.context.mcp.close()

    def runner(self, conv_id: str, settings: LLMSettings, options: TurnOptions) -> ToolRunner:
        """The tool runner for one turn of `conv_id` (the mode's and agent's tools)."""
        assert self.tools is not None
        setup = self.tools
        meta = self.store.meta(conv_id)
        network = options.network
        if network is None:
            network = self.store.network_allowed(meta)
        run = self.context.run_state(conv_id) if options.mode == "run" else None
        return ToolRunner(setup.root, setup.state,
                          self.context.tools(options.mode, options.agent, run, meta),
                          self.context.counter(settings.model), options.approve,
                          setup.sandbox, network, options.mode, settings.tool_output_tokens,
                          setup.env, run,
                          lambda entry: self.writer.remembered(conv_id, entry), self.writer.secrets,
                          self.context.mcp.unavailable if self.context.mcp is not None else
                          lambda _name: None)

    async def _run_tools(
        self, conv_id: str, calls: list[ToolCall], settings: LLMSettings, options: TurnOptions,
        outcome: list[TurnFinished],
    ) -> AsyncIterator[EngineEvent]:
        """Run `calls` and write one result entry per call. On Stop, the calls without a
        result are answered "aborted" (a running command is killed first). `outcome` gets the
        TurnFinished when the turn ends here."""
        runner = self.runner(conv_id, settings, options)
        if said := await self._before_change(conv_id, runner, calls):
            yield StoreNotice(said)
        history = self.store.load(conv_id).messages
        answered: set[str] = set()
        running: dict[str, float] = {}
        last: ConversationMessage | None = None
        try:
            async for event in runner.run(conv_id, calls, history):
                if isinstance(event, Question):
                    yield QuestionAsked(event)
                elif isinstance(event, ToolStarted):
                    running[event.call_id] = time.monotonic()
                    yield event
                elif isinstance(event, ToolResult):
                    answered.add(event.entry.tool_call_id or "")
                    written = self.writer.write(conv_id, [event.entry], "a tool's result")
                    last = written.entries[0]
                    if written.ok:
                        self._forget_started(conv_id, [event.entry.tool_call_id or ""])
                    for ev in written.events:
                        yield ev
                    if not written.ok:
                        outcome.append(TurnFinished("error", last))
                        return
        except (asyncio.CancelledError, GeneratorExit) as stop:
            entries = [runner.aborted(
                c, "Stopped by the user while this call ran; it was killed. Anything it did "
                   "before that remains." if c.id in running else
                   "Not run: the user stopped the turn first.", running.get(c.id))
                for c in calls if c.id not in answered]
            # a failed write is answered as aborted when the conversation is next used
            written = self.writer.write(conv_id, entries, "the stopped calls")
            if written.ok:
                self._forget_started(conv_id, [c.id for c in calls if c.id not in answered])
            if isinstance(stop, GeneratorExit):
                raise
            appended = written.entries if written.ok else []
            for entry in appended:
                yield EntryAppended(entry)
            outcome.append(TurnFinished("stopped", appended[-1] if appended else
                                        (last or written.entries[-1])))
            return

    async def _before_change(self, conv_id: str, runner: ToolRunner, calls: list[ToolCall]
                             ) -> str | None:
        """The files checkpointed before a round that may change them; a notice, or None."""
        recorder = self._recorders.get(conv_id)
        if recorder is None or not any(runner.may_change(c) for c in calls):
            return None
        return await asyncio.to_thread(recorder.before)

    def _started(self, conv_id: str, call_id: str) -> bool:
        """Whether a call the app closed on had started (without tools here: assume so): in
        this conversation, or in one it grew from (a branch cut inside a batch a crash
        interrupted shares the call, whose marks are where it ran)."""
        if self.tools is None:
            return True
        state = self.tools.state
        return any(started_file(state, conv, call_id).exists() or
                   running_file(state, conv, call_id).exists()
                   for conv in (conv_id, *self.store.grew_from(conv_id)))

    def _forget_started(self, conv_id: str, call_ids: list[str]) -> None:
        if self.tools is None:
            return
        for call_id in call_ids:
            try:
                started_file(self.tools.state, conv_id, call_id).unlink(missing_ok=True)
            except OSError:
                pass  # a stale mark only makes a later crash report more cautious

    def close_interrupted(self, conv_id: str) -> Iterator[EngineEvent]:
        """Answer the tool calls a crash (or a closed window) left without results as
        "aborted", so the log reads as it happened and the next request is complete."""
        if not self.store.writable:
            return
        loaded = self.store.load(conv_id)
        for text in loaded.problems:  # a repair made while reading: said once, here
            yield StoreNotice(text)
        calls = last_turn(loaded.messages).unanswered
        if not calls:
            return
        asked = next(m for m in reversed(loaded.messages) if m.tool_calls and calls[0] in
                     m.tool_calls)  # the answer that made them: their results join its step
        entries = [self.context.counter(None).with_count(ConversationMessage(
            role="tool", tool_call_id=c.id, tool_name=c.function.name, status="aborted",
            content=self._interrupted(conv_id, c.id), mode=asked.mode, run_id=asked.run_id,
            step_id=asked.step_id)) for c in calls]
        written = self.writer.write(conv_id, entries, "the interrupted calls")
        if not written.ok:
            return  # tried again when the conversation is next used
        if self.tools is not None:  # what a killed command had printed: nobody will read it
            for c in calls:
                running_file(self.tools.state, conv_id, c.id).unlink(missing_ok=True)
        self._forget_started(conv_id, [c.id for c in calls])
        for entry in written.entries:
            yield EntryAppended(entry)

    def _interrupted(self, conv_id: str, call_id: str) -> str:
        """What the model reads of a call left without a result: never "did nothing" of one
        that ran where the conversation grew from."""
        if self._started(conv_id, call_id):
            return INTERRUPTED_RUNNING
        if self.store.ran_upstream(conv_id, call_id):
            return LEFT_UPSTREAM
        return INTERRUPTED_WAITING

    def saved_request(self, conv_id: str) -> tuple[Path, BuiltRequest] | None:
        """The newest copy this engine saved of a request of the conversation, with the request
        itself (what `read_request` of that path would give, without reading it back)."""
        return self.saved.get(conv_id)


def _why_not_continuable(last: ConversationMessage | None) -> str:
    if last is not None and last.error is not None and not last.text():
        return ("Nothing of this answer arrived before it failed, so there is no unfinished "
                "answer to continue; Retry runs the request again.")
    if last is not None and last.error is not None:
        return (f"This answer failed with {last.error.type.replace('_', ' ')}; continuing "
                "would fail the same way. Fix the cause (see the message), then Retry.")
    return "The conversation does not end in an unfinished answer."


def _for_agent(settings: LLMSettings, options: TurnOptions) -> LLMSettings:
    """The agent's own model, when it names one."""
    if options.agent is not None and options.agent.model:
        return settings.model_copy(update={"model": options.agent.model})
    return settings
