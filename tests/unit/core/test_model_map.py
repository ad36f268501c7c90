"""The model map read without litellm gives the windows litellm itself gives."""

from __future__ import annotations

import pytest

from core.context.budget import model_window
from core.llm.runtime import load_litellm

MODELS = ["gpt-4o", "gpt-4o-mini", "openai/gpt-4o", "azure/gpt-4o", "ollama/gpt-4o", "mistral/mistral-large-latest", "deepseek/deepseek-chat", "gpt-4.1",
          "o3-mini", "anthropic/claude-3-5-sonnet-latest", "openai/test-model", "openai/smol",
          "gemini/gemini-1.5-pro", "openrouter/anthropic/claude-3.5-sonnet", "nonsense"]


@pytest.mark.parametrize("model", MODELS)
def test_the_window_is_litellms(model: str) -> None:
    litellm = load_litellm()
    try:
        info = litellm.get_model_info(model)
        theirs = info.get("max_input_tokens") or info.get("max_tokens")
    except Exception:  # litellm raises for a model it does not know
        theirs = None
    assert model_window(model) == theirs


def test_an_ollama_model_in_the_map_has_its_window() -> None:
    # litellm's own answer for an Ollama model depends on whether an Ollama server answers on
    # this machine; the map's does not (the server, when there is one, is asked first anyway).
    assert model_window("ollama/llama3") == 8192
