"""Which transport a model takes, decided without litellm: the openai SDK for models that speak
the OpenAI protocol, litellm for the providers whose protocol it translates."""

from __future__ import annotations

import pytest

from core.llm.adapter import transport_for
from core.llm.model_map import speaks_openai
from core.llm.providers import detect_provider
from core.llm.via_litellm import LitellmTransport
from core.llm.via_openai import OpenAITransport, request_body


@pytest.mark.parametrize(("model", "sdk"), [
    ("openai/gpt-4o-mini", True), ("openai/my-local-model", True), ("gpt-4o-mini", True),
    ("o3-mini", True), ("anthropic/claude-3-5-sonnet-latest", False), ("ollama/llama3.1", False),
    ("gemini/gemini-1.5-pro", False), ("claude-3-5-sonnet-20240620", False),
    ("no-such-model-xyz", False)])
def test_the_path_a_model_takes(model: str, sdk: bool) -> None:
    assert speaks_openai(model) is sdk
    assert isinstance(transport_for(model), OpenAITransport if sdk else LitellmTransport)


def test_the_sdks_models_are_placed_without_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    from core.llm import runtime

    def refuse() -> None:
        raise AssertionError("litellm was asked")

    monkeypatch.setattr(runtime, "load_litellm", refuse)
    assert detect_provider("openai/anything", "http://127.0.0.1:8080/v1") == "openai"
    assert detect_provider("gpt-4o") == "openai"


def test_the_body_names_the_model_without_its_prefix() -> None:
    from core.llm.events import LLMRequest

    body = request_body(LLMRequest(model="openai/qwen2.5-7b", messages=[
        {"role": "assistant", "content": None, "tool_calls": []}], max_tokens=9))
    assert body["model"] == "qwen2.5-7b" and body["max_tokens"] == 9
    assert body["messages"] == [{"role": "assistant", "tool_calls": []}]
    assert body["stream_options"] == {"include_usage": True}
