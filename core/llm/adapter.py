"""The one interface to the models: a streaming request in, typed events out.

    async for event in client.stream(request):
        TextDelta(text) ... ToolCallsReady(calls) | Usage(...) | Finished(reason)

Two transports stand behind it, chosen by the provider (core.llm.providers.speaks_openai):
the openai SDK for models that speak the OpenAI protocol (core.llm.via_openai), litellm for
the providers whose protocol it translates (core.llm.via_litellm). They give the same events
and the same errors (core.llm.errors) for the same answer. Neither is imported before a
request needs it: litellm takes seconds, the SDK a fraction of one.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from typing import Protocol

from core.llm.events import (
    Finished,
    LLMRequest,
    StreamEvent,
    TextDelta,
    ToolCallsReady,
    Usage,
)
from core.llm.model_map import speaks_openai
from core.llm.providers import detect_provider, environment_base_url, needs_cache_breakpoints
from core.settings import ENV_API_KEY, key_for_request

__all__ = ["Finished", "LLMClient", "LLMRequest", "StreamEvent", "TextDelta", "ToolCallsReady",
           "Transport", "Usage", "detect_provider", "keys_in_use",
           "needs_cache_breakpoints", "transport_for"]


class Transport(Protocol):
    def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]: ...


class LLMClient:
    """Streams chat completions through the transport the model's provider takes. Stateless;
    safe to share."""

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        async for event in transport_for(request.model).stream(request):
            yield event


def transport_for(model: str) -> Transport:
    """The openai SDK's transport for a model that speaks the OpenAI protocol, else litellm's.
    Deciding imports neither."""
    if speaks_openai(model):
        from core.llm.via_openai import OpenAITransport

        return OpenAITransport()
    from core.llm.via_litellm import LitellmTransport

    return LitellmTransport()


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
