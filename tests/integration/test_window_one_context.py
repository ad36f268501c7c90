"""The window's meter and the engine build with the project's one context: what the meter
counts is what is sent, and its builds between turns never change the next request.
Real window, real engine thread, real loopback server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.window.controller import Controller
from core.context.report_text import identical_lead
from core.llm.runtime import load_litellm
from core.llm.tokens import TokenCounter
from core.store.project import Project
from tests.helpers.fake_llm import Answer, FakeLLMServer, HttpError
from tests.helpers.gui import open_window, run_until, type_and_send, use_fake_provider
from tests.helpers.trajectories import make_agent_session
from ui.main_window import MainWindow

pytestmark = pytest.mark.gui

REFUSAL = HttpError(400, "this model does not support tools", type="invalid_request_error")


def long_session(path: Path, rounds: int) -> str:
    counter = TokenCounter("o200k_base")
    with Project.open(path) as p:
        conv = p.conversations.create("long session")
        p.conversations.append_many(conv.id, [counter.with_count(m)
                                              for m in make_agent_session(rounds, seed=3)])
        return conv.id


def agent_window(qtbot: QtBot, project: Path) -> tuple[MainWindow, Controller]:
    load_litellm()  # the meter waits for the model library
    window, controller = open_window(qtbot, project)
    qtbot.mouseClick(window.mode_switcher.buttons["agent"], Qt.MouseButton.LeftButton)
    return window, controller


def plain(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The wire form: no "content": null (litellm leaves it out), and a tool-call message's
    empty content the same whether left out or "" (a local server's profile sends "")."""
    return [{k: v for k, v in m.items() if v is not None
             and not (k == "content" and v == "" and m.get("tool_calls"))} for m in messages]


def meter_settled(controller: Controller, log_length: int) -> Callable[[], bool]:
    """The meter has built the request for the log as it now stands."""
    def settled() -> bool:
        built = controller.meter.built
        return not controller.busy() and built is not None and \
            sum(built.report.decision_counts().values()) >= log_length
    return settled


def test_once_the_server_refuses_tools_the_meter_counts_none(qtbot: QtBot,
                                                             qloop: asyncio.AbstractEventLoop,
                                                             project_dir: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             llm_server: FakeLLMServer) -> None:
    use_fake_provider(monkeypatch, llm_server)
    llm_server.script(REFUSAL, Answer("A plain answer."))
    window, controller = agent_window(qtbot, project_dir)
    run_until(qloop, lambda: controller.meter.built is not None)
    assert controller.meter.built is not None and controller.meter.built.tools  # offered
    type_and_send(qtbot, window, "hello")
    run_until(qloop, lambda: not controller.busy())
    assert "tools" not in llm_server.requests[-1].body  # the engine went on without them
    conv = controller.current_id
    assert conv is not None
    assert controller.project is not None
    log = controller.project.conversations.load(conv).messages
    run_until(qloop, meter_settled(controller, len(log)))
    built = controller.meter.built
    assert built is not None and built.tools == [] and built.report.totals["tools"] == 0
    # ... and the next request is what the meter shows: no tools there either
    llm_server.script(Answer("Still plain."))
    type_and_send(qtbot, window, "again")
    run_until(qloop, lambda: not controller.busy() and len(llm_server.requests) == 3)
    assert "tools" not in llm_server.requests[-1].body


@pytest.mark.parametrize("refused", [False, True], ids=["tools", "tools refused"])
def test_meter_builds_between_turns_keep_the_next_requests_prefix(qtbot: QtBot,
                                                                  qloop: asyncio.AbstractEventLoop,
                                                                  project_dir: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  llm_server: FakeLLMServer,
                                                                  refused: bool) -> None:
    # Past the compaction trigger, a request that repeats the previous one as its prefix is
    # what a provider's prompt cache (a local server's KV cache) can reuse.
    conv = long_session(project_dir, rounds=30)
    # (no background summary: this is about the no-LLM stages' kept compaction)
    use_fake_provider(monkeypatch, llm_server, context_window="12000", auto_summary="off")
    llm_server.script(*([REFUSAL] if refused else []), Answer("First answer."),
                      Answer("Second answer."))
    window, controller = agent_window(qtbot, project_dir)
    assert controller.current_id == conv
    run_until(qloop, lambda: controller.meter.built is not None)
    type_and_send(qtbot, window, "Go on with the next file.")
    assert controller.project is not None
    log = controller.project.conversations.load(conv).messages
    run_until(qloop, meter_settled(controller, len(log) + 1))  # the answer is in, and counted
    shown = controller.meter.built
    assert shown is not None
    assert any(s["name"] == "key messages" or s["name"] == "reused"
               for s in shown.report.stages)  # compacted: past the trigger
    type_and_send(qtbot, window, "And the one after.")
    run_until(qloop, lambda: not controller.busy() and
              len(llm_server.requests) == (3 if refused else 2))
    first = llm_server.requests[-2].body["messages"]
    second = llm_server.requests[-1].body["messages"]
    assert identical_lead(first, second) == len(first)  # the whole first request, reused
    assert plain(second[:len(shown.messages)]) == plain(shown.messages)  # the meter's, sent
