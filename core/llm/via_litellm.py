"""The litellm transport: for the providers whose protocol litellm translates (Anthropic,
Gemini, Bedrock, Vertex, Ollama's own API, ...). The only module that calls litellm to send.

A stream that ends without the provider's own finish_reason raises StreamInterrupted: litellm
fills in a synthetic "stop" in that case, which we must not mistake for a complete answer.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from core.llm.answer import StreamReader, usage_of, whole_events
from core.llm.errors import LLMError
from core.llm.events import LLMRequest, StreamEvent, TextDelta
from core.llm.providers import destination, needs_cache_breakpoints
from core.llm.runtime import load_litellm
from core.llm.translate import Kind, retry_after, translate_error

# A long stream's chunks are forgotten as it goes (see `_forget_chunks`): after this many, every
# FORGET_EVERY chunks. An ordinary answer (up to ~16k tokens) is never touched.
FORGET_AFTER = 16_384
FORGET_EVERY = 1024


class LitellmTransport:
    """Streams chat completions through litellm. Stateless; safe to share."""

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        litellm = load_litellm()
        kwargs = request_kwargs(request)
        try:
            response = await litellm.acompletion(**kwargs)
        except Exception as e:  # every provider failure is translated here
            raise _translated(litellm, e, request, kwargs) from e

        reader = StreamReader()
        try:
            async for chunk in response:
                # A fast stream keeps this thread busy parsing chunks: hand the GIL to the
                # window's thread between them, or each of its Qt calls waits a whole switch
                # interval for it (the window stalls visibly while tool calls stream in).
                time.sleep(0)
                if reader.chunks >= FORGET_AFTER and reader.chunks % FORGET_EVERY == 0:
                    _forget_chunks(response)
                usage = usage_of(chunk)
                if usage is not None:
                    yield usage if _provider_sent_usage(response) else reader.estimate(
                        request.model, request.messages)
                text = reader.read(chunk)
                if text:
                    yield TextDelta(text)
                reader.check()
                if usage is not None and getattr(response, "sent_last_chunk", False) is True:
                    # The usage litellm hands on once the provider's stream has ended: the last
                    # thing that comes for us. Before it said the stream is over, litellm would
                    # assemble the whole answer from its chunks once more (Python over every
                    # chunk of forty tool calls, the GIL taken from the window while their cards
                    # appear): the stream is closed here instead.
                    await _close(response)
                    break
        except LLMError:
            raise
        except Exception as e:
            raise _translated(litellm, e, request, kwargs, mid_stream=True) from e

        provider_finish = getattr(response, "received_finish_reason", reader.finish)
        provider_finish = provider_finish or getattr(response, "intermittent_finish_reason", None)
        if not provider_finish and not reader.received:
            # Nothing at all (no text, no call, no finish): llama.cpp's server answers a streamed
            # request it refuses (a prompt over its context, tools it cannot stream) with an
            # empty 200. The same request once without streaming reads its real answer.
            whole = {k: v for k, v in kwargs.items() if k != "stream_options"}
            whole["stream"] = False
            try:
                answer = await litellm.acompletion(**whole)
            except Exception as e:
                raise _translated(litellm, e, request, kwargs) from e
            for event in whole_events(answer):
                yield event
            return
        for event in reader.ending(provider_finish):
            yield event


def request_kwargs(request: LLMRequest) -> dict[str, Any]:
    """litellm's arguments for `request`.

    Raises:
        UnknownModel, MissingApiKey: see providers.destination.
    """
    where = destination(request)
    kwargs: dict[str, Any] = {
        "model": request.model,
        "messages": request.messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "api_key": where.api_key,
        "timeout": request.timeout,
        # Retries are ours to decide (visible, cancellable); litellm and the SDK must not
        # retry behind our back.
        "num_retries": 0,
        "max_retries": 0,
    }
    if where.api_base:
        kwargs["api_base"] = where.api_base
    if request.max_tokens:
        kwargs["max_tokens"] = request.max_tokens
    if request.cache_breakpoints and needs_cache_breakpoints(request.model):
        # litellm turns these into Anthropic's cache_control blocks on those messages.
        kwargs["cache_control_injection_points"] = [
            {"location": "message", "index": i} for i in request.cache_breakpoints]
    if request.tools:
        kwargs["tools"] = list(request.tools)
        # litellm 1.106 routes any request with tools through its MCP bridge first, which
        # imports the optional `mcp` package (absent: every tool request would fail with
        # "No module named 'mcp'"). Our tools are plain functions: skip the bridge.
        kwargs["_skip_mcp_handler"] = True
    return kwargs


def kind_of(litellm: Any, e: BaseException) -> Kind:
    """What kind of failure litellm's exception `e` is."""
    kinds: Sequence[tuple[Any, Kind]] = (
        (litellm.ContextWindowExceededError, "context_window"),
        (litellm.AuthenticationError, "auth"), (litellm.RateLimitError, "rate_limit"),
        (litellm.NotFoundError, "not_found"), (litellm.Timeout, "timeout"),
        (litellm.BadRequestError, "bad_request"))
    return next((kind for cls, kind in kinds if isinstance(e, cls)), "other")


def _translated(litellm: Any, e: BaseException, request: LLMRequest, kwargs: dict[str, Any],
                mid_stream: bool = False) -> LLMError:
    return translate_error(e, kind_of(litellm, e), request.model, mid_stream=mid_stream,
                           secrets=[kwargs.get("api_key")], api_base=kwargs.get("api_base"),
                           retry_after=retry_after(e))


def _forget_chunks(response: Any) -> None:
    """Drop what litellm's stream keeps of the chunks already read. It keeps every chunk (a
    few kilobytes each: a gigabyte for a megabyte of text in small chunks) for a log we do not
    use, and the text so far as a string it extends chunk by chunk (copying it every time:
    quadratic). Only the last two chunks are looked at again (its check for a model repeating
    itself). Usage comes from the provider's usage chunk (we ask for it); from a server that
    sends none, we count the answer ourselves (StreamReader.estimate)."""
    kept = getattr(response, "chunks", None)
    if isinstance(kept, list) and len(kept) > 2:
        del kept[:-2]
    if isinstance(getattr(response, "response_uptil_now", None), str):
        response.response_uptil_now = ""


async def _close(response: Any) -> None:
    """Release the stream's connection (litellm's wrapper closes the provider's stream)."""
    aclose = getattr(response, "aclose", None)
    if aclose is not None:
        await aclose()


def _provider_sent_usage(response: Any) -> bool:
    """Whether a chunk the provider sent carried usage. litellm hands usage on at the end of
    every stream we ask it of; when the provider sent none it counts the stream itself, and
    only the chunks it kept tell the two apart (the provider's usage chunk comes last, so it
    outlives `_forget_chunks`)."""
    kept = getattr(response, "chunks", None)
    if not isinstance(kept, list):
        return True  # not litellm's stream wrapper: take usage at its word
    return any(getattr(c, "usage", None) is not None for c in kept)
