"""The search for a model server already running on this machine (core/llm/local_servers.py),
on ports the tests choose: servers found with their models, everything else not."""

from __future__ import annotations

import asyncio

import pytest

from core.llm.local_servers import COMPATIBLE, LocalServer, find_local_servers, is_loopback
from tests.helpers.fake_llm import FakeLLMServer
from tests.helpers.odd_ports import closed_port, odd_port


def root(server: FakeLLMServer) -> str:
    return server.url.removesuffix("/v1")


def find(*addresses: str, deadline_s: float | None = None) -> list[LocalServer]:
    return asyncio.run(find_local_servers(addresses, deadline_s))


@pytest.mark.parametrize("owner, kind", [("vllm", "vLLM"), ("llamacpp", "llama.cpp"),
                                         ("me", "llama-cpp-python"),
                                         ("organization_owner", "LM Studio"),
                                         ("someone", COMPATIBLE)])
def test_an_openai_compatible_server_is_found_with_its_models(llm_server: FakeLLMServer,
                                                               owner: str, kind: str) -> None:
    llm_server.info["/v1/models"] = {"object": "list", "data": [
        {"id": "qwen2.5-7b", "object": "model", "owned_by": owner},
        {"id": "smollm2", "object": "model", "owned_by": owner}]}
    [server] = find(root(llm_server))
    assert server == LocalServer(kind, root(llm_server), ("qwen2.5-7b", "smollm2"))
    assert server.api_base == llm_server.url
    assert server.model_setting("smollm2") == "openai/smollm2"
    assert llm_server.requests == []  # asked, never sent a chat request


def test_ollama_is_known_by_its_own_list(llm_server: FakeLLMServer) -> None:
    llm_server.info["/api/tags"] = {"models": [{"name": "llama3.1:8b", "model": "llama3.1:8b"},
                                               {"name": "qwen2.5:0.5b"}]}
    llm_server.info["/v1/models"] = {"data": [{"id": "llama3.1:8b", "owned_by": "library"}]}
    [server] = find(root(llm_server))
    assert (server.kind, server.models) == ("Ollama", ("llama3.1:8b", "qwen2.5:0.5b"))
    assert server.api_base == f"{root(llm_server)}/v1"


def test_a_server_with_no_model_list_garbage_a_hang_and_a_closed_port_are_not_servers(
        llm_server: FakeLLMServer) -> None:
    # llm_server answers 404 to both questions: an HTTP server, but no model server
    with odd_port("garbage") as garbage, odd_port("hang") as hang:
        assert find(root(llm_server), garbage, hang, closed_port(), deadline_s=0.5) == []


def test_what_answers_is_found_though_another_port_hangs(llm_server: FakeLLMServer) -> None:
    llm_server.info["/v1/models"] = {"data": [{"id": "m", "owned_by": "vllm"}]}
    with odd_port("hang") as hang:
        found = find(hang, root(llm_server), deadline_s=1.0)
    assert [s.address for s in found] == [root(llm_server)]


def test_an_answer_that_is_not_json_or_too_long_is_no_server(
        llm_server: FakeLLMServer) -> None:
    llm_server.info["/v1/models"] = ["not", "a", "model", "list"]
    assert find(root(llm_server)) == []
    llm_server.info["/v1/models"] = {"data": [{"id": "m" * 1_100_000}]}
    assert find(root(llm_server)) == []


def test_only_loopback_addresses_are_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from core.llm import local_servers

    assert is_loopback("http://127.0.0.1:8080") and is_loopback("http://localhost:1234")
    assert is_loopback("http://[::1]:8000")
    assert not is_loopback("http://192.168.1.10:11434") and not is_loopback("http://example.com")
    asked: list[str] = []

    async def ask(_client: object, address: str) -> None:
        asked.append(address)

    monkeypatch.setattr(local_servers, "_ask", ask)
    assert find("http://192.0.2.1:11434", "http://127.0.0.1:9/") == []
    assert asked == ["http://127.0.0.1:9"]
