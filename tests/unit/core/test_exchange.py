"""The exchange's seam: it works with what `ExchangeHost` names, not with an engine."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.context.builder import BuiltRequest
from core.context.service import ProjectContext
from core.engine import Engine
from core.exchange import Exchange, ExchangeHost
from core.llm.adapter import LLMClient
from core.model import ConversationMessage
from core.settings import LLMSettings
from core.store.project import Project
from core.turn_events import DEFAULT_TURN, EngineEvent, TurnFinished
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer


@dataclass
class Host:
    """Only what an exchange uses, no engine."""

    context: ProjectContext
    client: LLMClient = field(default_factory=LLMClient)
    requests_dir: Path | None = None
    retry_delays: tuple[float, ...] = ()
    sent: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    saved: dict[str, tuple[Path, BuiltRequest]] = field(default_factory=dict)


def test_an_exchange_needs_only_its_host(project: Project, llm_server: FakeLLMServer) -> None:
    context = ProjectContext(project.conversations)
    host = Host(context, requests_dir=project.state / "requests")
    engine: ExchangeHost = Engine(context)  # the engine is one host (mypy checks it)
    assert engine.context is context
    conv = project.conversations.create().id
    context.writer.write(conv, [ConversationMessage(role="user", content="Capital of France?")],
                         "your message")
    llm_server.script(Answer("Paris."))
    settings = LLMSettings(model=MODEL, api_base=llm_server.url, max_output_tokens=64)

    async def go() -> list[EngineEvent]:
        history = project.conversations.load(conv).messages
        built = context.build(conv, history, settings, "chat")
        return [e async for e in Exchange(host, conv, settings, DEFAULT_TURN, history,
                                          built).run()]

    events = asyncio.run(go())
    finished = events[-1]
    assert isinstance(finished, TurnFinished) and finished.status == "ok"
    assert project.conversations.load(conv).messages[-1].text() == "Paris."
    # what the host holds for the next request: what was sent, and the copy saved
    assert host.sent[conv][-1] == {"role": "user", "content": "Capital of France?"}
    path, request = host.saved[conv]
    assert path.parent == project.state / "requests" / conv and request.messages == host.sent[conv]
