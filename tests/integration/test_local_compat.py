"""What a local server needs (core.llm.compat), against the loopback server behaving as
llama-cpp-python's does (FakeLLMServer.llama_cpp_python): the agent's tool round completes, two
requests at once are both answered whole, a 500 repeated word for word is retried twice at
most; OpenAI's own API gets the body it always got."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from core.context.calibration import Calibration
from core.context.server_window import PROBE_MARK, count_prompt
from core.context.service import ProjectContext
from core.engine import Engine, TurnFinished, TurnOptions
from core.factory import build_engine
from core.llm import compat
from core.llm.adapter import LLMClient, LLMRequest, TextDelta
from core.llm.via_openai import request_body
from core.settings import LLMSettings
from core.store.project import Project
from tests.helpers.fake_llm import (
    MODEL,
    Answer,
    FakeLLMServer,
    HttpError,
    ToolCalls,
    summary_text,
)

DEADLINE_S = 30.0
AGENT = TurnOptions(mode="agent")
TOOL = {"type": "function", "function": {"name": "read_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}}}}
CALL_MESSAGE = {"role": "assistant", "content": None, "tool_calls": [{
    "id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]}


def settings(server: FakeLLMServer, auto_retries: int = 0) -> LLMSettings:
    return LLMSettings(model=MODEL, api_base=server.url, max_output_tokens=256,
                       auto_retries=auto_retries)


def agent_turn(engine: Engine, conv_id: str, text: str, how: LLMSettings) -> TurnFinished:
    async def go() -> list[Any]:
        return [ev async for ev in engine.send(conv_id, text, how, AGENT)]

    events = asyncio.run(asyncio.wait_for(go(), DEADLINE_S))
    assert isinstance(events[-1], TurnFinished), events[-1]
    return events[-1]


def test_openai_s_own_api_gets_the_body_it_always_got() -> None:
    request = LLMRequest(model="gpt-4o-mini", max_tokens=100, tools=[TOOL], messages=[
        {"role": "user", "content": "read it"}, CALL_MESSAGE,
        {"role": "tool", "tool_call_id": "c1", "content": "text"}])
    assert compat.profile(None, "gpt-4o-mini") == compat.HOSTED
    assert compat.profile("https://api.openai.com/v1", "gpt-4o-mini") == compat.HOSTED
    assert request_body(request, compat.profile(None, request.model)) == {
        "model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True},
        "max_tokens": 100, "tools": [TOOL], "messages": [
            {"role": "user", "content": "read it"},
            {"role": "assistant", "tool_calls": CALL_MESSAGE["tool_calls"]},  # no content
            {"role": "tool", "tool_call_id": "c1", "content": "text"}]}
    local = request_body(request, compat.profile("http://127.0.0.1:8080/v1", "gpt-4o-mini"))
    assert local["tool_choice"] == "auto" and local["messages"][1]["content"] == ""


def test_an_agent_tool_round_completes_on_llama_cpp_python(
        project: Project, llm_server: FakeLLMServer, tmp_path: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_AUTO_TITLE", "0")
    monkeypatch.setenv("WORKBENCH_SANDBOX", "none")
    (project.root / "notes.txt").write_text("the first line\n", encoding="utf-8")
    llm_server.llama_cpp_python = True
    calibration = Calibration(tmp_path / "calibration.json")
    engine = build_engine(project, ProjectContext(project.conversations,
                                                  calibration=calibration, offer_tools=True))
    conv = project.conversations.create().id
    llm_server.script(ToolCalls([("c1", "read_file", json.dumps({"path": "notes.txt"}))]),
                      Answer("It says: the first line"), Answer("Still: the first line"))

    assert agent_turn(engine, conv, "Read notes.txt", settings(llm_server)).status == "ok"
    assert project.conversations.load(conv).messages[-1].text() == "It says: the first line"
    first, whole, follow_up = (r.body for r in llm_server.requests)
    assert first["stream"] and first["tool_choice"] == "auto"  # the tools are seen
    assert "stream" not in whole  # refused streamed (an empty 200): asked whole
    # the follow-up is asked whole at once, its tool-call message with content ""
    assert "stream" not in follow_up
    assert [m.get("content") for m in follow_up["messages"] if m.get("tool_calls")] == [""]
    # what the server showed is kept beside its window: the next process asks whole at once
    kept = calibration.profile(llm_server.url, MODEL)
    assert kept is not None and kept["streams_tools"] == 0.0
    compat.forget_all()
    engine = build_engine(project, ProjectContext(
        project.conversations, calibration=Calibration(tmp_path / "calibration.json"),
        offer_tools=True))
    assert agent_turn(engine, conv, "Again", settings(llm_server)).status == "ok"
    assert "stream" not in llm_server.requests[-1].body and len(llm_server.requests) == 4


def test_a_500_repeated_word_for_word_is_retried_twice_at_most(
        project: Project, llm_server: FakeLLMServer) -> None:
    llm_server.script(*[HttpError(500, "'dict object' has no attribute 'content'")] * 4)
    engine = Engine(ProjectContext(project.conversations), retry_delays=(0.01, 0.01, 0.01))
    conv = project.conversations.create().id

    async def go() -> list[Any]:
        return [ev async for ev in engine.send(conv, "hi", settings(llm_server, 3))]

    assert asyncio.run(asyncio.wait_for(go(), DEADLINE_S))[-1].status == "error"
    assert len(llm_server.requests) == 3  # 1 + 2 retries, not 1 + 3


def test_two_requests_at_once_are_both_answered_whole(llm_server: FakeLLMServer) -> None:
    """A title asked while the answer streams, and a count from another thread: each waits
    its turn behind the answer; the server (which ends a running stream when a new request
    arrives) cuts nothing."""
    llm_server.llama_cpp_python = True
    long = "word " * 60
    llm_server.script(Answer(long, delay=0.005), Answer("A title"))
    client = LLMClient()

    def request(text: str) -> LLMRequest:
        return LLMRequest(model=MODEL, api_base=llm_server.url, max_tokens=100,
                          messages=[{"role": "user", "content": text}])

    async def read(text: str, started: asyncio.Event | None = None) -> str:
        got = []
        async for event in client.stream(request(text)):
            if isinstance(event, TextDelta):
                got.append(event.text)
                if started is not None:
                    started.set()
        return "".join(got)

    counted: list[int | None] = []

    async def both() -> tuple[str, str]:
        started = asyncio.Event()
        answer = asyncio.create_task(read("tell me a story", started))
        await started.wait()
        title = asyncio.create_task(read("a title, please"))
        counter = threading.Thread(target=lambda: counted.append(count_prompt(
            llm_server.url, MODEL, [{"role": "user", "content": f"{PROBE_MARK} count me"}])))
        counter.start()
        result = await answer, await title
        await asyncio.to_thread(counter.join, DEADLINE_S)
        return result

    story, title = asyncio.run(asyncio.wait_for(both(), DEADLINE_S))
    assert story == long and title == "A title" and llm_server.cut_streams == 0
    assert counted and counted[0]  # the count, too, was answered after its wait
    story_done = llm_server.requests[0].arrived
    assert llm_server.requests[1].arrived >= story_done  # the title asked after


def test_the_loopback_llama_cpp_python_ends_a_running_stream(
        llm_server: FakeLLMServer) -> None:
    """What the queue prevents: spoken to as a hosted API (no queue), the second request ends
    the first's stream, as the real server does."""
    llm_server.llama_cpp_python = True
    compat.seed(llm_server.url, MODEL, {"one_at_a_time": False})
    llm_server.script(Answer("word " * 200, delay=0.005), Answer("A title"))
    client = LLMClient()

    async def read(text: str, started: asyncio.Event | None = None) -> str:
        got = []
        try:
            async for event in client.stream(LLMRequest(
                    model=MODEL, api_base=llm_server.url,
                    messages=[{"role": "user", "content": text}])):
                if isinstance(event, TextDelta):
                    got.append(event.text)
                    if started is not None:
                        started.set()
        except Exception:  # the cut stream
            return "cut: " + "".join(got)
        return "".join(got)

    async def both() -> tuple[str, str]:
        started = asyncio.Event()
        answer = asyncio.create_task(read("tell me a story", started))
        await started.wait()
        return await read("a title"), await answer

    title, story = asyncio.run(asyncio.wait_for(both(), DEADLINE_S))
    assert title == "A title" and story.startswith("cut: ") and llm_server.cut_streams == 1


