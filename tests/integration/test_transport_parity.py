"""One behaviour, two paths: every request the engine makes (chat, tools, an image, a continued
answer, each mode; a server without usage; an empty streamed 200) is sent through both
transports, litellm's and the openai SDK's, to the loopback server. What reaches the wire is the
same body (field order aside), and what comes back is the same events."""

from __future__ import annotations

import asyncio
import json
import struct
import zlib
from collections.abc import AsyncIterator
from dataclasses import asdict, replace
from typing import Any

import pytest

from core.attachments import AttachmentStore, attach_bytes
from core.engine import Engine, TurnFinished, TurnOptions
from core.factory import build_engine
from core.llm import compat
from core.llm.adapter import LLMClient, LLMRequest, StreamEvent, Usage
from core.llm.tokens import TokenCounter
from core.llm.via_litellm import LitellmTransport
from core.llm.via_openai import OpenAITransport
from core.model import continuable
from core.settings import LLMSettings
from core.store.project import Project
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, Reply, ToolCalls

CHAT = TurnOptions()


class BothPaths(LLMClient):
    """Sends each request the engine makes through litellm, then through the SDK; the engine
    goes on with litellm's events. `runs`: per request, each path's wire bodies and events.
    The loopback server is spoken to as OpenAI's own API is (core.llm.compat's HOSTED profile,
    nothing learned): what a local server needs is tested in test_local_compat.py."""

    def __init__(self, server: FakeLLMServer) -> None:
        self.server = server
        self.runs: list[list[tuple[list[dict[str, Any]], list[StreamEvent]]]] = []

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        paths = []
        for transport in (LitellmTransport(), OpenAITransport()):
            compat.seed(request.api_base or "", request.model, asdict(compat.HOSTED))
            before = len(self.server.requests)
            events = [event async for event in transport.stream(request)]
            paths.append(([r.body for r in self.server.requests[before:]], events))
        self.runs.append(paths)
        for event in paths[0][1]:
            yield event


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\x10\x80\xf0" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2,
                                                                0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def same_usage(event: StreamEvent) -> StreamEvent:
    """The event, its usage's detail fields aside (litellm adds figures of its own to what the
    provider sent, such as text_tokens; `within` checks the provider's are all there)."""
    return replace(event, raw={}) if isinstance(event, Usage) else event


def within(sent: Any, got: Any) -> bool:
    """Whether every field of `sent` is in `got` with the same value."""
    if isinstance(sent, dict):
        return isinstance(got, dict) and all(k in got and within(v, got[k])
                                             for k, v in sent.items())
    return bool(sent == got)


def twice(server: FakeLLMServer, *replies: Reply) -> None:
    """Each reply once for each path."""
    for reply in replies:
        server.script(reply, reply)


def turn(engine: Engine, conv_id: str, text: str | None, settings: LLMSettings,
         options: TurnOptions = CHAT, **kwargs: Any) -> TurnFinished:
    async def go() -> list[Any]:
        if text is None:
            return [ev async for ev in engine.continue_(conv_id, settings, options)]
        return [ev async for ev in engine.send(conv_id, text, settings, options, **kwargs)]

    events = asyncio.run(go())
    assert isinstance(events[-1], TurnFinished), events[-1]
    return events[-1]


