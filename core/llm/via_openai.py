"""The openai SDK transport: for models that speak the OpenAI protocol (`openai/...`, OpenAI's
own models, and every OpenAI-compatible server at an api_base: vLLM, llama.cpp, LM Studio,
Ollama's /v1, OpenRouter, ...). litellm is not imported on this path.

It sends what litellm sends for these models (a test holds the two transports' wire bodies and
events equal) and translates the SDK's exceptions into ours here, at the boundary.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any

from core.llm import compat
from core.llm.answer import StreamReader, usage_of, whole_events
from core.llm.errors import LLMError
from core.llm.events import LLMRequest, StreamEvent, TextDelta
from core.llm.model_map import model_info
from core.llm.providers import Destination, destination
from core.llm.translate import Kind, over_context, retry_after, translate_error

OPENAI_BASE = "https://api.openai.com/v1"

# OpenAI's reasoning models: the o-series (by litellm's rule: "o" and a digit, a model its map
# places at OpenAI) and the gpt-5 series ("gpt-5-chat" aside).
_O_SERIES = re.compile(r"^o\d")
_GPT_REASONING = ("gpt-5", "gpt-6")

# One client per event loop and destination: its connections belong to the loop they were
# opened on. A loop that ends takes its clients with it.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], Any]] = (
    weakref.WeakKeyDictionary())
_clients_lock = threading.Lock()


class OpenAITransport:
    """Streams chat completions through the openai SDK's AsyncOpenAI. Safe to share."""

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        where = destination(request)
        profile = compat.profile(where.api_base, request.model)
        body = request_body(request, profile)
        client = _client(where)
        async with compat.one_at_a_time(where.api_base, request.model):
            if request.tools and not profile.streams_tools:
                # the server refused a streamed tool round before: asked whole, once
                async for event in _whole(client, body, request, where):
                    yield event
                return
            async for event in _streamed(client, body, request, where):
                yield event


async def _streamed(client: Any, body: dict[str, Any], request: LLMRequest,
                    where: Destination) -> AsyncIterator[StreamEvent]:
    reader = StreamReader()
    usage_sent = False
    # A local server's streamed answer leaves its connection closed, not kept for the next
    # request: llama-cpp-python's refusal inside its stream leaves it open yet dead (its next
    # request is dropped unread, "Disconnected from client ... before llm invoked").
    close = {"Connection": "close"} if where.api_base and compat.is_local(where.api_base) \
        else None
    try:
        stream = await _post(client, body, request.timeout, stream=True, headers=close)
    except Exception as e:  # every provider failure is translated here
        if not _hung_up(e, where):
            raise _translated(e, request, where) from e
        stream = None  # refused: as an empty 200 (below)
    try:
        async for data in stream if stream is not None else _nothing():
            # Give the GIL to the window's thread between chunks (see via_litellm).
            time.sleep(0)
            chunk = Chunk(data if isinstance(data, dict) else {})
            usage = usage_of(chunk)
            if usage is not None:
                usage_sent = True
                yield usage
            text = reader.read(chunk)
            if text:
                yield TextDelta(text)
            reader.check()
    except LLMError:
        raise
    except Exception as e:
        if reader.received or not _hung_up(e, where):
            raise _translated(e, request, where, mid_stream=True) from e
    finally:
        if stream is not None:
            await stream.close()  # a Stop, an error or the end: the connection is given back

    if not reader.finish and not reader.received:
        # Nothing at all: llama.cpp's server answers a streamed request it refuses (a prompt
        # over its context, tools it cannot stream) with an empty 200 (llama-cpp-python's,
        # racing its own answer, at times by hanging up: `_hung_up`). The same request
        # once without streaming reads its real answer; a tool round it answers so is asked
        # so from then on.
        async for event in _whole(client, body, request, where):
            yield event
        if request.tools:
            compat.learn(where.api_base, request.model, streams_tools=False)
        return
    if not usage_sent and reader.finish:
        yield reader.estimate(request.model, request.messages)
    for event in reader.ending(reader.finish):
        yield event


async def _nothing() -> AsyncIterator[Any]:
    return
    yield  # (an async generator that gives nothing)


def _hung_up(e: BaseException, where: Destination) -> bool:
    """A server on this machine or the local network that took the request and closed the
    connection before a byte of the answer: llama-cpp-python refuses a streamed request (tools
    it cannot stream, a prompt over its context) by raising inside its event stream, and its
    client sees an empty 200, the connection closed with nothing sent, or reset, as the race
    goes (all three seen against 0.3.36). Not a connection it refused, nor a time-out."""
    if not where.api_base or not compat.is_local(where.api_base):
        return False
    x: BaseException | None = e
    for _ in range(8):
        if x is None or isinstance(x, (ConnectionRefusedError, TimeoutError)) or \
                type(x).__name__ in ("ConnectError", "ConnectTimeout", "ReadTimeout"):
            return False
        if isinstance(x, ConnectionResetError) or \
                type(x).__name__ in ("RemoteProtocolError", "ReadError"):
            return True
        x = x.__cause__ or x.__context__
    return False


async def _whole(client: Any, body: dict[str, Any], request: LLMRequest,
                 where: Destination) -> AsyncIterator[StreamEvent]:
    """`body` asked without streaming, its answer as the events a stream would give."""
    whole = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    try:
        answer = await _post(client, whole, request.timeout, stream=False)
    except Exception as e:
        raise _translated(e, request, where) from e
    for event in whole_events(answer):
        yield event


