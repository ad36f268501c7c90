"""One exchange with the model: a built request, sent with its recoveries, and the entry it
leaves in the log.

Recoveries, each before any text has arrived (after that, what arrived is kept and Continue or
Retry is the user's call):
- a transient failure: the same request again after a backoff (or the provider's Retry-After);
- a refused length: rebuilt within the limit the provider stated (else three quarters of what
  was assumed), at most `MAX_OVERFLOW_REBUILDS` times, each one shorter, never resent as is;
- tools refused by the model's server: the same request without tools, remembered for the model
  in the project context, so the meter and every later build leave them out too.

The entry is written before anything else is awaited: the request's copy for
`.workbench/requests/` is settled after, so a Stop (or a closing window) at any moment after
the answer arrived never loses it.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from core.attachments import accepts_images, has_images
from core.context.builder import BudgetError, BuiltRequest
from core.context.report_text import cached_tokens
from core.context.service import ProjectContext
from core.cost import cost_of
from core.last_turn import last_turn
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
from core.log_writer import Written
from core.model import ConversationMessage, ErrorInfo, Mode, ToolCall
from core.redact import redact
from core.request_copies import RequestCopies, cache_breakpoints, remember
from core.settings import LLMSettings
from core.turn_events import (
    EngineEvent,
    RequestBuilt,
    RequestStarted,
    Retrying,
    StoreNotice,
    StreamText,
    TurnFinished,
    TurnOptions,
)

MAX_RETRY_WAIT = 120.0
MAX_OVERFLOW_REBUILDS = 3
MAX_SAME_RETRIES = 2  # a refusal repeated word for word (a server's 500 on what it cannot read)
PARTIAL_FLUSH_S = 1.0  # the text being received reaches disk at least this often


def error_entry(info: ErrorInfo, text: str, settings: LLMSettings, mode: Mode,
                duration_ms: int = 0, continues: str | None = None) -> ConversationMessage:
    """The visible entry a failed (or stopped) answer becomes, with what arrived of it."""
    return ConversationMessage(
        role="assistant", kind="error", content=text, error=info, mode=mode,
        model=settings.model, duration_ms=duration_ms, continues=continues,
        status="aborted" if info.type == "stopped" else "error")


class ExchangeHost(Protocol):
    """What an exchange uses of whoever makes it (`core.engine.Engine` is the one that does).

    Attributes:
        context: builds the request (and rebuilds it), counts, writes through its writer,
            remembers what the server showed.
        client: the LLM adapter the request is streamed through.
        requests_dir: where the request's copies go (None: none are written).
        retry_delays: the backoff before each retry of a transient failure.
        sent: the last request sent per conversation (read as the previous one, then set).
        saved: conversation -> its newest saved request copy and the request it holds (set).
    """

    context: ProjectContext
    client: LLMClient
    requests_dir: Path | None
    retry_delays: tuple[float, ...]
    sent: dict[str, list[dict[str, Any]]]
    saved: dict[str, tuple[Path, BuiltRequest]]


@dataclass
class Received:
    """What the stream brought so far."""

    parts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    finish: str | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)


class Exchange:
    """One request of `conv_id` and its answer (see the module's doc).

    Attributes:
        built: the request as built (replaced by each rebuild).
        entry: the entry the exchange left (set when `run` ends).
    """

    def __init__(self, host: ExchangeHost, conv_id: str, settings: LLMSettings,
                 options: TurnOptions, history: list[ConversationMessage],
                 built: BuiltRequest, continues: str | None = None,
                 instruction: str | None = None,
                 later: list[RequestCopies] | None = None) -> None:
        """`later`: where an answer that calls tools leaves its request's copies for the tool
        loop to settle at the end of the turn (the tools need not wait for them)."""
        self.host, self.conv_id, self.settings = host, conv_id, settings
        self.options, self.history = options, history
        self.built, self.continues, self.instruction = built, continues, instruction
        self.later = later
        self.context = host.context
        self.counter = self.context.counter(settings.model)
        self.notes: list[str] = []
        self.previous = host.sent.get(conv_id)
        self.copies = RequestCopies(host.requests_dir, conv_id, self.notes, self.previous,
                                    self.counter, host.saved)
        self.got = Received()
        self.started = time.monotonic()
        self.entry: ConversationMessage | None = None
        self.request = LLMRequest(
            model=settings.model, messages=[], api_base=settings.api_base,
            max_tokens=settings.max_output_tokens, key_name=settings.key_name,
            tools=built.tools or None, timeout=settings.request_timeout)
        self._use(built)
        self.context.writer.add_secrets(keys_in_use(self.request))  # never written, wherever seen

    def _use(self, built: BuiltRequest, tools: bool = True) -> None:
        """Make `built` the request to send (its copy saved once it is on the wire)."""
        self.built = built
        self.copies.add(built)
        messages = built.messages
        if self.instruction:  # a one-off nudge, never stored
            messages = [*messages, {"role": "user", "content": self.instruction}]
        # The answer may use what the budget kept free for it, and no more: the room the meter
        # reserves and the `max_tokens` asked are one number (without a reserve, as with the
        # CLI's --budget, the setting stands).
        room = self._room(built)
        attachments = self.context.attachments
        images = accepts_images(self.settings.model, self.settings.images)
        if not images and has_images(messages):  # said where the request is described
            note = f"images: each sent as a one-line note ({self.settings.model} takes none)"
            if note not in built.report.normalize_notes:
                built.report.normalize_notes.append(note)
        sent = attachments.inline(messages, images) if attachments is not None else messages
        self.request = replace(self.request, messages=sent, max_tokens=room,
                               tools=self.request.tools if tools else None,
                               cache_breakpoints=cache_breakpoints(self.previous, messages))
        remember(self.host.sent, self.conv_id, messages)

    def _rebuild(self, known_window: int | None = None) -> BuiltRequest:
        return self.context.build(
            self.conv_id, self.history, self.settings, self.options.mode,
            known_window=known_window, run_context=self.options.run_context,
            agent=self.options.agent)

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    async def run(self) -> AsyncIterator[EngineEvent]:
        """Send, recover, write the entry, report; ends with `TurnFinished`."""
        yield RequestBuilt(self.built)
        yield RequestStarted(self.settings.model, len(self.request.messages))
        stopped = False
        try:
            async for event in self._receive():
                yield event
            entry = self._answer()
        except LLMError as e:
            # The server may have been restarted with another model or window: ask it again.
            self.context.forget_served_window(self.settings)
            entry = self._failed(e.info(partial=bool(self.got.parts)))
        except Exception as e:  # a bug of ours must not lose what was streamed
            entry = self._failed(ErrorInfo(
                type="provider_error", retryable=True, partial=bool(self.got.parts),
                message="Something went wrong while receiving the answer. What arrived is kept.",
                # A traceback may quote a header or a setting: no key in use leaves the process.
                details=redact("".join(traceback.format_exception(e))[-4000:],
                               keys_in_use(self.request))))
        except GeneratorExit:
            # The consumer closed the turn (the window closing): a closed generator cannot
            # report, but what arrived is kept all the same.
            self.entry = self._write(self._stopped()).entries[0]
            self.copies.start()
            raise
        except asyncio.CancelledError:
            stopped = True
            entry = self._stopped()
            if self._nothing_to_keep():
                self.entry = entry  # said to the caller, never written: no phantom entry
                self.copies.start()
                yield TurnFinished("stopped", entry)
                return
        async for event in self._finish(entry, stopped):
            yield event

    def _nothing_to_keep(self) -> bool:
        """A Stop before anything arrived leaves no entry where one would only be a control
        that cannot act: a Continue's (the answer it continues still ends the log), a request
        with no message of the user's or a tool's to answer (a run's next step: Retry would
        have nothing to send again), or one the user stopped by aborting the run."""
        if self.got.parts or self.got.calls:
            return False
        turn = last_turn(self.history)
        if self.continues or turn.last is None or turn.last.role not in ("user", "tool"):
            return True
        since = self.context.store.load(self.conv_id).messages[len(self.history):]
        return any(m.run_event is not None and m.run_event.action == "abort" for m in since)

    def _stopped(self) -> ConversationMessage:
        return self._failed(ErrorInfo(
            type="stopped", message="Stopped by you. The partial answer is kept.",
            retryable=True, partial=bool(self.got.parts)))

    def _write(self, entry: ConversationMessage) -> Written:
        written = self.context.writer.write(self.conv_id, [entry], _what(entry))
        self.entry = written.entries[0]
        return written

    async def _finish(self, entry: ConversationMessage, stopped: bool
                      ) -> AsyncIterator[EngineEvent]:
        """Write the entry first, then settle the request's copies (a Stop meanwhile leaves
        them to finish in the background: the entry is already safe)."""
        written = self._write(entry)
        assert self.entry is not None
        for event in written.events:
            yield event
        if stopped:
            self.copies.start()  # written in the background; nobody waits for them now
            yield TurnFinished("stopped", self.entry)
            return
        if self.later is not None and written.ok and self.entry.tool_calls:
            self.copies.start()
            self.later.append(self.copies)  # the tools go first; the turn's end settles it
        else:
            notes, stop = await settled(self.copies)
            for note in notes:
                yield StoreNotice(note)
            if stop:  # the entry is safe; the Stop still ends the turn (and a run) as stopped
                yield TurnFinished("stopped", self.entry)
                return
        yield TurnFinished("ok" if written.ok and entry.kind != "error" else "error",
                           self.entry)

    async def _receive(self) -> AsyncIterator[EngineEvent]:
        """Stream the answer, recovering as the module's doc says."""
        attempt = overflows = 0
        previous: str | None = None  # the last refusal's body
        last_flush = time.monotonic() - PARTIAL_FLUSH_S + 0.2  # first flush soon after text
        while True:
            try:
                async for ev in self.host.client.stream(self.request):
                    self.copies.start()  # the request is out: now save its copy
                    if isinstance(ev, TextDelta):
                        self.got.parts.append(ev.text)
                        if time.monotonic() - last_flush >= PARTIAL_FLUSH_S:
                            last_flush = time.monotonic()
                            self._flush()
                        yield StreamText(ev.text)
                    elif isinstance(ev, ToolCallsReady):
                        self.got.calls = ev.calls
                    elif isinstance(ev, Usage):
                        self.got.usage = ev.raw or {"prompt_tokens": ev.prompt_tokens,
                                                    "completion_tokens": ev.completion_tokens}
                        if not ev.reported:  # litellm's own count: kept, but said to be one
                            self.got.usage = {**self.got.usage, "estimated": True}
                    elif isinstance(ev, Finished):
                        self.got.finish = ev.reason
                self.context.sync_profile(self.settings)  # what the server showed
                return
            except ContextOverflow as e:
                if self.got.parts or overflows >= MAX_OVERFLOW_REBUILDS:
                    raise
                overflows += 1
                why = self._shrink(e)
                yield RequestBuilt(self.built)
                yield Retrying(overflows, MAX_OVERFLOW_REBUILDS, 0.0, why)
            except ToolsUnsupported as e:
                if self.got.parts or not self.request.tools:
                    raise
                self.context.remember_refuses_tools(self.settings.model)
                self._use(self._without_tools(e), tools=False)
                yield RequestBuilt(self.built)
                yield StoreNotice(f"{e.message} The conversation goes on without tools; "
                                  "Agent mode needs a model that supports them.")
            except LLMError as e:
                limit = min(self.settings.auto_retries, len(self.host.retry_delays))
                if e.details and e.details == previous:  # the same answer again: not temporary
                    limit = min(limit, MAX_SAME_RETRIES)
                previous = e.details
                if self.got.parts or not e.retryable or attempt >= limit:
                    raise
                delay = e.retry_after if e.retry_after is not None \
                    else self.host.retry_delays[attempt]
                attempt += 1
                yield Retrying(attempt, limit, min(delay, MAX_RETRY_WAIT), e.message)
                await asyncio.sleep(min(delay, MAX_RETRY_WAIT))  # Stop cancels the wait too

    def _without_tools(self, e: ToolsUnsupported) -> BuiltRequest:
        """The request built again for a model that refuses tools; one that cannot fit is a
        context error that says so (never "something went wrong": not a bug of ours)."""
        try:
            return self._rebuild()
        except BudgetError as budget:
            raise ContextOverflow(f"{e.message} Built again without tools, the request does "
                                  f"not fit: {budget}", details=e.details) from e

    def _shrink(self, e: ContextOverflow) -> str:
        """Rebuild within the provider's stated limit (remembered for the model), else three
        quarters of the window assumed, and say what was made smaller: the conversation, or
        only the room kept for the answer (`max_tokens`, which counts against the limit too).
        Raises when nothing smaller can be built."""
        window = e.limit or int(self.built.report.window * 0.75)
        calibration = self.context.calibration
        if e.limit and calibration is not None:
            calibration.remember_window(self.settings.model, e.limit, self.settings.api_base)
        if e.prompt_tokens and calibration is not None:  # the provider counted this request
            calibration.observe(self.settings.model, self.built.report.used, e.prompt_tokens)
        try:
            smaller = self._rebuild(known_window=window)
        except BudgetError as budget:
            raise ContextOverflow(
                f"The provider accepts {window:,} tokens for {self.settings.model}, and even "
                f"the smallest request needs {budget.needed:,} ({budget.what}). "
                f"{budget.advice} (Settings is also where a remembered limit can be reset.)",
                details=e.details, limit=e.limit) from e
        room, less_room = self._room(self.built), self._room(smaller)
        if smaller.report.used + less_room >= self.built.report.used + room:
            raise ContextOverflow(
                f"{e.message} Rebuilding with a smaller budget did not make the request any "
                "shorter, so it was not sent again.", details=e.details, limit=e.limit) from e
        shorter = smaller.report.used < self.built.report.used
        self._use(smaller)
        if shorter:
            return (f"The request was too long for the model (limit {window:,} tokens); "
                    "rebuilt it smaller.")
        return (f"The request with room for a {room:,}-token answer was over the model's limit "
                f"({window:,} tokens); sent again with room for {less_room:,}.")

    def _room(self, built: BuiltRequest) -> int:
        """What the answer may use of `built` (its `max_tokens`)."""
        return built.report.reserved_output or self.settings.max_output_tokens

    def _flush(self) -> None:
        self.context.writer.write_partial(self.conv_id, {
            "text": self.got.text, "model": self.settings.model, "mode": self.options.mode,
            "continues": self.continues}, self.notes)

    def _failed(self, info: ErrorInfo) -> ConversationMessage:
        return self.counter.with_count(error_entry(
            info, self.got.text, self.settings, self.options.mode, self.elapsed_ms(),
            self.continues))

    def _answer(self) -> ConversationMessage:
        """The complete answer's entry (an unfinished one when the output limit cut it)."""
        got, settings = self.got, self.settings
        self.built.report.cached_tokens = cached_tokens(got.usage)
        calibration = self.context.calibration
        if calibration is not None and got.usage and got.usage.get("estimated"):
            calibration.observe_unreported(settings.model)
        elif calibration is not None and got.usage and got.usage.get("prompt_tokens"):
            calibration.observe(settings.model, self.built.report.used,
                                int(got.usage["prompt_tokens"]))
        if got.finish == "length" and not got.calls:
            # Cut off by the output limit: kept as unfinished, so Continue can resume it.
            return self._failed(ErrorInfo(
                type="max_tokens", retryable=True, partial=bool(got.parts),
                message=f"The answer reached the output limit ({self.request.max_tokens:,} "
                        "tokens) and was cut off. Continue resumes it; a higher limit in "
                        "Settings (or a larger window, which leaves it more room) avoids it."))
        return self.counter.with_count(ConversationMessage(
            role="assistant", content=got.text or None, tool_calls=got.calls or None,
            mode=self.options.mode, model=settings.model, finish_reason=got.finish,
            usage=got.usage, cost_usd=cost_of(settings.model, got.usage),
            duration_ms=self.elapsed_ms(), status="ok", continues=self.continues))


async def settled(copies: RequestCopies) -> tuple[list[str], bool]:
    """`copies` written, what to tell the user of them, and whether a Stop came meanwhile: it
    leaves them to finish on their thread (the entry they belong to is already saved), and
    the caller ends the turn as stopped, never as answered."""
    try:
        return await copies.settle(), False
    except asyncio.CancelledError:
        return [], True


def _what(entry: ConversationMessage) -> str:
    """How a SaveFailed names the entry."""
    if entry.kind != "error" or entry.error is None or entry.error.type == "max_tokens":
        return "the answer"
    return "the partial answer"