def test_both_transports_send_the_same_bodies_and_give_the_same_events(
        project: Project, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_AUTO_TITLE", "0")
    monkeypatch.setenv("WORKBENCH_SANDBOX", "none")
    (project.root / "notes.txt").write_text("the notes\n", encoding="utf-8")
    client = BothPaths(llm_server)
    engine = build_engine(project, client=client)
    settings = LLMSettings(model=MODEL, api_base=llm_server.url, max_output_tokens=256,
                           images=True)
    conv = project.conversations.create().id

    twice(llm_server, Answer("Hello there, friend.", usage=(20, 5), cached=8))
    assert turn(engine, conv, "hello", settings).status == "ok"
    twice(llm_server, Answer("A picture of blue.", usage=(120, 6)))
    store = AttachmentStore.of(project.root / ".workbench")
    image = attach_bytes(png(40, 30), "pic.png", store, TokenCounter("o200k_base"))
    assert turn(engine, conv, "what is this?", settings, attachments=[image]).status == "ok"
    twice(llm_server, ToolCalls([("c1", "read_file", json.dumps({"path": "notes.txt"}))],
                                text="Reading.", usage=(300, 20)),
          Answer("The notes say hi.", usage=(340, 7)))
    agent = TurnOptions(mode="agent", approve="always")
    assert turn(engine, conv, "read notes.txt", settings, agent).status == "ok"
    twice(llm_server, Answer("The first half", finish_reason="length", usage=(400, 256)),
          Answer(" and the second.", usage=(420, 5)))
    assert continuable(turn(engine, conv, "write a long one", settings).message)  # cut
    assert turn(engine, conv, None, settings).status == "ok"  # Continue
    llm_server.stream_usage = False  # llama.cpp's server: no usage, ours estimated alike
    twice(llm_server, Answer("No usage from me."))
    assert turn(engine, conv, "and now?", settings, TurnOptions(mode="run")).status == "ok"
    llm_server.no_streamed_tools = True  # an empty streamed 200, then asked unstreamed
    twice(llm_server, ToolCalls([("c2", "read_file", json.dumps({"path": "notes.txt"}))]),
          Answer("Read again."))
    assert turn(engine, conv, "once more", settings, agent).status == "ok"

    assert len(client.runs) == 9
    usage = [e for run in client.runs for e in run[1][1] if isinstance(e, Usage)]
    assert usage[0].raw["prompt_tokens_details"] == {"cached_tokens": 8}
    for path in client.runs[6]:  # the server that sent none: ours, said to be an estimate
        assert [e.reported for e in path[1] if isinstance(e, Usage)] == [False]
    for (litellm_bodies, litellm_events), (sdk_bodies, sdk_events) in client.runs:
        assert sdk_bodies == litellm_bodies  # dicts: field order aside
        assert [same_usage(e) for e in sdk_events] == [same_usage(e) for e in litellm_events]
        for sdk, ours in zip(sdk_events, litellm_events, strict=True):
            if isinstance(sdk, Usage) and isinstance(ours, Usage):
                assert within(sdk.raw, ours.raw)
    bodies = [body for run in client.runs for body in run[0][0]]
    assert any(isinstance(m.get("content"), list) and any(
        p.get("type") == "image_url" for p in m["content"])
        for m in bodies[1]["messages"])  # the image went
    assert all(body["stream_options"] == {"include_usage": True} for body in bodies
               if body.get("stream"))
    assert [bool(b.get("stream")) for b in client.runs[-2][1][0]] == [True, False]


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "openai/o3-mini", "openai/gpt-5-mini",
                                   "openai/llama-3.1-8b-instruct"])
def test_each_kind_of_openai_model_gets_the_same_body_both_ways(
        llm_server: FakeLLMServer, model: str) -> None:
    # OpenAI's reasoning models take the output limit as max_completion_tokens: both paths
    # name it so, for those models only.
    request = LLMRequest(model=model, api_base=llm_server.url, max_tokens=64, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])

    async def both() -> list[list[StreamEvent]]:
        return [[e async for e in transport.stream(request)]
                for transport in (LitellmTransport(), OpenAITransport())]

    twice(llm_server, Answer("Hello.", usage=(12, 2)))
    litellm_events, sdk_events = asyncio.run(both())
    assert [same_usage(e) for e in sdk_events] == [same_usage(e) for e in litellm_events]
    assert within(sdk_events[-2].raw, litellm_events[-2].raw)  # type: ignore[union-attr]
    litellm_body, sdk_body = (r.body for r in llm_server.requests)
    assert sdk_body == litellm_body
