"""Prompt-cache hints and measurements, against the loopback server through real litellm: a
Claude model's requests carry cache breakpoints (Anthropic needs them) where the previous
request ends and at their own end; other providers' requests carry none; every request's
report records its stable prefix against the one before, and what the provider said it read
from its cache."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import pytest

from core.engine import Engine, RequestBuilt, TurnOptions
from core.factory import build_engine
from core.settings import LLMSettings
from core.store.project import Project
from core.store.requests import latest_request
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer


def turn(engine: Engine, conv: str, text: str, settings: LLMSettings) -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in engine.send(conv, text, settings, TurnOptions())]

    return asyncio.run(go())


def marked(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any("cache_control" in part for part in content)


# litellm keeps an HTTP client per event loop for Anthropic; each asyncio.run here closes its
# loop under it (the window has one loop for good), so the sockets are collected in this test.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_claude_model_gets_cache_breakpoints_where_the_previous_request_ends(
        project: Project, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    settings = LLMSettings(model="anthropic/claude-3-5-sonnet-latest",
                           api_base=llm_server.url.removesuffix("/v1"), max_output_tokens=200,
                           auto_retries=0)
    conv = project.conversations.create().id
    engine = build_engine(project)
    llm_server.script(Answer("first answer", usage=(1200, 5)),
                      Answer("second answer", usage=(1250, 5), cached=1190))
    turn(engine, conv, "first question", settings)
    events = turn(engine, conv, "second question", settings)
    first, second = (r.body for r in llm_server.requests)
    assert [p.get("cache_control") for p in second["system"]] == [{"type": "ephemeral"}]
    # Anthropic's body: the system prompt apart, then the turns; the first request's last
    # message (where this one stops repeating it) and this one's last are marked
    assert [marked(m) for m in second["messages"]] == [True, False, True]
    assert second["messages"][0]["content"][0]["text"] == "first question"
    assert marked(first["messages"][-1]) and first["system"][0]["cache_control"]
    report = next(e.request.report for e in events if isinstance(e, RequestBuilt))
    assert report.cached_tokens == 1190  # Anthropic's cache_read_input_tokens
    gc.collect()


def test_other_providers_get_no_marks_and_each_report_measures_its_stable_prefix(
        project: Project, llm_server: FakeLLMServer) -> None:
    settings = LLMSettings(model=MODEL, api_base=llm_server.url, max_output_tokens=200,
                           auto_retries=0)
    conv = project.conversations.create().id
    engine = build_engine(project)
    llm_server.script(Answer("one", usage=(900, 3)), Answer("two", usage=(930, 3), cached=896))
    turn(engine, conv, "first question", settings)
    events = turn(engine, conv, "second question", settings)
    first, second = (r.body for r in llm_server.requests)
    assert "cache_control" not in json.dumps(second)
    assert second["messages"][:len(first["messages"])] == first["messages"]  # byte-stable
    assert second["tools"] == first["tools"]
    report = next(e.request.report for e in events if isinstance(e, RequestBuilt))
    assert report.cached_tokens == 896  # OpenAI's prompt_tokens_details.cached_tokens
    assert report.stable_prefix is not None
    assert report.stable_prefix["messages"] == len(first["messages"]) == 2
    assert 0 < report.stable_prefix["tokens"] < report.stable_prefix["of_tokens"]
    # the kept copy says it too, and so does a new process's next request (from the copy)
    saved = latest_request(project.state / "requests", conv)
    assert saved is not None and saved[1]["report"]["stable_prefix"] == report.stable_prefix
    llm_server.script(Answer("three"))
    events = turn(build_engine(project), conv, "third question", settings)
    again = next(e.request.report for e in events if isinstance(e, RequestBuilt))
    assert again.stable_prefix is not None and again.stable_prefix["messages"] == 4
