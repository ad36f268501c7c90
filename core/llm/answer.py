"""One streamed answer as it arrives, read the same way whichever transport brought it.

Both transports hand on chunks of the OpenAI shape (`choices[0].delta.content`,
`.tool_calls`, `.finish_reason`, `usage`): litellm's translation of another provider's
protocol, or the openai SDK's own. `StreamReader` turns them into our events; `whole_events`
does the same for an answer asked without streaming.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from core.llm.errors import AnswerTooLarge, StreamInterrupted
from core.llm.events import Finished, StreamEvent, TextDelta, ToolCallsReady, Usage
from core.model import FunctionCall, ToolCall

# What one answer may bring: its text and tool-call arguments together. Far beyond any model's
# output limit (about 250,000 tokens); a stream past it is a model or server gone wrong.
MAX_ANSWER_CHARS = 1_000_000


@dataclass
class _Call:
    """A tool call while it streams in: its arguments as the pieces that came (joined once at
    the end; adding each piece to a string would copy all before it, every time)."""

    id: str = ""
    name: str = ""
    pieces: list[str] = field(default_factory=list)


class StreamReader:
    """What a streamed answer has brought so far: its text's length, its tool calls, the
    provider's finish_reason, and the text itself (for an estimate of its usage when the
    provider sends none)."""

    def __init__(self) -> None:
        self.calls: dict[int, _Call] = {}
        self.finish: str | None = None
        self.received = 0  # characters of text and tool-call arguments
        self.chunks = 0
        self.text: list[str] = []

    def read(self, chunk: Any) -> str:
        """Take one chunk; returns its text (to be handed on before `check`)."""
        self.chunks += 1
        text, arguments, reason = _choice(chunk, self.calls)
        if text:
            self.text.append(text)
        self.received += len(text) + arguments
        self.finish = reason or self.finish
        return text

    def check(self) -> None:
        """Raises AnswerTooLarge once the answer went past MAX_ANSWER_CHARS (its text so far
        handed on: it is kept)."""
        if self.received > MAX_ANSWER_CHARS:
            raise AnswerTooLarge(
                f"The answer was stopped at {MAX_ANSWER_CHARS:,} characters, beyond "
                "any model's output limit (a model or server stuck in a loop?). Its "
                "text is kept; a tool call it was writing is not run.",
                details=f"{self.received:,} characters in {self.chunks:,} chunks")

    def estimate(self, model: str, messages: list[dict[str, Any]]) -> Usage:
        """The usage of a request whose provider sent none (llama.cpp's server streams none),
        counted here with tiktoken: a guess of ours, said to be one (`reported=False`)."""
        from core.llm.tokens import REPLY_PRIMER, TokenCounter

        counter = TokenCounter.for_model(model)
        prompt = sum(counter.openai_message(m) for m in messages) + REPLY_PRIMER
        answer = "".join(self.text) + "".join(
            c.name + "".join(c.pieces) for c in self.calls.values())
        completion = counter.text(answer)
        raw = {"prompt_tokens": prompt, "completion_tokens": completion,
               "total_tokens": prompt + completion}
        return Usage(prompt, completion, raw, reported=False)

    def ending(self, provider_finish: str | None) -> Iterator[StreamEvent]:
        """The events that close a stream: its tool calls, then its finish.

        Raises:
            StreamInterrupted: the stream ended without the provider's finish_reason.
        """
        if not provider_finish:
            raise StreamInterrupted(
                "The answer stopped before the model finished it (the connection ended without "
                "a finish signal). What arrived is kept; you can continue or retry.",
                details="stream ended without finish_reason",
            )
        if self.calls:
            yield ToolCallsReady([ToolCall(id=c.id or f"call_{i}", function=FunctionCall(
                name=c.name, arguments="".join(c.pieces)))
                for i, c in sorted(self.calls.items())])
        yield Finished(self.finish or provider_finish)


def usage_of(chunk: Any) -> Usage | None:
    """The provider's usage a chunk (or a whole answer) carries, if any."""
    usage = getattr(chunk, "usage", None)
    if usage is None or getattr(usage, "prompt_tokens", None) is None:
        return None
    return Usage(int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0), plain(usage))


def whole_events(response: Any) -> Iterator[StreamEvent]:
    """An answer asked without streaming, as the events its stream would have brought.

    Raises:
        StreamInterrupted: it has no choice with a finish_reason.
    """
    choice = response.choices[0] if response.choices else None
    if choice is None or not choice.finish_reason:
        raise StreamInterrupted(
            "The server answered with nothing, streamed or not. Nothing arrived; you can "
            "retry.", details="empty stream, then an answer without choices")
    message = choice.message
    if message.content:
        yield TextDelta(message.content)
    usage = usage_of(response)
    if usage is not None:
        yield usage
    if message.tool_calls:
        yield ToolCallsReady([
            ToolCall(id=c.id or f"call_{n}", function=FunctionCall(
                name=c.function.name or "", arguments=c.function.arguments or ""))
            for n, c in enumerate(message.tool_calls)])
    yield Finished(choice.finish_reason)


def plain(usage: Any) -> dict[str, Any]:
    """Usage as plain JSON data: the provider's detail fields kept, those without a value
    (the SDK's and litellm's declared but unsent fields) left out."""
    try:
        data = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)
        result = _valued(json.loads(json.dumps(data, default=str)))
        return result if isinstance(result, dict) else {}
    except Exception:  # usage detail is a nicety
        return {}


def _valued(data: Any) -> Any:
    if not isinstance(data, dict):
        return data
    kept = {k: _valued(v) for k, v in data.items()}
    return {k: v for k, v in kept.items() if v is not None and v != {}}


def _merge_tool_delta(calls: dict[int, _Call], tc: Any) -> int:
    """Merge one streamed piece of a tool call; returns the characters it added."""
    index = getattr(tc, "index", None)
    if index is None:
        index = len(calls)
    slot = calls.setdefault(index, _Call())
    if getattr(tc, "id", None):
        slot.id = tc.id
    fn = getattr(tc, "function", None)
    if fn is None:
        return 0
    if getattr(fn, "name", None):
        slot.name = fn.name
    piece = getattr(fn, "arguments", None)
    if not piece:
        return 0
    slot.pieces.append(piece)
    return len(piece)


def _choice(chunk: Any, calls: dict[int, _Call]) -> tuple[str, int, str | None]:
    """What a streamed chunk brings: (its text, how many characters of tool-call arguments
    it added to `calls`, the finish_reason if it has one)."""
    if not chunk.choices:
        return "", 0, None
    choice = chunk.choices[0]
    delta = choice.delta
    text, arguments = "", 0
    if delta is not None:
        text = delta.content or ""
        for tc in delta.tool_calls or []:
            arguments += _merge_tool_delta(calls, tc)
    return text, arguments, choice.finish_reason or None