def request_body(request: LLMRequest, profile: compat.Profile = compat.HOSTED
                 ) -> dict[str, Any]:
    """The chat-completions body of `request`, as litellm builds it for an OpenAI model, with
    what the server's `profile` needs (see core.llm.compat)."""
    name = request.model.split("/", 1)[1] if request.model.startswith("openai/") else \
        request.model
    o_series = _O_SERIES.match(name) is not None and (
        model_info(name) or {}).get("litellm_provider") == "openai"
    # An o-series model litellm's map does not say takes system messages gets them as the
    # user's (litellm's rule for the o1 family).
    as_user = o_series and not (model_info(name) or {}).get("supports_system_messages")
    body: dict[str, Any] = {
        "model": name,
        "messages": [_message(m, as_user, profile.empty_content) for m in request.messages],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.max_tokens:
        reasoning = o_series or (any(m in name for m in _GPT_REASONING)
                                 and "gpt-5-chat" not in name)
        # OpenAI's reasoning models take the output limit under another name
        body["max_completion_tokens" if reasoning else "max_tokens"] = request.max_tokens
    if request.tools:
        body["tools"] = list(request.tools)
        if profile.tool_choice:
            body["tool_choice"] = "auto"
    return body


def _message(m: dict[str, Any], system_as_user: bool, empty_content: bool = False
             ) -> dict[str, Any]:
    """A message as litellm sends it to an OpenAI model: a field without a value left out (an
    assistant's tool calls without text: no "content": null), or `empty_content`: given as ""
    (what llama-cpp-python's templates need)."""
    if system_as_user and m.get("role") == "system":
        return {"content": m.get("content"), "role": "user"}
    if empty_content and m.get("tool_calls") and not m.get("content"):
        return {**{k: v for k, v in m.items() if v is not None}, "content": ""}
    return m if None not in m.values() else {k: v for k, v in m.items() if v is not None}


def kind_of(e: BaseException) -> Kind:
    """What kind of failure the SDK's (or httpx's) exception `e` is."""
    import httpx
    import openai

    if isinstance(e, (openai.APITimeoutError, httpx.TimeoutException)):
        return "timeout"
    if not isinstance(e, openai.APIStatusError):
        return "other"
    status = e.status_code
    if 400 <= status < 500 and over_context(getattr(e, "code", None), str(e)):
        return "context_window"
    kinds: dict[int, Kind] = {401: "auth", 429: "rate_limit", 404: "not_found",
                              400: "bad_request"}
    return kinds.get(status, "other")


def _translated(e: BaseException, request: LLMRequest, where: Destination,
                mid_stream: bool = False) -> LLMError:
    return translate_error(e, kind_of(e), request.model, mid_stream=mid_stream,
                           secrets=[where.api_key], api_base=where.api_base,
                           retry_after=retry_after(e))


async def _post(client: Any, body: dict[str, Any], timeout: float, stream: bool,
                headers: dict[str, str] | None = None) -> Any:
    """POST /chat/completions with `body` as it is: the SDK's own `chat.completions.create`
    would import its every chat type (a third of a second) and walk each message against
    them, to send the same JSON. Its stream, errors and time-out are the SDK's as ever."""
    from openai import AsyncStream
    from openai.types.chat import ChatCompletion

    options: dict[str, Any] = {"timeout": timeout}
    if headers:
        options["headers"] = headers
    # A stream's chunks come as their JSON (read through `Chunk`): the SDK would build its
    # objects for every chunk, walking the types of every field, on the thread whose work
    # holds up the window's while an answer streams in.
    return await client.post("/chat/completions", body=body, cast_to=ChatCompletion,
                             options=options, stream=stream,
                             stream_cls=AsyncStream[object])


class Chunk:
    """A streamed chunk's JSON read as the SDK's objects read (`chunk.choices[0].delta.content`;
    a field the server did not send reads None), without building them."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _read(self._data.get(name))

    def model_dump(self) -> dict[str, Any]:
        return self._data


def _read(value: Any) -> Any:
    if isinstance(value, dict):
        return Chunk(value)
    if isinstance(value, list):
        return [_read(v) for v in value]
    return value


_tls_context: Any = None
_tls_lock = threading.Lock()


def _tls() -> Any:
    """The TLS settings every client verifies servers with, made once: as httpx makes them
    for a client (its certificate bundle, or SSL_CERT_FILE / SSL_CERT_DIR)."""
    global _tls_context
    with _tls_lock:
        if _tls_context is None:
            import httpx

            _tls_context = httpx.create_ssl_context()
        return _tls_context


def _client(where: Destination) -> Any:
    """The loop's AsyncOpenAI for `where`: made once, its connections kept for the next
    request. Retries are ours to decide (visible, cancellable): the SDK makes none."""
    loop = asyncio.get_running_loop()
    base = where.api_base or OPENAI_BASE
    with _clients_lock:
        clients = _clients.setdefault(loop, {})
        client = clients.get((base, where.api_key))
        if client is None:
            from openai import AsyncOpenAI, DefaultAsyncHttpxClient

            # the SDK's own HTTP client, with the one certificate store of the process (each
            # client would read the bundle again)
            client = AsyncOpenAI(api_key=where.api_key, base_url=base, max_retries=0,
                                 http_client=DefaultAsyncHttpxClient(base_url=base,
                                                                     verify=_tls()))
            clients[(base, where.api_key)] = client
    return client
