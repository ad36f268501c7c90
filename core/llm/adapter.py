"""The one place that calls litellm: a streaming request in, typed events out.

    async for event in client.stream(request):
        TextDelta(text) ... ToolCallsReady(calls) | Usage(...) | Finished(reason)

A stream that ends without the provider's own finish_reason raises StreamInterrupted: litellm
fills in a synthetic "stop" in that case, which we must not mistake for a complete answer.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from core.llm.errors import (
    AnswerTooLarge,
    AuthError,
    ContextOverflow,
    LLMError,
    LLMTimeout,
    MissingApiKey,
    NetworkError,
    ProviderError,
    RateLimited,
    StreamInterrupted,
    ToolsUnsupported,
    UnknownModel,
)
from core.llm.runtime import load_litellm
from core.model import FunctionCall, ToolCall
from core.redact import redact
from core.settings import (
    ENV_API_KEY,
    KEYLESS_PROVIDERS,
    key_env_var,
    key_for_request,
    keyring_works,
)

# The providers' own addresses: a base URL pointing there may carry the provider's own key. A
# name starting with "." is a domain: Azure has no single address, each user's resource is a
# host under these (AZURE_API_BASE is where AZURE_API_KEY belongs).
OWN_HOSTS: dict[str, tuple[str, ...]] = {
    "openai": ("api.openai.com",),
    "anthropic": ("api.anthropic.com",),
    "azure": (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com"),
    "azure_ai": (".services.ai.azure.com", ".inference.ai.azure.com", ".models.ai.azure.com"),
}

# Providers that read another provider's variables (litellm and the OpenAI SDK behind it).
ENV_PREFIXES = {"text-completion-openai": "OPENAI", "azure_text": "AZURE", "ollama_chat": "OLLAMA"}
ENV_PREFIX_OWNER = {"OPENAI": "openai", "AZURE": "azure"}

# --- events ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallsReady:
    """Every tool call of the answer, assembled from its deltas (arguments as JSON text)."""

    calls: list[ToolCall]


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    raw: dict[str, Any] = field(default_factory=dict)
    # False when the provider sent no usage and litellm counted the stream itself (llama.cpp's
    # server streams none): a guess of ours, never something to calibrate against.
    reported: bool = True


@dataclass(frozen=True)
class Finished:
    reason: str  # the provider's finish_reason: stop, length, tool_calls, content_filter, ...


StreamEvent = TextDelta | ToolCallsReady | Usage | Finished


@dataclass(frozen=True)
class LLMRequest:
    model: str
    messages: list[dict[str, Any]]
    api_base: str | None = None
    max_tokens: int | None = None
    tools: Sequence[dict[str, Any]] | None = None
    timeout: float = 600.0
    api_key: str | None = None  # None: chosen by settings.key_for_request
    key_name: str | None = None  # keyring entry saved with the provider in use
    # Where a cacheable prefix ends (message indexes): marked for providers that need cache
    # breakpoints (Anthropic's models); providers that cache on their own get nothing.
    cache_breakpoints: tuple[int, ...] = ()


class LLMClient:
    """Streams chat completions through litellm. Stateless; safe to share."""

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        litellm = load_litellm()
        kwargs = self._kwargs(litellm, request)
        secrets = [kwargs.get("api_key")]
        try:
            response = await litellm.acompletion(**kwargs)
        except Exception as e:  # every provider failure is translated here
            raise translate_error(e, request.model, secrets=secrets,
                                  api_base=kwargs.get("api_base")) from e

        calls: dict[int, _Call] = {}
        finish: str | None = None
        received = chunks = 0
        try:
            async for chunk in response:
                # A fast stream keeps this thread busy parsing chunks: hand the GIL to the
                # window's thread between them, or each of its Qt calls waits a whole switch
                # interval for it (stalls of 100 ms and more while tool calls stream in).
                time.sleep(0)
                chunks += 1
                if chunks >= FORGET_AFTER and chunks % FORGET_EVERY == 0:
                    _forget_chunks(response)
                usage = getattr(chunk, "usage", None)
                if usage is not None and getattr(usage, "prompt_tokens", None) is not None:
                    yield Usage(
                        int(usage.prompt_tokens or 0),
                        int(usage.completion_tokens or 0),
                        _plain(usage),
                        reported=_provider_sent_usage(response),
                    )
                text, arguments, reason = _choice(chunk, calls)
                if text:
                    received += len(text)
                    yield TextDelta(text)
                received += arguments
                if received > MAX_ANSWER_CHARS:
                    raise AnswerTooLarge(
                        f"The answer was stopped at {MAX_ANSWER_CHARS:,} characters, beyond "
                        "any model's output limit (a model or server stuck in a loop?). Its "
                        "text is kept; a tool call it was writing is not run.",
                        details=f"{received:,} characters in {chunks:,} chunks")
                finish = reason or finish
                if usage is not None and getattr(response, "sent_last_chunk", False) is True:
                    # The usage litellm hands on once the provider's stream has ended: the last
                    # thing that comes for us. Before it said the stream is over, litellm would
                    # assemble the whole answer from its chunks once more (50-80 ms of Python
                    # for forty tool calls, the GIL taken from the window while their cards
                    # appear): the stream is closed here instead.
                    await _close(response)
                    break
        except LLMError:
            raise
        except Exception as e:
            raise translate_error(e, request.model, mid_stream=True, secrets=secrets,
                                  api_base=kwargs.get("api_base")) from e

        provider_finish = getattr(response, "received_finish_reason", finish)
        provider_finish = provider_finish or getattr(response, "intermittent_finish_reason", None)
        if not provider_finish and not received:
            # Nothing at all (no text, no call, no finish): llama.cpp's server answers a streamed
            # request it refuses (a prompt over its context, tools it cannot stream) with an
            # empty 200. The same request once without streaming reads its real answer.
            async for event in self._whole(litellm, kwargs, request, secrets):
                yield event
            return
        if not provider_finish:
            raise StreamInterrupted(
                "The answer stopped before the model finished it (the connection ended without "
                "a finish signal). What arrived is kept; you can continue or retry.",
                details="stream ended without finish_reason",
            )
        if calls:
            yield ToolCallsReady(_assemble(calls))
        yield Finished(finish or provider_finish)

    async def _whole(self, litellm: Any, kwargs: dict[str, Any], request: LLMRequest,
                     secrets: list[Any]) -> AsyncIterator[StreamEvent]:
        """The request asked once more without streaming: its refusal raised as ours (an
        overflow with the limit it states, tools refused), or its answer as stream events."""
        whole = {k: v for k, v in kwargs.items() if k != "stream_options"}
        whole["stream"] = False
        try:
            response = await litellm.acompletion(**whole)
        except Exception as e:
            raise translate_error(e, request.model, secrets=secrets,
                                  api_base=kwargs.get("api_base")) from e
        choice = response.choices[0] if response.choices else None
        if choice is None or not choice.finish_reason:
            raise StreamInterrupted(
                "The server answered with nothing, streamed or not. Nothing arrived; you can "
                "retry.", details="empty stream, then an answer without choices")
        message = choice.message
        if message.content:
            yield TextDelta(message.content)
        usage = getattr(response, "usage", None)
        if usage is not None and getattr(usage, "prompt_tokens", None) is not None:
            yield Usage(int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0),
                        _plain(usage))
        if message.tool_calls:
            yield ToolCallsReady([
                ToolCall(id=c.id or f"call_{n}", function=FunctionCall(
                    name=c.function.name or "", arguments=c.function.arguments or ""))
                for n, c in enumerate(message.tool_calls)])
        yield Finished(choice.finish_reason)

    def _kwargs(self, litellm: Any, request: LLMRequest) -> dict[str, Any]:
        provider = detect_provider(request.model, request.api_base)
        # litellm itself would send the provider's key to OPENAI_BASE_URL and friends: such an
        # address is a custom base URL like any other and gets only a key meant for it.
        api_base = request.api_base or environment_base_url(provider)
        api_key = request.api_key or key_for_request(provider, api_base, request.key_name)
        if not api_key:
            if api_base or provider in KEYLESS_PROVIDERS:
                api_key = "sk-no-key-needed"  # local servers ignore it; the SDK insists on one
            else:
                raise MissingApiKey(
                    f"No API key for {provider}. Set {key_env_var(provider)} in the environment"
                    + (" or save a key in Settings." if keyring_works() else
                       " before starting Context Workbench (no system keyring works here, so a "
                       "key cannot be saved in Settings)."),
                    details=f"provider={provider}",
                )
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": request.messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            "api_key": api_key,
            "timeout": request.timeout,
            # Retries are ours to decide (visible, cancellable); litellm and the SDK must not
            # retry behind our back.
            "num_retries": 0,
            "max_retries": 0,
        }
        if api_base:
            kwargs["api_base"] = api_base
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


def needs_cache_breakpoints(model: str) -> bool:
    """Whether `model` caches a prompt's prefix only where the request marks it: Anthropic's
    Claude models, directly or through Bedrock, Vertex AI or Azure AI (litellm names the
    provider). OpenAI, DeepSeek and local servers cache by themselves: no marks for them."""
    if "claude" not in model.lower():
        return False
    try:
        from litellm import get_llm_provider

        provider = get_llm_provider(model=model)[1]
    except Exception:  # optional: a model litellm cannot route gets no marks
        return False
    return provider in ("anthropic", "bedrock", "vertex_ai", "azure_ai")


def keys_in_use(request: LLMRequest, env: Mapping[str, str] | None = None) -> list[str]:
    """Every key `request` could carry, for redacting text about it (a traceback, a dump):
    the one given, the one `key_for_request` would choose, and the keys in the environment."""
    env = os.environ if env is None else env
    keys = [request.api_key]
    try:
        provider = detect_provider(request.model, request.api_base)
        api_base = request.api_base or environment_base_url(provider, env)
        keys.append(key_for_request(provider, api_base, request.key_name, env))
    except Exception:  # redaction must never fail the report of a failure
        pass
    keys += [value for name, value in env.items()
             if name.endswith("_API_KEY") or name == ENV_API_KEY]
    return [k for k in keys if k]


def detect_provider(model: str, api_base: str | None = None) -> str:
    """litellm's provider name for a model string.

    Raises:
        UnknownModel: litellm cannot tell which provider serves the model.
    """
    litellm = load_litellm()
    try:
        return str(litellm.get_llm_provider(model=model, api_base=api_base)[1])
    except Exception as e:  # litellm raises BadRequestError here
        raise UnknownModel(
            f"Unknown model {model!r}: litellm cannot tell which provider serves it. Use a "
            "provider prefix such as 'openai/', 'anthropic/' or 'ollama/' (see Settings).",
            details=str(e),
        ) from e


def environment_base_url(provider: str, env: Mapping[str, str] | None = None) -> str | None:
    """A base URL for `provider` that litellm would take from the environment, unless it is the
    provider's own address (where its own key belongs)."""
    env = os.environ if env is None else env
    prefix = ENV_PREFIXES.get(provider, provider.upper().replace("-", "_"))
    for name in (f"{prefix}_BASE_URL", f"{prefix}_API_BASE"):
        value = (env.get(name) or "").strip()
        if value and not is_own_address(ENV_PREFIX_OWNER.get(prefix, provider), value):
            return value
    return None