def test_a_compact_during_a_send_cuts_neither_the_real_llm_scenario(
        llm_server: FakeLLMServer, tmp_path: Any) -> None:
    """`make real-llm`'s scenario (tests/real/scenarios.py), against the loopback server."""
    from tests.real.scenarios import send_and_compact

    llm_server.llama_cpp_python = True
    story = "Once upon a time " * 30
    llm_server.script(Answer(story, delay=0.005), Answer(summary_text("the notes")))
    done = send_and_compact(tmp_path / "p", MODEL, llm_server.url)
    assert (done.send_status, done.send_error, done.answer) == ("ok", "", story)
    assert done.compact_status == "ok", done.compact_message
    assert llm_server.cut_streams == 0


def test_the_window_count_waits_behind_a_running_answer(llm_server: FakeLLMServer) -> None:
    """The count that learns a silent server's window (core.context.server_window
    .count_window), asked from another thread while an answer streams: it waits its turn, cuts
    nothing, and its refusal names the window."""
    from core.context.server_window import count_window

    llm_server.llama_cpp_python, llm_server.n_ctx = True, 2048
    long = "word " * 60
    llm_server.script(Answer(long, delay=0.005))
    found: list[Any] = []

    async def both() -> str:
        got: list[str] = []
        started = asyncio.Event()
        counter = threading.Thread(target=lambda: found.append(count_window(llm_server.url,
                                                                            MODEL)))
        async for event in LLMClient().stream(LLMRequest(
                model=MODEL, api_base=llm_server.url, max_tokens=100,
                messages=[{"role": "user", "content": "tell me a story"}])):
            if isinstance(event, TextDelta):
                got.append(event.text)
                if not started.is_set():
                    started.set()
                    counter.start()
        await asyncio.to_thread(counter.join, DEADLINE_S)
        return "".join(got)

    assert asyncio.run(asyncio.wait_for(both(), DEADLINE_S)) == long
    assert llm_server.cut_streams == 0 and llm_server.probes == ["count:window"]
    assert [(f.window, f.took) for f in found] == [(2048, None)]


