"""Every failure cause, end to end: on disk with its partial text, the right actions on screen,
Continue (where it applies) resumes from the partial text, and nothing stored before changes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from core.llm.runtime import load_litellm
from core.store.project import Project
from tests.helpers.fake_llm import MODEL, Answer, Cut, FakeLLMServer, Hang, HttpError, Reply
from tests.helpers.gui import open_window, run_until
from tests.helpers.present import present
from tests.integration.test_window import type_and_send

pytestmark = pytest.mark.gui

CASES: dict[str, tuple[Reply, str, list[str]]] = {
    # cause: (scripted failure, partial text shown, expected actions)
    # With no text, continuing is Retry under another name: only Retry is offered.
    "provider_error": (HttpError(500, "boom"), "", ["retry"]),
    "rate_limited": (HttpError(429, "slow", headers={"Retry-After": "1"}), "", ["retry"]),
    "stream_interrupted": (Cut("Half of the ans"), "Half of the ans", ["continue", "retry"]),
    "max_tokens": (Answer("Cut by the lim", finish_reason="length"), "Cut by the lim",
                   ["continue", "retry"]),
    "auth": (HttpError(401, "bad key"), "", ["retry", "settings"]),
    "unknown_model": (HttpError(404, "no such model", code="model_not_found"), "",
                      ["retry", "settings"]),
    "timeout": (Hang(3), "", ["retry"]),
}


@pytest.fixture(autouse=True)
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    load_litellm()
    monkeypatch.setenv("WORKBENCH_MODEL", MODEL)
    monkeypatch.setenv("WORKBENCH_API_BASE", llm_server.url)
    return llm_server


@pytest.mark.parametrize("cause", list(CASES))
def test_each_failure_is_kept_shown_and_resumable(
    cause: str, qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
    llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    failure, partial, actions = CASES[cause]
    window, controller = open_window(qtbot, project_dir)
    if cause == "timeout":
        monkeypatch.setenv("WORKBENCH_REQUEST_TIMEOUT", "0.5")  # the server says nothing for 3 s
    llm_server.script(Answer("A fine first answer."))
    type_and_send(qtbot, window, "first question")
    run_until(qloop, lambda: not controller.busy())
    assert controller.current_id is not None
    log_file = project_dir / ".workbench" / "conversations" / controller.current_id / "messages.jsonl"
    before = log_file.read_bytes()

    llm_server.script(failure)
    type_and_send(qtbot, window, "second question")
    run_until(qloop, lambda: not controller.busy())
    assert log_file.read_bytes().startswith(before)  # nothing stored before changed
    with Project.open(project_dir, read_only=True) as p:
        entry = p.conversations.load(present(controller.current_id)).messages[-1]
    assert entry.error is not None
    assert entry.kind == "error" and entry.error.type == cause
    assert entry.text() == partial and entry.error.message and "Traceback" not in entry.error.message
    row = window.transcript_model.rows()[-1]
    lay = window.transcript.delegate.layout(row, 800, window.transcript.font())
    assert [a for a, _ in lay.actions] == actions

    if "continue" in actions:
        llm_server.script(Answer("…and the rest."))
        window.transcript.action_requested.emit(len(window.transcript_model.rows()) - 1,
                                                "continue")
        run_until(qloop, lambda: not controller.busy())
        sent = llm_server.requests[-1].body["messages"]
        assert sent[-2]["content"].startswith(partial)
        assert "[unfinished: " in sent[-2]["content"] and "Continue" not in sent[-2]["content"]
        assert window.transcript_model.rows()[-1].text == partial + "…and the rest."
    else:
        llm_server.script(Answer("Retried fine."))
        window.transcript.action_requested.emit(len(window.transcript_model.rows()) - 1, "retry")
        run_until(qloop, lambda: not controller.busy())
        assert window.transcript_model.rows()[-1].text == "Retried fine."
    assert log_file.read_bytes().startswith(before)


def test_a_streamed_overflow_answered_with_an_empty_200_is_read_and_the_window_learned(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer) -> None:
    # llama-cpp-python's server with --n_ctx 2048: a streamed request over its context gets
    # HTTP 200 and an empty body, no window on /v1/models, no usage in streams. The request is
    # asked once without streaming (the standard 400 states the limit), rebuilt within it and
    # answered; the next turn is built within the learned window from the start. (The count
    # that learns a window before the first turn took it while the server ran larger: it was
    # restarted with 2,048 since.)
    from app.cli.main import main
    from tests.helpers.trajectories import make_conversation

    def cli(*args: object) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    raw = make_conversation(40, seed=3, tool_output_chars=600)
    src = project_dir.parent / "long.json"
    project_dir.mkdir(parents=True, exist_ok=True)
    src.write_text(json.dumps({"messages": raw}))
    code, out, err = cli("import", project_dir, src)
    assert code == 0, err
    conv = out.strip().splitlines()[-1]
    code, out, err = cli("context", project_dir, "-c", conv, "--model", MODEL, "--api-base",
                         llm_server.url)
    assert code == 0 and "took a count of" in out, out
    llm_server.n_ctx = 2048
    llm_server.stream_usage = False
    llm_server.script(Answer("Here is what you asked first."))
    code, out, err = cli("send", project_dir, "-c", conv, "--model", MODEL, "--api-base",
                         llm_server.url, "What did I ask first?")
    assert code == 0 and out == "Here is what you asked first.\n", err
    streamed = [bool(r.body.get("stream")) for r in llm_server.requests]
    assert streamed == [True, False, True]  # refused (empty), read (400), rebuilt and answered
    assert llm_server.requests[2].body["messages"] != llm_server.requests[0].body["messages"]
    code, out, err = cli("context", project_dir, "-c", conv, "--model", MODEL, "--api-base",
                         llm_server.url)
    assert code == 0 and "2,048" in out, out
    # The refusal counted the request's messages: what the figures now rest on.
    assert "counts: calibrated x" in out and "counts the provider reported" in out, out
    llm_server.script(Answer("Still here."))
    code, out, err = cli("send", project_dir, "-c", conv, "--model", MODEL, "--api-base",
                         llm_server.url, "And then?")
    assert code == 0 and out == "Still here.\n", err
    assert [bool(r.body.get("stream")) for r in llm_server.requests[3:]] == [True]