def is_own_address(provider: str, url: str) -> bool:
    """Whether `url` is one of `provider`'s own addresses (where its own key belongs)."""
    host = (urlsplit(url).hostname or "").lower()
    return any(host.endswith(own) if own.startswith(".") else host == own
               for own in OWN_HOSTS.get(provider, ()))


def translate_error(e: BaseException, model: str, mid_stream: bool = False,
                    secrets: Sequence[str | None] = (), api_base: str | None = None
                    ) -> LLMError:
    """Map a litellm (or transport) exception to our own type, in plain words. The provider's
    text is kept in `details` with every key-shaped string and each of `secrets` redacted.
    `api_base`: the address the request went to (a local server's mistakes are named)."""
    raw = redact(str(e), secrets)
    error = _address_error(e, api_base, raw) or _translate(e, model, mid_stream, raw)
    if isinstance(error, AuthError):
        error.message += _where_keys_go(model, api_base)
    error.message = redact(error.message, secrets)
    error.args = (error.message,)
    return error


def _where_keys_go(model: str, api_base: str | None) -> str:
    """Where the key that was sent came from, and so where to fix it, on this machine."""
    if api_base:
        where = f"{ENV_API_KEY} (a custom base URL gets only its own key)"
    else:
        where = key_env_var(detect_provider(model, api_base))
    if keyring_works():
        return f" Check the key in Settings, or {where}."
    return f" Check {where} (no system keyring works here, so Settings cannot keep a key)."


