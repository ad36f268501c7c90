"""What a request to a model is, and the events its answer comes as (whichever transport)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from core.model import ToolCall


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
    # False when the provider sent no usage and we counted the request and the stream ourselves
    # (llama.cpp's server streams none): a guess of ours, never something to calibrate against.
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
