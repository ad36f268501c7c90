"""The shortcut through the openai SDK's transform sends exactly what the SDK itself would, and
stands aside where the SDK's types would change what is sent."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Any, Required

import pytest
from typing_extensions import TypedDict

from core.llm.offline import configure_offline_environment

configure_offline_environment()
openai = pytest.importorskip("openai")

from openai._utils import PropertyInfo, async_maybe_transform  # noqa: E402
from openai.types.chat import completion_create_params  # noqa: E402

from core.llm import sdk_shims  # noqa: E402


class Plain(TypedDict, total=False):
    role: Required[str]
    content: str


class Aliased(TypedDict, total=False):
    card_id: Annotated[str, PropertyInfo(alias="cardID")]


class Formatted(TypedDict, total=False):
    when: Annotated[datetime, PropertyInfo(format="iso8601")]


class Nested(TypedDict, total=False):
    parts: list[Aliased | Plain]


def test_only_aliases_and_formats_count_as_transforming() -> None:
    assert not sdk_shims.transforms(Plain)
    assert sdk_shims.transforms(Aliased)
    assert sdk_shims.transforms(Formatted)
    assert sdk_shims.transforms(Nested)  # found inside a list of a union


MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief. Ünïcode ✓"},
    {"role": "user", "content": [{"type": "text", "text": "look"},
                                 {"type": "image_url",
                                  "image_url": {"url": "data:image/png;base64,AAAA"}}]},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "read_file", "arguments": "{\"path\": \"a.py\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "print('hi')\n"},
    {"role": "assistant", "content": "done", "name": "helper"},
]


def test_the_request_body_is_what_the_sdk_would_send() -> None:
    from openai.resources.chat.completions import completions as module

    assert sdk_shims.install()
    assert sdk_shims.install()  # twice is once
    # the SDK's own import of the name (not re-exported), which the shim replaces
    shortcut = module.async_maybe_transform  # type: ignore[attr-defined]
    assert shortcut is not async_maybe_transform
    params = {"messages": MESSAGES, "model": "gpt-4o", "stream": True, "max_tokens": 64,
              "tools": [{"type": "function", "function": {
                  "name": "read_file", "parameters": {"type": "object"}}}],
              "stream_options": {"include_usage": True}}
    expected_type = completion_create_params.CompletionCreateParamsStreaming
    ours = asyncio.run(shortcut(params, expected_type))
    theirs = asyncio.run(async_maybe_transform(params, expected_type))
    assert ours == theirs
    assert ours is not None and ours["messages"] is MESSAGES  # passed through, not walked