def _address_error(e: BaseException, api_base: str | None, raw: str) -> LLMError | None:
    """The two mistakes made with a local server's address, in its words: a base URL without
    the /v1 its chat route lives under (the server answers 404 for the path, which litellm
    calls an unknown model), and an address where nothing listens (refused at once: retrying
    it cannot help)."""
    if not api_base:
        return None
    litellm = load_litellm()
    base = api_base.rstrip("/")
    if isinstance(e, litellm.NotFoundError) and "model" not in raw.lower().replace(
            "openaiexception", "").replace("litellm.notfounderror", ""):
        hint = (f" OpenAI-compatible servers (llama.cpp, vLLM, LM Studio, Ollama) serve it "
                f"under /v1: try {base}/v1." if not base.endswith("/v1") else
                " Check the address in Settings.")
        return UnknownModel(f"The server at {base} answered 404 (not found) for "
                            f"{base}/chat/completions: it has no chat route there.{hint}",
                            details=raw)
    host = (urlsplit(base).hostname or "").lower()
    if host in ("localhost", "127.0.0.1", "::1") or host.startswith("127."):
        x: BaseException | None = e
        for _ in range(8):
            if x is None:
                break
            if isinstance(x, ConnectionRefusedError):
                refused = NetworkError(
                    f"Nothing is listening at {base} (connection refused). Start the server, "
                    "or check the address and port in Settings.", details=raw)
                refused.retryable = False  # at once, every time: waiting cannot help
                return refused
            x = x.__cause__ or x.__context__
    return None