@pytest.mark.parametrize("refusal", ["empty", "hang-up", "reset", "dead-keep-alive"])
def test_a_streamed_tool_round_refused_by_a_dropped_connection_is_asked_whole(
        llm_server: FakeLLMServer, refusal: str) -> None:
    """llama-cpp-python refuses a streamed tool round ("Automatic streaming tool choice is not
    supported") inside its event stream: its client sees an empty 200, the connection closed
    with nothing sent or reset, or an empty 200 on a connection kept open whose next request
    it drops unread, as the race goes. Every agent turn of `make real-llm` failed so with
    "Could not reach the provider": each is the same refusal, asked whole (on a connection
    of its own: a local server's stream leaves its connection closed)."""
    from core.llm.adapter import ToolCallsReady

    llm_server.llama_cpp_python, llm_server.streamed_refusal = True, refusal
    llm_server.script(ToolCalls([("c1", "read_file", json.dumps({"path": "notes.txt"}))]))
    request = LLMRequest(model=MODEL, api_base=llm_server.url, max_tokens=100, tools=[TOOL],
                         messages=[{"role": "user", "content": "Read notes.txt"}])

    async def go() -> list[Any]:
        return [event async for event in LLMClient().stream(request)]

    events = asyncio.run(asyncio.wait_for(go(), DEADLINE_S))
    ready = [e for e in events if isinstance(e, ToolCallsReady)]
    assert ready and ready[0].calls[0].function.name == "read_file"
    assert ["stream" in r.body for r in llm_server.requests] == [True, False]
    assert not compat.profile(llm_server.url, MODEL).streams_tools  # whole from now on
