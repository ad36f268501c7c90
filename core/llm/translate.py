"""A transport's exception as one of our errors, in plain words (see core.llm.errors).

Each transport names what kind of failure its exception is (`Kind`: from litellm's exception
classes, or from the openai SDK's status errors); everything after that is decided here, once,
for both. The provider's text is kept in `details` with every key redacted.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Sequence
from typing import Literal
from urllib.parse import urlsplit

from core.llm.errors import (
    AuthError,
    ContextOverflow,
    LLMError,
    LLMTimeout,
    NetworkError,
    ProviderError,
    RateLimited,
    StreamInterrupted,
    ToolsUnsupported,
    UnknownModel,
)
from core.redact import redact
from core.settings import ENV_API_KEY, key_env_var, keyring_works

Kind = Literal["context_window", "auth", "rate_limit", "not_found", "timeout", "bad_request",
               "other"]

# litellm's own check of the messages, made before anything is sent.
_NOT_SENT = re.compile(r"Invalid (?:user )?message at index (\d+)")

# How servers refuse a request that offers tools: Ollama ("does not support tools"), vLLM
# ("auto" tool choice requires --enable-auto-tool-choice), others ("tools are not supported").
_TOOLS_REFUSED = re.compile(
    r"(does not support tools|tools? (?:are|is) not supported|tool[_ ]?(?:use|calls?|choice)"
    r"[^.]{0,40}not supported|enable-auto-tool-choice|unsupported[^.]{0,20}tools?)",
    re.IGNORECASE)

# How servers word a prompt over the model's context (litellm's list, read by the SDK's path).
_OVER_CONTEXT = re.compile(
    r"exceed context limit|this model's maximum context length is|model's maximum context "
    r"limit|is longer than the model's context length|input tokens exceed the configured limit|"
    r"exceeds the available context size|exceeds the maximum number of tokens allowed|"
    r"current length is .* while limit is|maximum input length is .*tokens|prompt is too long|"
    r"exceeds? context window of",  # llama-cpp-python's own words, before its server's
    re.IGNORECASE)


def over_context(code: object, text: str) -> bool:
    """Whether a refusal is a prompt over the model's context, by its code or its words."""
    return code == "context_length_exceeded" or bool(_OVER_CONTEXT.search(text))


def stated_window(code: object, text: str) -> int | None:
    """The window a refusal of a prompt as too long names (None: another refusal, or one that
    names none): what a refused turn learns (`ContextOverflow.limit`), for a counting request
    (core.context.server_window.count_window) too."""
    return _stated_limit(text) if over_context(code, text) else None


def translate_error(e: BaseException, kind: Kind, model: str, mid_stream: bool = False,
                    secrets: Sequence[str | None] = (), api_base: str | None = None,
                    retry_after: float | None = None) -> LLMError:
    """Map a transport's exception of `kind` to our own type. `api_base`: the address the
    request went to (a local server's mistakes are named); `retry_after`: what the provider
    asked to wait, in seconds."""
    raw = redact(str(e), secrets)
    error = _address_error(e, kind, api_base, raw) or _translate(e, kind, model, mid_stream,
                                                                 raw, retry_after)
    if isinstance(error, AuthError):
        error.message += _where_keys_go(model, api_base)
    error.message = redact(error.message, secrets)
    error.args = (error.message,)
    return error


def retry_after(e: BaseException) -> float | None:
    """The wait a refusal asks for (Retry-After, retry-after-ms), from its headers or those of
    an exception it was raised from."""
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


def _where_keys_go(model: str, api_base: str | None) -> str:
    """Where the key that was sent came from, and so where to fix it, on this machine."""
    if api_base:
        where = f"{ENV_API_KEY} (a custom base URL gets only its own key)"
    else:
        from core.llm.providers import detect_provider

        where = key_env_var(detect_provider(model, api_base))
    if keyring_works():
        return f" Check the key in Settings, or {where}."
    return f" Check {where} (no system keyring works here, so Settings cannot keep a key)."