def _translate(e: BaseException, model: str, mid_stream: bool, raw: str) -> LLMError:
    litellm = load_litellm()
    status = getattr(e, "status_code", None)
    if isinstance(e, litellm.ContextWindowExceededError):
        limit = _stated_limit(raw)
        said = f" (the model accepts {limit:,} tokens)" if limit else ""
        return ContextOverflow(
            f"The conversation is longer than {model} accepts{said}. Shorten it or use a model "
            "with a larger context window.",
            details=raw, limit=limit, prompt_tokens=_stated_prompt(raw),
        )
    if isinstance(e, litellm.AuthenticationError) or status in (401, 403):
        # (a server that calls its 401 "invalid_request_error" reaches us as a bad request)
        said = _server_said(raw)
        return AuthError(
            f"The provider rejected the API key for {model}"
            + (f" (HTTP {status}: \"{said}\")." if said else "."),
            details=raw,
        )
    if isinstance(e, litellm.RateLimitError):
        after = _retry_after(e)
        wait = f" It asks to wait {after:g} s." if after else ""
        return RateLimited(
            f"The provider is rate-limiting requests.{wait} Try again shortly.",
            details=raw, retry_after=after,
        )
    if isinstance(e, litellm.NotFoundError):
        return UnknownModel(
            f"The provider does not know the model {model!r}. Check the model name in Settings.",
            details=raw,
        )
    if isinstance(e, litellm.Timeout):
        return LLMTimeout(
            "The provider did not answer in time. Check the connection and try again.", details=raw
        )
    if "repeating the same chunk" in raw:
        return ProviderError(
            "The model kept sending the same piece of text over and over, so the answer was "
            "stopped. What arrived is kept; Retry may help.", details=raw, status=None)
    if mid_stream or "MidStreamFallbackError" in type(e).__name__:
        return StreamInterrupted(
            "The connection broke while the answer was streaming. What arrived is kept; you can "
            "continue or retry.",
            details=raw,
        )
    if _network_cause(e):
        return NetworkError(
            "Could not reach the provider. Check the network or the server address in Settings.",
            details=raw,
        )
    if isinstance(e, (litellm.BadRequestError,)) and "LLM Provider NOT provided" in raw:
        return UnknownModel(
            f"Unknown model {model!r}: add a provider prefix such as 'openai/' or 'ollama/'.",
            details=raw,
        )
    refused = _NOT_SENT.search(raw)
    if refused:  # litellm checks the messages before sending: nothing left the machine
        return ProviderError(
            f"Not sent: message {refused.group(1)} of the request is not a valid chat message "
            "(litellm refused it before sending). Leave that entry out of the context and "
            "send again.", details=raw, status=400)
    code = int(status) if isinstance(status, int) else None
    if code == 400 and _TOOLS_REFUSED.search(raw):
        return ToolsUnsupported(
            f"{model} does not accept tools (its server said so).", details=raw, status=code)
    return ProviderError(
        f"The provider returned an error{f' (HTTP {code})' if code else ''}. "
        + ("It may be temporary; retry in a moment." if code is None or code >= 500
           else "Check the request settings."),
        details=raw, status=code,
    )


# --- helpers -----------------------------------------------------------------------------------

def _server_said(raw: str) -> str:
    """The server's own sentence in litellm's text of an error ("…Exception - <it>"), cut short."""
    said = raw.rsplit("Exception - ", 1)[-1].strip() if "Exception - " in raw else ""
    return said if len(said) <= 200 else said[:199] + "…"


# What one answer may bring: its text and tool-call arguments together. Far beyond any model's
# output limit (about 250,000 tokens); a stream past it is a model or server gone wrong.
MAX_ANSWER_CHARS = 1_000_000
# A long stream's chunks are forgotten as it goes (see `_forget_chunks`): after this many, every
# FORGET_EVERY chunks. An ordinary answer (up to ~16k tokens) is never touched.
FORGET_AFTER = 16_384
FORGET_EVERY = 1024

