"""The adapter against a real loopback OpenAI server, through both transports: the openai SDK's
(which `openai/...` models take) and litellm's (which the providers it translates take)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from core.llm.adapter import (
    Finished,
    LLMClient,
    LLMRequest,
    StreamEvent,
    TextDelta,
    ToolCallsReady,
    Transport,
    Usage,
)
from core.llm.errors import (
    AuthError,
    ContextOverflow,
    LLMError,
    LLMTimeout,
    MissingApiKey,
    NetworkError,
    ProviderError,
    RateLimited,
    StreamInterrupted,
    UnknownModel,
)
from core.llm.providers import destination
from core.llm.via_litellm import LitellmTransport
from core.llm.via_openai import OpenAITransport
from tests.helpers.fake_llm import (
    MODEL,
    Answer,
    ContextLengthError,
    Cut,
    FakeLLMServer,
    Hang,
    HttpError,
    ToolCalls,
)

TRANSPORTS: dict[str, Callable[[], Transport]] = {"sdk": OpenAITransport,
                                                  "litellm": LitellmTransport}


@pytest.fixture(params=list(TRANSPORTS), autouse=True)
def via(request: pytest.FixtureRequest) -> str:
    """Each test here runs through both transports (litellm's own behaviour: litellm's only)."""
    if request.param == "sdk" and request.node.get_closest_marker("litellm_only"):
        pytest.skip("litellm's own behaviour")
    return str(request.param)


def collect(server: FakeLLMServer, via: str = "litellm", **overrides: Any) -> list[StreamEvent]:
    request = LLMRequest(**{"model": MODEL, "api_base": server.url,
                            "messages": [{"role": "user", "content": "hi"}], **overrides})

    async def run() -> list[StreamEvent]:
        return [ev async for ev in TRANSPORTS[via]().stream(request)]

    return asyncio.run(run())


def failure(server: FakeLLMServer, via: str = "litellm", **overrides: Any) -> LLMError:
    with pytest.raises(LLMError) as info:
        collect(server, via, **overrides)
    return info.value


def test_text_streams_in_order_with_usage_and_finish(
        via: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(Answer("The quick brown fox", usage=(11, 5)))
    events = collect(llm_server, via)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "The quick brown fox"
    assert [e for e in events if isinstance(e, Usage)][0].prompt_tokens == 11
    assert events[-1] == Finished("stop")
    body = llm_server.requests[0].body
    assert body["stream"] is True and body["messages"] == [{"role": "user", "content": "hi"}]


def test_tool_call_deltas_are_assembled_into_complete_calls(
        via: str, llm_server: FakeLLMServer) -> None:
    args = json.dumps({"path": "src/app.py", "limit": 40})
    llm_server.script(ToolCalls([("call_a", "read_file", args), ("call_b", "list_dir", "{}")]))
    events = collect(llm_server, via)
    ready = [e for e in events if isinstance(e, ToolCallsReady)][0]
    assert [(c.id, c.function.name, c.function.arguments) for c in ready.calls] == [
        ("call_a", "read_file", args), ("call_b", "list_dir", "{}")]
    assert events[-1] == Finished("tool_calls")


def test_max_tokens_and_length_finish_are_passed_through(
        via: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(Answer("cut sho", finish_reason="length"))
    assert collect(llm_server, via, max_tokens=7)[-1] == Finished("length")
    assert llm_server.requests[0].body["max_tokens"] == 7


@pytest.mark.parametrize("transport", [True, False], ids=["connection-dropped", "polite-end"])
def test_stream_without_finish_reason_is_an_error_not_an_answer(
        via: str, llm_server: FakeLLMServer, transport: bool
) -> None:
    llm_server.script(Cut("Partial ans", transport=transport))
    err = failure(llm_server, via)
    assert isinstance(err, StreamInterrupted) and err.retryable


def test_server_error_is_a_retryable_provider_error_and_not_retried(
        via: str, llm_server: FakeLLMServer,
) -> None:
    llm_server.script(HttpError(500, "upstream exploded"))
    err = failure(llm_server, via)
    assert isinstance(err, ProviderError) and err.retryable
    assert "upstream exploded" in (err.details or "")
    assert len(llm_server.requests) == 1  # retries are ours to decide, visibly


def test_rate_limit_carries_retry_after(
        via: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(HttpError(429, "slow down", headers={"Retry-After": "7"}))
    err = failure(llm_server, via)
    assert isinstance(err, RateLimited) and err.retry_after == 7.0
    assert "7 s" in str(err)


def test_rejected_key_is_an_auth_error(
        via: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(HttpError(401, "Incorrect API key provided"))
    err = failure(llm_server, via)
    assert isinstance(err, AuthError) and not err.retryable and "Settings" in str(err)


def test_context_overflow_states_the_models_limit(
        via: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(ContextLengthError(limit=16385, requested=20000))
    err = failure(llm_server, via)
    assert isinstance(err, ContextOverflow) and err.limit == 16385
    assert "16,385" in str(err)


def test_llama_cpp_s_overflow_names_its_window_in_n_ctx(
        via: str, llm_server: FakeLLMServer) -> None:
    # llama.cpp's server (b5000 and later) says "the request exceeds the available context
    # size" and puts its window beside the words, in n_ctx: read as the limit it is.
    llm_server.script(HttpError(400, "the request exceeds the available context size, try "
                                "increasing it", code=400, type="exceed_context_size_error",
                                extra={"n_prompt_tokens": 9000, "n_ctx": 4096}))
    err = failure(llm_server, via)
    assert isinstance(err, ContextOverflow) and err.limit == 4096
    assert "4,096" in str(err)


def test_model_the_server_does_not_know(
        via: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(HttpError(404, "The model `test-model` does not exist", code="model_not_found"))
    assert isinstance(failure(llm_server, via), UnknownModel)


def test_silent_server_times_out(
        via: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(Hang(5))
    err = failure(llm_server, via, timeout=0.5)
    assert isinstance(err, LLMTimeout) and err.retryable


def test_unreachable_server_is_a_network_error(via: str) -> None:
    with FakeLLMServer() as server:
        url = server.url
    err = failure(server, via, api_base=url)  # stopped: nothing listens there any more
    assert isinstance(err, NetworkError), err


def test_hosted_model_without_a_key_fails_before_any_request() -> None:
    with pytest.raises(MissingApiKey, match="OPENAI_API_KEY"):
        asyncio.run(_drain(LLMRequest(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])))


def test_model_string_litellm_cannot_place() -> None:
    with pytest.raises(UnknownModel, match="provider prefix"):
        asyncio.run(_drain(LLMRequest(model="no-such-model-xyz", messages=[])))


async def _drain(request: LLMRequest) -> None:
    async for _ in LLMClient().stream(request):
        pass


def test_the_key_in_use_is_redacted_however_the_provider_echoes_it(
        via: str, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "local-server-secret-7f3a9"  # not key-shaped: only known because it was sent
    monkeypatch.setenv("WORKBENCH_API_KEY", key)
    llm_server.script(HttpError(401, f"Unknown credential {key} for this server"))
    with pytest.raises(AuthError) as caught:
        collect(llm_server, via)
    assert llm_server.requests[0].headers["authorization"] == f"Bearer {key}"
    assert key not in (caught.value.details or "") and key not in str(caught.value)
    assert "Unknown credential [redacted] for this server" in (caught.value.details or "")


def test_a_providers_own_address_in_the_environment_keeps_its_own_key(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    # Azure has no single address: AZURE_API_BASE names the user's own resource, where
    # AZURE_API_KEY belongs. It is not a "custom base URL" that must not get the provider's key.
    monkeypatch.setenv("AZURE_API_BASE", "https://my-resource.openai.azure.com")
    monkeypatch.setenv("AZURE_API_KEY", "azure-key-0123456789")
    monkeypatch.setenv("AZURE_API_VERSION", "2024-06-01")
    where = destination(LLMRequest(model="azure/my-deployment", messages=[]))
    assert where.api_key == "azure-key-0123456789"
    # Some other server set for OpenAI gets only a key meant for it, never OPENAI_API_KEY.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key-never-elsewhere")
    monkeypatch.setenv("OPENAI_API_BASE", "https://proxy.example.com/v1")
    where = destination(LLMRequest(model="gpt-4o-mini", messages=[]))
    assert where.api_base == "https://proxy.example.com/v1"
    assert where.api_key != "sk-real-openai-key-never-elsewhere"
    monkeypatch.setenv("OPENAI_API_BASE", "https://api.openai.com/v1")  # its own address
    where = destination(LLMRequest(model="gpt-4o-mini", messages=[]))
    assert where.api_key == "sk-real-openai-key-never-elsewhere"


def test_a_long_run_of_identical_chunks_is_a_real_answer(
        via: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(Answer(chunks=["===="] * 440))  # a 1,760-character rule, chunk by chunk
    events = collect(llm_server, via)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "=" * 1760
    assert events[-1] == Finished("stop")


@pytest.mark.litellm_only
def test_a_model_stuck_in_a_loop_is_not_called_a_broken_connection(
        via: str, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.llm.runtime import load_litellm

    # Where a user lowers litellm's guard again (REPEATED_STREAMING_CHUNK_LIMIT), its verdict is
    # reported as what it is.
    monkeypatch.setattr(load_litellm(), "REPEATED_STREAMING_CHUNK_LIMIT", 20)
    llm_server.script(Answer(chunks=["loop"] * 60))
    err = failure(llm_server, via)
    assert isinstance(err, ProviderError) and not isinstance(err, StreamInterrupted)
    assert "same piece of text over and over" in str(err)


@pytest.mark.litellm_only
def test_a_message_litellm_refuses_before_sending_is_not_called_temporary(
        via: str, llm_server: FakeLLMServer) -> None:
    err = failure(llm_server, via, messages=[{"role": "user", "content": [
        {"type": "text", "text": "see"}, {"type": "x_clip", "clip": {"id": "c1"}}]}])
    assert isinstance(err, ProviderError) and not err.retryable
    assert "Not sent: message 0" in err.message and "temporary" not in err.message
    assert llm_server.requests == []  # nothing left the machine


@pytest.mark.litellm_only
def test_a_long_stream_forgets_its_chunks_and_still_arrives_whole(
        via: str, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.llm import via_litellm
    from core.llm.runtime import load_litellm

    monkeypatch.setattr(via_litellm, "FORGET_AFTER", 64)  # as past 16,384 chunks, sooner
    monkeypatch.setattr(via_litellm, "FORGET_EVERY", 16)
    words = [f"w{i} " for i in range(600)]
    args = json.dumps({"path": "a.txt", "content": "".join(words)})
    llm_server.script(Answer(chunks=words),
                      ToolCalls([("c1", "write_file", args)]),
                      Answer(chunks=words[:200] + ["loop!"] * 60))  # loops after forgetting
    events = collect(llm_server, via)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "".join(words)
    assert any(isinstance(e, Usage) for e in events) and events[-1] == Finished("stop")
    calls = next(e for e in collect(llm_server, via) if isinstance(e, ToolCallsReady)).calls
    assert calls[0].function.arguments == args  # 7-character pieces, joined once
    # litellm's guard against a model repeating itself still sees the chunks it needs
    monkeypatch.setattr(load_litellm(), "REPEATED_STREAMING_CHUNK_LIMIT", 20)
    err = failure(llm_server, via)
    assert "same piece of text over and over" in err.message


def test_a_runaway_answer_is_cut_at_the_limit_with_a_sentence(
        via: str, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.llm import answer

    monkeypatch.setattr(answer, "MAX_ANSWER_CHARS", 50_000)
    llm_server.script(Answer(chunks=["x" * 1000] * 200))
    events: list[StreamEvent] = []

    async def run() -> None:
        request = LLMRequest(model=MODEL, api_base=llm_server.url,
                             messages=[{"role": "user", "content": "hi"}])
        async for ev in TRANSPORTS[via]().stream(request):
            events.append(ev)

    with pytest.raises(LLMError) as info:
        asyncio.run(run())
    assert info.value.type == "max_tokens" and "stopped at 50,000 characters" in info.value.message
    assert sum(len(e.text) for e in events if isinstance(e, TextDelta)) == 51_000  # kept


def test_a_stream_refused_with_an_empty_200_is_asked_again_unstreamed(
        via: str, llm_server: FakeLLMServer) -> None:
    # llama-cpp-python cannot stream tool choice: an empty 200. The same request not streamed
    # is answered, and its calls arrive as a stream's would.
    llm_server.no_streamed_tools = True
    llm_server.script(ToolCalls([("call_a", "read_file", '{"path": "a.py"}')]))
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}}}}]
    events = collect(llm_server, via, tools=tools)
    ready = [e for e in events if isinstance(e, ToolCallsReady)][0]
    assert [(c.id, c.function.name, c.function.arguments) for c in ready.calls] == [
        ("call_a", "read_file", '{"path": "a.py"}')]
    assert events[-1] == Finished("tool_calls")
    assert [bool(r.body.get("stream")) for r in llm_server.requests] == [True, False]


def test_an_empty_stream_over_the_servers_context_is_an_overflow_with_its_limit(
        via: str, llm_server: FakeLLMServer) -> None:
    llm_server.n_ctx = 50
    err = failure(llm_server, via, messages=[{"role": "user", "content": "word " * 200}])
    assert isinstance(err, ContextOverflow) and err.limit == 50
    assert [bool(r.body.get("stream")) for r in llm_server.requests] == [True, False]


@pytest.mark.parametrize("provider_usage", [True, False], ids=["usage sent", "llama.cpp: none"])
def test_the_streamed_answer_is_assembled_once_and_its_usage_still_arrives(
        via: str, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch,
        provider_usage: bool) -> None:
    # litellm assembles the whole answer from its chunks to hand on the usage, then did it once
    # more before it ended the stream: a tenth of a second of Python (on two cores, taken from
    # the window) for an answer of forty tool calls. Once the usage is in, the stream is closed.
    from core.llm.runtime import load_litellm

    litellm = load_litellm()
    built: list[int] = []
    builder = litellm.stream_chunk_builder

    def counting(*args: Any, **kwargs: Any) -> object:  # litellm's own, unannotated
        built.append(len(kwargs.get("chunks") or args[0]))
        return builder(*args, **kwargs)

    monkeypatch.setattr(litellm, "stream_chunk_builder", counting)
    llm_server.stream_usage = provider_usage
    calls = [(f"c{n}", "read_file", json.dumps({"path": f"f{n}.txt"})) for n in range(40)]
    llm_server.script(ToolCalls(calls, usage=(321, 40)) if provider_usage else ToolCalls(calls),
                      Answer("Read them all.", usage=(400, 4)))
    events = collect(llm_server, via)
    ready = next(e for e in events if isinstance(e, ToolCallsReady))
    assert [c.id for c in ready.calls] == [c[0] for c in calls]
    assert events[-1] == Finished("tool_calls")
    usage = [e for e in events if isinstance(e, Usage)]
    assert usage and usage[-1].reported is provider_usage
    assert usage[-1].prompt_tokens == 321 if provider_usage else usage[-1].prompt_tokens > 0
    once = 1 if via == "litellm" else 0  # the SDK's path assembles nothing but ours
    assert len(built) == once
    # the connection was given back: the next answer on the same client arrives whole
    text = "".join(e.text for e in collect(llm_server, via) if isinstance(e, TextDelta))
    assert text == "Read them all." and len(built) == 2 * once


def test_stop_mid_answer_ends_the_stream_and_lets_go_of_the_connection(
        via: str, llm_server: FakeLLMServer) -> None:
    # Stop cancels the task reading the stream: the cancellation comes out at once, the
    # connection is closed under the server (its next chunk finds nobody), and the next request
    # on the same loop is answered whole.
    llm_server.script(Answer("word " * 400, chunks=["word "] * 400, delay=0.02),
                      Answer("after the stop"))
    request = LLMRequest(model=MODEL, api_base=llm_server.url,
                         messages=[{"role": "user", "content": "talk"}])

    async def run() -> str:
        seen: list[str] = []

        async def consume() -> None:
            async for ev in TRANSPORTS[via]().stream(request):
                if isinstance(ev, TextDelta):
                    seen.append(ev.text)

        task = asyncio.create_task(consume())
        while len(seen) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 20)
        assert await asyncio.to_thread(llm_server.left.wait, 20)
        return "".join([ev.text async for ev in TRANSPORTS[via]().stream(request)
                        if isinstance(ev, TextDelta)])

    assert asyncio.run(run()) == "after the stop"
