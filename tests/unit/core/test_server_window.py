"""The context window a model's own server states is asked once and applies to the budget."""

from __future__ import annotations

import pytest

from core.context import server_window
from core.context.service import ProjectContext
from core.settings import LLMSettings
from core.store.project import Project
from tests.helpers.fake_llm import MODEL, FakeLLMServer


@pytest.fixture(autouse=True)
def fresh() -> None:
    server_window.forget_all()


def settings(server: FakeLLMServer, window: int | None = None) -> LLMSettings:
    return LLMSettings(model=MODEL, api_base=server.url, max_output_tokens=1000,
                       context_window=window)


@pytest.mark.parametrize("path, body, expected", [
    ("/v1/models", {"data": [{"id": "other", "max_model_len": 4096},
                             {"id": "test-model", "max_model_len": 32768}]}, 32768),
    ("/api/v0/models/test-model", {"loaded_context_length": 16384}, 16384),
    ("/props", {"default_generation_settings": {"n_ctx": 8000}}, 8000),
    ("/api/show", {"parameters": "temperature 0.7\nnum_ctx 12288",
                   "model_info": {"llama.context_length": 131072}}, 12288),
])
def test_each_kind_of_server_states_its_window(project: Project, llm_server, path, body,
                                               expected) -> None:
    llm_server.info[path] = body
    conv = project.conversations.create()
    service = ProjectContext(project.conversations)
    budget = service.budget(conv.id, settings(llm_server))
    assert (budget.window, budget.source) == (expected, "server")
    assert llm_server.requests == []  # asking never counts as (or costs) a chat request


def test_the_server_is_asked_once_and_the_window_thread_never_asks(project: Project,
                                                                   llm_server) -> None:
    conv = project.conversations.create()
    context = ProjectContext(project.conversations)
    assert context.budget(conv.id, settings(llm_server), ask_servers=False).source != "server"
    llm_server.info["/props"] = {"default_generation_settings": {"n_ctx": 8000}}
    assert context.budget(conv.id, settings(llm_server)).window == 8000  # the engine's thread
    del llm_server.info["/props"]  # a second ask would find nothing now
    assert context.budget(conv.id, settings(llm_server)).window == 8000
    # the window's thread: what the server said, without asking
    assert context.budget(conv.id, settings(llm_server), ask_servers=False).window == 8000


def test_the_smaller_of_the_setting_and_the_servers_window_applies(project: Project,
                                                                   llm_server) -> None:
    """A server that runs its model with 8,000 tokens refuses a request built for the 20,000
    set in Settings; a conversation set to 3,000 gets 3,000. Whichever applies is named."""
    llm_server.info["/props"] = {"default_generation_settings": {"n_ctx": 8000}}
    conv = project.conversations.create()
    service = ProjectContext(project.conversations)
    budget = service.budget(conv.id, settings(llm_server, window=20000))
    assert (budget.window, budget.source) == (8000, "server")
    assert budget.note is not None and "fewer than the 20,000 set in Settings" in budget.note
    project.conversations.update_meta(conv.id, context_window=3000)
    budget = service.budget(conv.id, settings(llm_server, window=20000))
    assert (budget.window, budget.source, budget.note) == (3000, "override", None)


def test_an_unknown_model_keeps_most_of_a_guessed_window_for_the_request(project: Project) -> None:
    conv = project.conversations.create()
    budget = ProjectContext(project.conversations).budget(
        conv.id, LLMSettings(model="openai/never-heard-of-it", max_output_tokens=4096))
    assert budget.source == "default" and budget.reserved_output == 2048
    assert budget.usable > 5500
