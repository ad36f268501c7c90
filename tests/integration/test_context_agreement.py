"""The meter, `workbench context` and the request actually sent come from one context service:
they agree, including on a conversation's own context window."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.cli.main import main
from core.llm.runtime import load_litellm
from core.model import ConversationMessage
from core.store.project import Project
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer
from tests.helpers.gui import open_window, run_until
from tests.helpers.trajectories import make_conversation

pytestmark = pytest.mark.gui


def test_meter_cli_and_the_sent_request_agree(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                              capsys: pytest.CaptureFixture[str], project_dir: Path,
                                              llm_server: FakeLLMServer,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    load_litellm()  # the meter waits for the model library
    monkeypatch.setenv("WORKBENCH_MODEL", MODEL)
    monkeypatch.setenv("WORKBENCH_API_BASE", llm_server.url)
    with Project.open(project_dir) as p:
        conv = p.conversations.create("long")
        raw = make_conversation(60, seed=5, tool_output_chars=600)
        p.conversations.append_many(conv.id, [ConversationMessage.from_openai(m) for m in raw])
        p.conversations.append(conv.id, ConversationMessage(role="user", content="and now?"))
        p.conversations.update_meta(conv.id, context_window=6000)  # this conversation's own

    assert main(["context", str(project_dir), "-c", conv.id, "--json"]) == 0
    cli_view = json.loads(capsys.readouterr().out)

    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv.id)
    meter = controller.meter.report
    assert meter is not None and meter.window == 6000 == cli_view["report"]["window"]
    assert meter.used == cli_view["report"]["used"]
    kept = [e.id for e in meter.entries if e.decision == "kept"]
    assert kept == [e["id"] for e in cli_view["report"]["entries"] if e["decision"] == "kept"]
    assert 0 < len(kept) < len(raw)  # the window really cut the history

    llm_server.script(Answer("fine"))
    assert controller.engine is not None
    controller.turns._start(controller.engine.respond(conv.id, controller.llm_settings()))
    run_until(qloop, lambda: not controller.busy())
    def plain(messages: list[dict[str, Any]]  # litellm leaves out "content": null
              ) -> list[dict[str, Any]]:
        # (and a local server's tool-call message carries "": core.llm.compat)
        return [{k: v for k, v in m.items() if v is not None
                 and not (k == "content" and v == "" and m.get("tool_calls"))}
                for m in messages]

    assert plain(llm_server.requests[0].body["messages"]) == plain(cli_view["messages"])
