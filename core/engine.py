"""One turn: user input -> request -> stream -> persisted log entries, reported as events.

The engine is the only code that turns a user's action into log entries, for the GUI, the CLI and
the tests alike. Every outcome is persisted before it is reported: a complete answer becomes an
assistant entry; any failure, including the user pressing Stop, becomes a visible `kind=error`
entry that carries the partial text streamed so far, so nothing shown on screen is ever lost.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.context.builder import BudgetError, BuiltRequest
from core.context.calibration import Calibration
from core.context.prompts import PromptComposer
from core.context.report_text import cached_tokens
from core.context.service import ContextService, run_tools
from core.llm.adapter import (
    Finished,
    LLMClient,
    LLMRequest,
    TextDelta,
    ToolCallsReady,
    Usage,
    keys_in_use,
)
from core.llm.errors import ContextOverflow, LLMError, ToolsUnsupported
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage, ErrorInfo, Mode, ToolCall, continuable, retryable_turn
from core.questions import Question
from core.redact import redact
from core.request_copies import RequestCopies, cache_breakpoints, remember
from core.runs.state import RunState
from core.settings import LLMSettings
from core.store.conversations import ConversationStore
from core.store.errors import ReadOnlyError, StoreError, StoreWriteError, describe_os_error
from core.summarize import summarize
from core.tools.results import RESULTS_DIR, result_name
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
           "TurnOptions", "unanswered_calls"]

RETRY_DELAYS = (2.0, 5.0, 15.0)  # backoff for transient failures before any text arrived
MAX_RETRY_WAIT = 120.0
MAX_OVERFLOW_REBUILDS = 3
PARTIAL_FLUSH_S = 1.0  # the text being received reaches disk at least this often
CONTINUE_INSTRUCTION = (
    "[Your previous answer was cut off ({cause}). Continue exactly where it stopped, without "
    "repeating anything you already wrote.]"
)


class NothingToContinue(ValueError):
    """The conversation does not end in an answer that can be continued; says why."""


class NothingToRetry(ValueError):
    """The conversation does not end in a failed answer, so there is nothing to run again."""


SAVE_FAILED = ("Could not save {what} ({cause}): it is kept in memory, shown here. Free some "
               "space (or fix the folder's permissions), then press Save.")




class Engine:
    """Runs turns against one conversation store.

    Attributes:
        store: where entries are persisted.
        client: the LLM adapter.
    """

    def __init__(
        self,
        store: ConversationStore,
        client: LLMClient | None = None,
        counter_for: Callable[[str | None], TokenCounter] = TokenCounter.for_model,
        composer: PromptComposer | None = None,
        requests_dir: Path | None = None,
        calibration: Calibration | None = None,
        retry_delays: tuple[float, ...] = RETRY_DELAYS,
        context: ContextService | None = None,
        tools: ToolSetup | None = None,
    ) -> None:
        self.store = store
        self.tools = tools
        self.context = context or ContextService(store, composer, calibration, counter_for)
        self.composer = self.context.composer
        self.calibration = self.context.calibration
        self.requests_dir = requests_dir
        self.retry_delays = retry_delays
        self.client = client or LLMClient()
        # The last request sent per conversation: the next one's stable prefix is measured
        # against it (and, for providers that need them, the cache breakpoints placed).
        self._sent: dict[str, list[dict[str, Any]]] = {}
        # The run and step a run-mode request was built for: its answer and tool results
        # belong there, even if the user skipped the step while it was under way.
        self._request_tags: dict[str, dict[str, str | None]] = {}
        # conversation -> (its newest kept copy, the request it holds): what was last sent,
        # in memory, so nothing reads a copy of megabytes back while the next turn runs
        self._kept: dict[str, tuple[Path, BuiltRequest]] = {}

    def counter(self, model: str | None) -> TokenCounter:
        return self.context.counter(model)

    async def send(
        self, conv_id: str, text: str, settings: LLMSettings, options: TurnOptions = DEFAULT_TURN
    ) -> AsyncIterator[EngineEvent]:
        """Append the user's message and stream the answer (running the tools it calls)."""
        settings = _for_agent(settings, options)
        for event in self.close_interrupted(conv_id):
            yield event
        counter = self.counter(settings.model)
        user = counter.with_count(ConversationMessage(role="user", content=text,
                                                      mode=options.mode))
        saved = True
        for event in self._persist(conv_id, user, "your message"):
            saved = saved and not isinstance(event, SaveFailed)
            yield event
        if not saved:  # nothing was sent: the message goes back to the user, untouched
            yield TurnFinished("error", user)
            return
        async for event in self._loop(conv_id, settings, options):
            yield event

    async def continue_(
        self, conv_id: str, settings: LLMSettings, options: TurnOptions = DEFAULT_TURN
    ) -> AsyncIterator[EngineEvent]:
        """Resume the answer the last entry holds (a stopped, cut or interrupted one).

        The model sees its own partial answer and the LLM_ERROR block, then a one-off
        instruction (never stored) to carry on; the new entry records which one it continues.

        After the agent's step limit, or tool results the model has not seen yet, it carries on
        with the work instead.

        Raises:
            NothingToContinue: the last entry is not a continuable answer.
        """
        settings = _for_agent(settings, options)
        for event in self.close_interrupted(conv_id):
            yield event
        history = self.store.load(conv_id).messages
        last = history[-1] if history else None
        if last is not None and (last.role == "tool" or (
                last.error is not None and last.error.type == "step_limit")):
            async for event in self._loop(conv_id, settings, options):
                yield event
            return
        if not continuable(last):
            if last is not None and last.error is not None and not last.text():
                raise NothingToContinue(
                    "Nothing of this answer arrived before it failed, so there is no unfinished "
                    "answer to continue; Retry runs the request again.")
            if last is not None and last.error is not None:
                raise NothingToContinue(
                    f"This answer failed with {last.error.type.replace('_', ' ')}; continuing "
                    "would fail the same way. Fix the cause (see the message), then Retry.")
            raise NothingToContinue("The conversation does not end in an unfinished answer.")
        assert last is not None
        cause = last.error.type.replace("_", " ") if last.error else "output token limit"
        async for event in self._loop(conv_id, settings, options, continues=last.id,
                                      instruction=CONTINUE_INSTRUCTION.format(cause=cause)):
            yield event

    async def retry(
        self, conv_id: str, settings: LLMSettings, options: TurnOptions = DEFAULT_TURN
    ) -> AsyncIterator[EngineEvent]:
        """Run the failed request again from scratch: the error entries at the end of the log
        stay there (nothing is rewritten) but are left out of the new request.

        Raises:
            NothingToRetry: the conversation does not end in a failed answer.
        """
        settings = _for_agent(settings, options)
        for event in self.close_interrupted(conv_id):
            yield event
        self.check_retry(conv_id)
        async for event in self._loop(conv_id, settings, options, drop_trailing_errors=True):
            yield event

    def check_retry(self, conv_id: str) -> None:
        """Raises NothingToRetry unless the conversation ends in a failed answer."""
        if not retryable_turn(self.store.load(conv_id).messages):
            raise NothingToRetry(
                "The conversation does not end in a failed answer, so there is nothing to run "
                "again; send a new message instead.")

    async def respond(
        self, conv_id: str, settings: LLMSettings, options: TurnOptions = DEFAULT_TURN,
        drop_trailing_errors: bool = False, continues: str | None = None,
        instruction: str | None = None,
    ) -> AsyncIterator[EngineEvent]:
        """One step: build the request from the conversation as it stands on disk, send it
        (with automatic retries and overflow rebuilds), persist the answer. A tool loop calls
        it again after appending the tools' results."""
        mode = options.mode
        if not self.store.writable:  # a read-only view never sends: it could not keep the answer
            raise ReadOnlyError(self.store.read_only_reason or "the project is read-only")
        counter = self.counter(settings.model)
        history = self.store.load(conv_id).messages
        if drop_trailing_errors:
            while history and history[-1].kind == "error":
                history.pop()
        started = time.monotonic()
        self._request_tags.pop(conv_id, None)
        if mode == "run":
            run = self.context.run_state(conv_id, history)
            if run is not None and run.open:
                self._request_tags[conv_id] = run.tags()
        try:
            built = self.context.build(conv_id, history, settings, mode,
                                       run_context=options.run_context, agent=options.agent)
        except BudgetError as e:
            info = ErrorInfo(type="context_overflow", message=self.budget_message(e, settings),
                             retryable=False)
            entry = self._error_entry(info, [], settings, mode, 0, counter)
            for event in self._persist(conv_id, entry, "the error"):
                yield event
            yield TurnFinished("error", entry)
            return
        notes: list[str] = []
        previous = self._sent.get(conv_id)
        copies = RequestCopies(self.requests_dir, conv_id, notes, previous, counter,
                               self._kept)
        copies.add(built)
        yield RequestBuilt(built)
        messages = built.messages
        if instruction:
            messages = [*messages, {"role": "user", "content": instruction}]
        request = LLMRequest(
            model=settings.model,
            messages=messages,
            api_base=settings.api_base,
            max_tokens=settings.max_output_tokens,
            key_name=settings.key_name,
            tools=built.tools or None,
            timeout=settings.request_timeout,
            cache_breakpoints=cache_breakpoints(previous, messages),
        )
        remember(self._sent, conv_id, messages)
        yield RequestStarted(settings.model, len(messages))

        parts: list[str] = []
        calls: list[ToolCall] = []
        usage: dict[str, Any] | None = None
        finish: str | None = None

        def elapsed_ms() -> int:
            return int((time.monotonic() - started) * 1000)

        attempt = overflows = 0
        last_flush = time.monotonic() - PARTIAL_FLUSH_S + 0.2  # first flush soon after text
        try:
            while True:
                try:
                    async for ev in self.client.stream(request):
                        copies.start()  # the request is out: now keep its copy
                        if isinstance(ev, TextDelta):
                            parts.append(ev.text)
                            now = time.monotonic()
                            if now - last_flush >= PARTIAL_FLUSH_S:
                                last_flush = now
                                self._write_partial(conv_id, parts, settings, mode, continues,
                                                    notes)
                            yield StreamText(ev.text)
                        elif isinstance(ev, ToolCallsReady):
                            calls = ev.calls
                        elif isinstance(ev, Usage):
                            usage = ev.raw or {"prompt_tokens": ev.prompt_tokens,
                                               "completion_tokens": ev.completion_tokens}
                        elif isinstance(ev, Finished):
                            finish = ev.reason
                    break
                except ContextOverflow as e:
                    # The provider refused the length: rebuild smaller (its stated limit, else
                    # three quarters of what we assumed), at most 3 times, each time smaller.
                    if parts or overflows >= MAX_OVERFLOW_REBUILDS:
                        raise
                    window = e.limit or int(built.report.window * 0.75)
                    if e.limit and self.calibration is not None:
                        self.calibration.remember_window(settings.model, e.limit)
                    try:
                        smaller = self.context.build(conv_id, history, settings, mode,
                                                     known_window=window,
                                                     run_context=options.run_context,
                                                     agent=options.agent)
                    except BudgetError as budget:
                        raise ContextOverflow(
                            f"The provider accepts {window:,} tokens for {settings.model}, and "
                            f"even the system prompt with your latest message needs "
                            f"{budget.needed:,}. Shorten the message, or choose a model with a "
                            "larger window in Settings (where a remembered limit can also be "
                            "reset).", details=e.details, limit=e.limit) from e
                    if smaller.report.used >= built.report.used:
                        raise ContextOverflow(
                            f"{e.message} Rebuilding with a smaller budget did not make the "
                            "request any shorter, so it was not sent again.",
                            details=e.details, limit=e.limit) from e
                    overflows += 1
                    built = smaller
                    copies.add(built)
                    yield RequestBuilt(built)
                    messages = built.messages + ([{"role": "user", "content": instruction}]
                                                 if instruction else [])
                    request = replace(request, messages=messages, cache_breakpoints=(
                        cache_breakpoints(previous, messages)))
                    remember(self._sent, conv_id, messages)
                    yield Retrying(overflows, MAX_OVERFLOW_REBUILDS, 0.0,
                                   f"The request was too long for the model (limit "
                                   f"{window:,} tokens); rebuilt it smaller.")
                except ToolsUnsupported as e:
                    # A model without tool support: the same request without tools (chat
                    # offers read-only tools to every model), remembered for the model.
                    if parts or not request.tools:
                        raise
                    self.context.no_tools.add(settings.model)
                    built = self.context.build(conv_id, history, settings, mode,
                                               run_context=options.run_context,
                                               agent=options.agent)
                    copies.add(built)
                    yield RequestBuilt(built)
                    messages = built.messages + ([{"role": "user", "content": instruction}]
                                                 if instruction else [])
                    request = replace(request, messages=messages, tools=None,
                                      cache_breakpoints=cache_breakpoints(previous, messages))
                    remember(self._sent, conv_id, messages)
                    yield StoreNotice(f"{e.message} The conversation goes on without tools; "
                                      "Agent mode needs a model that supports them.")
                except LLMError as e:
                    # Safe to repeat only while nothing has been shown: afterwards the partial
                    # answer is kept and Continue or Retry is the user's call.
                    limit = min(settings.auto_retries, len(self.retry_delays))
                    if parts or not e.retryable or attempt >= limit:
                        raise
                    delay = e.retry_after if e.retry_after is not None \
                        else self.retry_delays[attempt]
                    delay = min(delay, MAX_RETRY_WAIT)
                    attempt += 1
                    yield Retrying(attempt, limit, delay, e.message)
                    await asyncio.sleep(delay)  # Stop cancels the wait like the stream
        except LLMError as e:
            entry = self._error_entry(e.info(partial=bool(parts)), parts, settings, mode,
                                      elapsed_ms(), counter, continues)
            await copies.settle()
            for event in self._persist(conv_id, entry, "the partial answer", notes):
                yield event
            yield TurnFinished("error", entry)
            return
        except Exception as e:  # noqa: BLE001 - a bug of ours must not lose what was streamed
            info = ErrorInfo(
                type="provider_error",
                message="Something went wrong while receiving the answer. What arrived is kept.",
                retryable=True, partial=bool(parts),
                # A traceback may quote a header or a setting: no key in use leaves the process.
                details=redact("".join(traceback.format_exception(e))[-4000:],
                               keys_in_use(request)),
            )
            entry = self._error_entry(info, parts, settings, mode, elapsed_ms(), counter,
                                      continues)
            await copies.settle()
            for event in self._persist(conv_id, entry, "the partial answer", notes):
                yield event
            yield TurnFinished("error", entry)
            return
        except (asyncio.CancelledError, GeneratorExit) as stop:
            # Stop: the partial answer is kept as a "stopped" entry and reported like any other
            # (the turn then ends normally). A generator being closed cannot report: it raises.
            copies.start()  # written in the background; nobody waits for them now
            info = ErrorInfo(type="stopped", message="Stopped by you. The partial answer is kept.",
                             retryable=True, partial=bool(parts))
            entry = self._error_entry(info, parts, settings, mode, elapsed_ms(), counter,
                                      continues)
            entry = self._tagged(conv_id, entry)  # a run's stopped answer stays with its step
            try:
                self._append(conv_id, entry)
            except (StoreError, OSError) as e:
                # The sidecar keeps the text for the next open.
                self._write_partial(conv_id, parts, settings, mode, continues, [])
                if isinstance(stop, GeneratorExit):
                    raise
                cause = _write_cause(e)
                yield SaveFailed(SAVE_FAILED.format(what="the partial answer", cause=cause),
                                 [entry], "the partial answer", cause)
                yield TurnFinished("stopped", entry)
                return
            if isinstance(stop, GeneratorExit):
                raise
            yield EntryAppended(entry)
            yield TurnFinished("stopped", entry)
            return

        built.report.cached_tokens = cached_tokens(usage)
        if self.calibration is not None and usage and usage.get("prompt_tokens"):
            self.calibration.observe(settings.model, built.report.used, int(usage["prompt_tokens"]))
        if finish == "length" and not calls:
            # The model was cut off by the output limit: an unfinished answer, kept as such so
            # it reads as one and Continue can resume it.
            info = ErrorInfo(
                type="max_tokens", retryable=True, partial=bool(parts),
                message=f"The answer reached the output limit ({settings.max_output_tokens:,} "
                        "tokens) and was cut off. Continue resumes it; a higher limit in "
                        "Settings avoids it.")
            entry = self._error_entry(info, parts, settings, mode, elapsed_ms(), counter,
                                      continues)
            await copies.settle()
            for event in self._persist(conv_id, entry, "the answer", notes):
                yield event
            yield TurnFinished("error", entry)
            return
        text = "".join(parts)
        answer = counter.with_count(
            ConversationMessage(
                role="assistant",
                content=text or None,
                tool_calls=calls or None,
                mode=mode,
                model=settings.model,
                finish_reason=finish,
                usage=usage,
                duration_ms=elapsed_ms(),
                status="ok",
                continues=continues,
            )
        )
        saved = True
        await copies.settle()
        for event in self._persist(conv_id, answer, "the answer", notes):
            saved = saved and not isinstance(event, SaveFailed)
            yield event
        yield TurnFinished("ok" if saved else "error", answer)

    async def _loop(
        self, conv_id: str, settings: LLMSettings, options: TurnOptions, **first: Any
    ) -> AsyncIterator[EngineEvent]:
        """Request, run the tools the answer calls, append their results, request again;
        until an answer without tool calls, a failure, Stop, or the step limit."""
        steps = 0
        kwargs: dict[str, Any] = first
        while True:
            finished: TurnFinished | None = None
            async for event in self.respond(conv_id, settings, options, **kwargs):
                if isinstance(event, TurnFinished):
                    finished = event
                else:
                    yield event
            kwargs = {}
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
            limit = options.step_limit or settings.step_limit
            message = (f"The agent paused after {steps} round{'s' if steps != 1 else ''} of "
                       "tool calls (the step limit for one turn). Continue lets it go on.")
            run = self.run_state(conv_id) if options.mode == "run" else None
            if run is not None and run.status in ("paused", "aborted"):
                yield finished  # the user paused or aborted the run: stop after this round
                return
            active = run.active if run is not None and run.open else None
            if active is not None:  # a run counts rounds per step, not per turn
                steps, limit = active.rounds, active.step.max_rounds or limit
                message = (f"Step {active.step.title!r} paused after {steps} round"
                           f"{'s' if steps != 1 else ''} of tool calls (its step limit). "
                           "Continue lets it go on.")
            if steps >= limit:
                info = ErrorInfo(type="step_limit", retryable=False, message=message)
                entry = self._error_entry(info, [], settings, options.mode, 0,
                                          self.counter(settings.model))
                for event in self._persist(conv_id, entry, "the step-limit notice"):
                    yield event
                yield TurnFinished("error", entry)
                return

    async def proceed(
        self, conv_id: str, settings: LLMSettings, options: TurnOptions = DEFAULT_TURN,
        instruction: str | None = None,
    ) -> AsyncIterator[EngineEvent]:
        """Carry on from the log as it stands (a run's next request): no entry is added
        first; `instruction` is a one-off nudge, never stored."""
        settings = _for_agent(settings, options)
        for event in self.close_interrupted(conv_id):
            yield event
        async for event in self._loop(conv_id, settings, options, instruction=instruction):
            yield event

    def record(self, conv_id: str, msg: ConversationMessage, what: str
               ) -> Iterator[EngineEvent]:
        """Append an entry made outside a turn (a run's start or control entry) the way a
        turn's entries are: never lost, reported as appended or as unsaved."""
        return self._persist(conv_id, msg, what)

    async def summarize(
        self, conv_id: str, settings: LLMSettings, focus: str | None = None,
        automatic: bool = False,
    ) -> AsyncIterator[EngineEvent]:
        """Compaction's LLM stage (see `core.summarize`): fold the entries no summary covers
        yet into the running summary and append it; a failed, empty or oversized summary
        leaves the log as it was and says why."""
        async for event in summarize(self, conv_id, settings, focus, automatic):
            yield event

    def runner(self, conv_id: str, settings: LLMSettings, options: TurnOptions) -> ToolRunner:
        """The tool runner for one turn of `conv_id` (the mode's and agent's tools)."""
        assert self.tools is not None
        setup = self.tools
        network = options.network
        if network is None:
            network = self.store.meta(conv_id).allow_network
        run = self.run_state(conv_id) if options.mode == "run" else None
        return ToolRunner(setup.root, setup.state, run_tools(options.mode, options.agent, run),
                          self.counter(settings.model), options.approve, setup.sandbox,
                          network, options.mode, settings.tool_output_tokens, setup.env)

    def run_state(self, conv_id: str) -> RunState | None:
        """The conversation's latest run as its log says (see core.runs.state)."""
        return self.context.run_state(conv_id, self.store.load(conv_id).messages)

    def _tagged(self, conv_id: str, msg: ConversationMessage) -> ConversationMessage:
        """`msg`, made in run mode, tagged with the run and the step it belongs to."""
        if msg.mode != "run" or msg.run_id is not None:
            return msg
        tags = self._request_tags.get(conv_id) if msg.role != "user" else None
        if tags is None:  # the user's message joins the step active now
            run = self.run_state(conv_id)
            if run is None or not run.open:
                return msg
            tags = run.tags()
        return msg.model_copy(update=tags)

    async def _run_tools(
        self, conv_id: str, calls: list[ToolCall], settings: LLMSettings, options: TurnOptions,
        outcome: list[TurnFinished],
    ) -> AsyncIterator[EngineEvent]:
        """Run `calls` and persist one result entry per call. On Stop, the calls without a
        result are answered "aborted" (a running command is killed first). `outcome` gets the
        TurnFinished when the turn ends here."""
        runner = self.runner(conv_id, settings, options)
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
                    last = event.entry
                    answered.add(event.entry.tool_call_id or "")
                    saved = True
                    for ev in self._persist(conv_id, event.entry, "a tool's result"):
                        saved = saved and not isinstance(ev, SaveFailed)
                        yield ev
                    if not saved:
                        outcome.append(TurnFinished("error", event.entry))
                        return
        except (asyncio.CancelledError, GeneratorExit) as stop:
            entries = [runner.aborted(
                c, "Stopped by the user while this call ran; it was killed. Anything it did "
                   "before that remains." if c.id in running else
                   "Not run: the user stopped the turn first.", running.get(c.id))
                for c in calls if c.id not in answered]
            appended: list[ConversationMessage] = []
            entries = [self._tagged(conv_id, e) for e in entries]
            try:
                self.store.append_many(conv_id, entries)
                appended = entries
            except (StoreError, OSError):
                pass  # answered as aborted when the conversation is next used
            if isinstance(stop, GeneratorExit):
                raise
            for entry in appended:
                yield EntryAppended(entry)
            outcome.append(TurnFinished("stopped", appended[-1] if appended else
                                        (last or entries[-1])))
            return

    def close_interrupted(self, conv_id: str) -> Iterator[EngineEvent]:
        """Answer the tool calls a crash (or a closed window) left without results as
        "aborted", so the log reads as it happened and the next request is complete."""
        if not self.store.writable:
            return
        loaded = self.store.load(conv_id)
        for text in loaded.problems:  # a repair made while reading: said once, here
            yield StoreNotice(text)
        calls = unanswered_calls(loaded.messages)
        if not calls:
            return
        entries = [self.counter(None).with_count(ConversationMessage(
            role="tool", tool_call_id=c.id, tool_name=c.function.name, status="aborted",
            content="Aborted: the app closed while this call was pending; whether it ran, "
                    "and what it did, is unknown.")) for c in calls]
        try:
            self.store.append_many(conv_id, entries)
        except (StoreError, OSError):
            return
        if self.tools is not None:  # what a killed command had printed: nobody will read it
            for c in calls:
                partial = self.tools.state / RESULTS_DIR / f".running-{result_name(c.id)}"
                partial.unlink(missing_ok=True)
        for entry in entries:
            yield EntryAppended(entry)

    def build(
        self, history: list[ConversationMessage], settings: LLMSettings, mode: Mode = "chat",
        usable_override: int | None = None, conv_id: str | None = None,
        known_window: int | None = None,
    ) -> BuiltRequest:
        """The request for `history` (see ContextService.build)."""
        return self.context.build(conv_id, history, settings, mode, usable_override,
                                  known_window)

    def _error_entry(
        self,
        info: ErrorInfo,
        parts: list[str],
        settings: LLMSettings,
        mode: Mode,
        duration_ms: int,
        counter: TokenCounter,
        continues: str | None = None,
    ) -> ConversationMessage:
        entry = counter.with_count(
            ConversationMessage(
                role="assistant",
                kind="error",
                content="".join(parts),
                error=info,
                mode=mode,
                model=settings.model,
                duration_ms=duration_ms,
                status="aborted" if info.type == "stopped" else "error",
                continues=continues,
            )
        )
        return entry

    def _persist(self, conv_id: str, msg: ConversationMessage, what: str,
                 notes: list[str] | None = None) -> Iterator[EngineEvent]:
        """Append `msg` and report it; a failed write never loses it: it is reported as
        unsaved, with the text, so whoever shows it can keep it and save it again."""
        msg = self._tagged(conv_id, msg)
        try:
            problems = self._append(conv_id, msg)
        except (StoreError, OSError) as e:
            # The store wraps OSError in StoreWriteError; one that slips through must not cost
            # the answer either.
            cause = _write_cause(e)
            if msg.role == "assistant":
                # Where space allows, the whole text goes to the crash sidecar too: if nobody
                # saves it in this session, the next open recovers it in its place.
                try:
                    self.store.write_partial(conv_id, {
                        "text": msg.text(), "model": msg.model, "mode": msg.mode,
                        "continues": msg.continues})
                except (OSError, StoreError):
                    pass
            yield SaveFailed(SAVE_FAILED.format(what=what, cause=cause), [msg], what, cause)
            return
        for text in [*(notes or []), *problems]:
            yield StoreNotice(text)
        yield EntryAppended(msg)

    def _append(self, conv_id: str, msg: ConversationMessage) -> list[str]:
        problems = self.store.append(conv_id, msg)
        if msg.role == "assistant":
            self.store.clear_partial(conv_id)  # the answer is an entry now
        return problems

    def _write_partial(self, conv_id: str, parts: list[str], settings: LLMSettings, mode: Mode,
                       continues: str | None, notes: list[str]) -> None:
        """Flush the text being received to its sidecar. Only a safety net for a crash: a
        failure to write it (a full disk) is noted once and never stops the answer."""
        try:
            self.store.write_partial(conv_id, {"text": "".join(parts), "model": settings.model,
                                               "mode": mode, "continues": continues})
        except (OSError, StoreError) as e:
            note = (f"The answer could not be written to disk as it arrived "
                    f"({describe_os_error(e) if isinstance(e, OSError) else e}); it is saved "
                    "when complete.")
            if note not in notes:
                notes.append(note)

    def kept_request(self, conv_id: str) -> tuple[Path, BuiltRequest] | None:
        """The newest copy this engine kept of a request of the conversation, with the request
        itself (what `read_request` of that path would give, without reading it back)."""
        return self._kept.get(conv_id)

    def budget_message(self, e: BudgetError, settings: LLMSettings) -> str:
        return self.context.budget_message(e, settings)


def unanswered_calls(history: list[ConversationMessage]) -> list[ToolCall]:
    """The calls of the last answer that have no result (only tool entries after it)."""
    answered: set[str] = set()
    for m in reversed(history):
        if m.role == "tool":
            answered.add(m.tool_call_id or "")
            continue
        if m.role == "assistant" and m.kind != "error" and m.tool_calls:
            return [c for c in m.tool_calls if c.id not in answered]
        return []
    return []


def _for_agent(settings: LLMSettings, options: TurnOptions) -> LLMSettings:
    """The agent's own model, when it names one."""
    if options.agent is not None and options.agent.model:
        return settings.model_copy(update={"model": options.agent.model})
    return settings


def _write_cause(e: StoreError | OSError) -> str:
    """Why a write failed, in a few plain words ("the disk is full")."""
    if isinstance(e, OSError):
        return describe_os_error(e)
    return e.cause if isinstance(e, StoreWriteError) else str(e)