# litellm's own check of the messages, made before anything is sent.
_NOT_SENT = re.compile(r"Invalid (?:user )?message at index (\d+)")

# How servers refuse a request that offers tools: Ollama ("does not support tools"), vLLM
# ("auto" tool choice requires --enable-auto-tool-choice), others ("tools are not supported").
_TOOLS_REFUSED = re.compile(
    r"(does not support tools|tools? (?:are|is) not supported|tool[_ ]?(?:use|calls?|choice)"
    r"[^.]{0,40}not supported|enable-auto-tool-choice|unsupported[^.]{0,20}tools?)",
    re.IGNORECASE)


@dataclass
class _Call:
    """A tool call while it streams in: its arguments as the pieces that came (joined once at
    the end; adding each piece to a string would copy all before it, every time)."""

    id: str = ""
    name: str = ""
    pieces: list[str] = field(default_factory=list)


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


def _assemble(calls: dict[int, _Call]) -> list[ToolCall]:
    return [ToolCall(id=calls[i].id or f"call_{i}", function=FunctionCall(
        name=calls[i].name, arguments="".join(calls[i].pieces))) for i in sorted(calls)]


def _forget_chunks(response: Any) -> None:
    """Drop what litellm's stream keeps of the chunks already read. It keeps every chunk (a
    few kilobytes each: a gigabyte for a megabyte of text in small chunks) for a log we do not
    use, and the text so far as a string it extends chunk by chunk (copying it every time:
    quadratic). Only the last two chunks are looked at again (its check for a model repeating
    itself). Usage comes from the provider's usage chunk (we ask for it); from a server that
    sends none, litellm counts the answer's tokens from the chunks it kept, so past FORGET_AFTER
    chunks that estimate covers only the last of them (the prompt's count is unaffected)."""
    kept = getattr(response, "chunks", None)
    if isinstance(kept, list) and len(kept) > 2:
        del kept[:-2]
    if isinstance(getattr(response, "response_uptil_now", None), str):
        response.response_uptil_now = ""


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


def _plain(usage: Any) -> dict[str, Any]:
    try:
        data = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)
        plain: dict[str, Any] = json.loads(json.dumps(data, default=str))
        return plain
    except Exception:  # usage detail is a nicety
        return {}


def _retry_after(e: BaseException) -> float | None:
    seen = 0
    x: BaseException | None = e
    while x is not None and seen < 6:
        for headers in (getattr(x, "litellm_response_headers", None),
                        getattr(x, "headers", None),
                        getattr(getattr(x, "response", None), "headers", None)):
            if not headers:
                continue
            try:
                ms = headers.get("retry-after-ms")
                if ms:
                    return float(ms) / 1000.0
                value = headers.get("retry-after")
                if value:
                    return float(value)
            except (TypeError, ValueError):
                continue
        x = x.__cause__ or x.__context__
        seen += 1
    return None


def _stated_limit(text: str) -> int | None:
    m = re.search(r"maximum context length is ([\d,]+)", text) or re.search(
        r"context (?:window|length)[^\d]{0,30}([\d,]{3,})", text
    )
    return int(m.group(1).replace(",", "")) if m else None


def _stated_prompt(text: str) -> int | None:
    """The provider's count of a refused request's messages, where its refusal says it."""
    m = re.search(r"\(([\d,]+) in the messages", text) or re.search(
        r"messages resulted in ([\d,]+) tokens", text)
    return int(m.group(1).replace(",", "")) if m else None


def _network_cause(e: BaseException) -> bool:
    """True when the chain of causes shows the server was never reached.

    litellm reports a refused connection as an HTTP 500 "Connection error."; the truth is
    further down the chain (ConnectionRefusedError, a DNS failure, httpx.ConnectError, ...).
    """
    seen = 0
    x: BaseException | None = e
    while x is not None and seen < 8:
        if isinstance(x, (ConnectionError, socket.gaierror)):
            return True
        if type(x).__name__ in ("ConnectError", "ClientConnectorError", "ClientConnectorDNSError"):
            return True
        x = x.__cause__ or x.__context__
        seen += 1
    return False


def cost_of(model: str, usage: dict[str, Any] | None) -> float | None:
    """What a request cost in USD by litellm's local price table, or None when unknown."""
    if not usage:
        return None
    try:
        litellm = load_litellm()
        prompt, completion = litellm.cost_per_token(
            model=model, prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0))
        total = float(prompt) + float(completion)
    except Exception:  # an unknown model has no price: say nothing
        return None
    return total if total > 0 else None