def _address_error(e: BaseException, kind: Kind, api_base: str | None, raw: str
                   ) -> LLMError | None:
    """The two mistakes made with a local server's address, in its words: a base URL without
    the /v1 its chat route lives under (the server answers 404 for the path, which litellm
    calls an unknown model), and an address where nothing listens (refused at once: retrying
    it cannot help)."""
    if not api_base:
        return None
    base = api_base.rstrip("/")
    if kind == "not_found" and "model" not in raw.lower().replace(
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


def _translate(e: BaseException, kind: Kind, model: str, mid_stream: bool, raw: str,
               after: float | None) -> LLMError:
    status = getattr(e, "status_code", None)
    if kind == "context_window":
        limit = _stated_limit(raw) or _stated_limit(_causes(e))
        said = f" (the model accepts {limit:,} tokens)" if limit else ""
        return ContextOverflow(
            f"The conversation is longer than {model} accepts{said}. Shorten it or use a model "
            "with a larger context window.",
            details=raw, limit=limit, prompt_tokens=_stated_prompt(raw),
        )
    if kind == "auth" or status in (401, 403):
        # (a server that calls its 401 "invalid_request_error" reaches us as a bad request)
        said = _server_said(raw)
        return AuthError(f"The provider rejected the API key for {model}"
                         + (f" (HTTP {status}: \"{said}\")." if said else "."), details=raw)
    if kind == "rate_limit":
        wait = f" It asks to wait {after:g} s." if after else ""
        return RateLimited(
            f"The provider is rate-limiting requests.{wait} Try again shortly.",
            details=raw, retry_after=after,
        )
    if kind == "not_found":
        return UnknownModel(
            f"The provider does not know the model {model!r}. Check the model name in Settings.",
            details=raw,
        )
    if kind == "timeout":
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
    return _refused(kind, model, raw, int(status) if isinstance(status, int) else None)


def _refused(kind: Kind, model: str, raw: str, code: int | None) -> LLMError:
    """A request the provider (or litellm, before sending) refused, or an error of its own."""
    if kind == "bad_request" and "LLM Provider NOT provided" in raw:
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
    if code == 400 and _TOOLS_REFUSED.search(raw):
        return ToolsUnsupported(
            f"{model} does not accept tools (its server said so).", details=raw, status=code)
    return ProviderError(
        f"The provider returned an error{f' (HTTP {code})' if code else ''}. "
        + ("It may be temporary; retry in a moment." if code is None or code >= 500
           else "Check the request settings."),
        details=raw, status=code,
    )


def _stated_limit(text: str) -> int | None:
    """OpenAI's wording (llama-cpp-python's server copies it), another's "context window of
    N", or llama.cpp's server's `n_ctx` beside "exceeds the available context size"."""
    m = re.search(r"maximum context length is ([\d,]+)", text) or re.search(
        r"context (?:window|length)[^\d]{0,30}([\d,]{3,})", text
    ) or re.search(r"\bn_ctx\W{1,4}(\d{3,})", text)
    return int(m.group(1).replace(",", "")) if m else None


def _causes(e: BaseException) -> str:
    """What the exceptions `e` was raised from say (litellm keeps the server's own error
    object, llama.cpp's `n_ctx` in it, only on the SDK's exception beneath its own)."""
    said: list[str] = []
    x = e.__cause__ or e.__context__
    while x is not None and len(said) < 6:
        said.append(str(x))
        x = x.__cause__ or x.__context__
    return "\n".join(said)


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


def _server_said(raw: str) -> str:
    """The server's own sentence in an error's text ("…Exception - <it>", or the SDK's
    "Error code: 401 - {...'message': '<it>'...}"), cut short."""
    said = raw.rsplit("Exception - ", 1)[-1].strip() if "Exception - " in raw else ""
    if not said:
        m = re.search(r"""['"]message['"]:\s*['"]([^'"]{1,400})['"]""", raw)
        said = m.group(1).strip() if m else ""
    return said if len(said) <= 200 else said[:199] + "…"
