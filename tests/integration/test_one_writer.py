"""One log writer, one reader of how a conversation ends: what the user does around a turn (a
pin, an exclusion, a run's control, Stop at any moment) never costs an answer and never makes
Continue, Retry or crash repair refuse. Real engine, real loopback server, real files."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import core.request_copies as request_copies
from core.engine import EngineEvent, NothingToRetry, TurnFinished, TurnOptions
from core.factory import build_engine
from core.model import ConversationMessage, RunAction, ToolCall, annotation
from core.runs.driver import RunDriver
from core.settings import LLMSettings
from core.store.project import Project
from core.store.requests import save_request
from core.tools.base import running_file, started_file
from core.workflows.run_files import RunFiles
from core.workflows.workflow import Workflow
from tests.helpers.fake_llm import MODEL, Answer, Cut, FakeLLMServer, HttpError

WORKFLOW = {"name": "Notes", "steps": [
    {"id": "one", "title": "First", "brief": "do one", "done_when": "one is done"},
    {"id": "two", "title": "Second", "brief": "do two", "done_when": "two is done"}]}


def settings(server: FakeLLMServer) -> LLMSettings:
    return LLMSettings(model=MODEL, api_base=server.url, max_output_tokens=256, auto_retries=0)


def drain(events: Any) -> list[EngineEvent]:
    async def go() -> list[EngineEvent]:
        return [e async for e in events]

    return asyncio.run(go())


def log(project: Project, conv: str) -> list[ConversationMessage]:
    return project.conversations.load(conv).messages


def test_stop_while_the_answers_request_copy_is_written_keeps_the_answer(
        project: Project, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # The copy for .workbench/requests/ is slow to write (a busy disk); the whole answer has
    # arrived; the user presses Stop (or closes the window) right then.
    writing, release = threading.Event(), threading.Event()
    real = save_request

    def slow_save(*args: Any, **kwargs: Any) -> Any:
        writing.set()
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(request_copies, "save_request", slow_save)
    conv = project.conversations.create().id
    engine = build_engine(project)
    llm_server.script(Answer("The whole answer, every word of it."))
    events: list[EngineEvent] = []

    async def go() -> None:
        async def turn() -> None:
            async for event in engine.send(conv, "question", settings(llm_server)):
                events.append(event)

        task = asyncio.create_task(turn())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not task.done() and \
                not any(m.role == "assistant" for m in log(project, conv)):
            await asyncio.sleep(0.02)
        assert writing.is_set() and not task.done()  # the copy is still being written
        task.cancel()  # Stop
        await asyncio.gather(task, return_exceptions=True)

    try:
        asyncio.run(go())
    finally:
        release.set()
    answers = [m for m in log(project, conv) if m.role == "assistant"]
    assert [(m.text(), m.kind) for m in answers] == [
        ("The whole answer, every word of it.", "message")]
    assert isinstance(events[-1], TurnFinished) and events[-1].message.id == answers[0].id
    assert events[-1].status == "stopped"  # the Stop is not swallowed: never "Answered"


def test_stop_while_a_runs_request_copy_is_written_ends_the_run_there(
        project: Project, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    writing, release = threading.Event(), threading.Event()
    real = save_request

    def slow_save(*args: Any, **kwargs: Any) -> Any:
        writing.set()
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(request_copies, "save_request", slow_save)
    llm_server.script(Answer("Nothing to collect yet."), Answer("A second request."),
                      Answer("A third."))
    conv = project.conversations.create(title="run").id
    driver = RunDriver(build_engine(project))
    events: list[EngineEvent] = []

    async def go() -> None:
        async def run() -> None:
            async for event in driver.start(conv, Workflow.model_validate(WORKFLOW),
                                            settings(llm_server),
                                            TurnOptions(mode="run", approve="always")):
                events.append(event)

        task = asyncio.create_task(run())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not task.done() and \
                not any(m.role == "assistant" for m in log(project, conv)):
            await asyncio.sleep(0.02)
        assert writing.is_set() and not task.done()  # the answer is saved, its copy not yet
        task.cancel()  # Stop
        await asyncio.gather(task, return_exceptions=True)

    try:
        asyncio.run(go())
    finally:
        release.set()
    assert len(llm_server.requests) == 1  # the run sent nothing after the Stop
    assert [e.status for e in events if isinstance(e, TurnFinished)] == ["stopped"]


@pytest.mark.parametrize("action", ["pin", "exclude"])
def test_a_pin_or_exclusion_after_a_failure_leaves_retry_and_continue_working(
        project: Project, llm_server: FakeLLMServer, action: str) -> None:
    engine = build_engine(project)
    conv = project.conversations.create().id
    # Retry: the provider failed; the user then pins (or excludes) their question
    llm_server.script(HttpError(500))
    drain(engine.send(conv, "first question", settings(llm_server)))
    question = next(m for m in log(project, conv) if m.role == "user")
    project.conversations.append(conv, annotation(question.id, action))
    if action == "exclude":  # the only question left out: nothing to ask, and nothing is sent
        events = drain(engine.retry(conv, settings(llm_server)))
        assert isinstance(events[-1], TurnFinished) and events[-1].status == "error"
        refusal = log(project, conv)[-1]
        assert refusal.error is not None and refusal.error.type == "nothing_to_send"
        assert len(llm_server.requests) == 1  # the first, failed attempt only
        project.conversations.append(conv, annotation(question.id, "include"))
    llm_server.script(Answer("Answered on retry."))
    events = drain(engine.retry(conv, settings(llm_server)))
    assert isinstance(events[-1], TurnFinished) and events[-1].status == "ok"
    assert log(project, conv)[-1].text() == "Answered on retry."
    # Continue: an answer cut mid-way; the user then marks the cut answer
    llm_server.script(Cut("The first half", transport=True))
    drain(engine.send(conv, "second question", settings(llm_server)))
    cut = log(project, conv)[-1]
    assert cut.kind == "error" and cut.text() == "The first half"
    project.conversations.append(conv, annotation(cut.id, "pin"))
    llm_server.script(Answer(" and the second half."))
    events = drain(engine.continue_(conv, settings(llm_server)))
    assert isinstance(events[-1], TurnFinished) and events[-1].status == "ok"
    assert log(project, conv)[-1].continues == cut.id
    with pytest.raises(NothingToRetry):  # it ends in an answer now: nothing to run again
        engine.check_retry(conv)


def test_continue_with_every_entry_left_out_still_asks_with_its_instruction(
        project: Project, llm_server: FakeLLMServer) -> None:
    """Nothing is sent only when the request would carry nothing: Continue's instruction is
    a user message of its own, so an answer cut mid-way goes on even with everything else
    left out of the context."""
    engine = build_engine(project)
    conv = project.conversations.create().id
    llm_server.script(Cut("The first half", transport=True))
    drain(engine.send(conv, "a question", settings(llm_server)))
    question, cut = log(project, conv)
    for entry in (question, cut):
        project.conversations.append(conv, annotation(entry.id, "exclude"))
    llm_server.script(Answer(" and the second half."))
    events = drain(engine.continue_(conv, settings(llm_server)))
    assert isinstance(events[-1], TurnFinished) and events[-1].status == "ok"
    assert log(project, conv)[-1].text() == " and the second half."
    sent = llm_server.requests[-1].body["messages"]
    assert sent[0]["role"] == "system" and sent[-1]["role"] == "user"


def test_a_pin_made_while_a_command_ran_does_not_hide_it_from_crash_repair(
        project: Project, llm_server: FakeLLMServer) -> None:
    # The app closed while a command ran; a pin was made meanwhile (the window, or `workbench
    # pin` from another terminal). The next use answers the call as aborted, so the request
    # is complete and the model knows it is unknown whether the command ran.
    conv = project.conversations.create().id
    call = {"id": "call_1", "type": "function",
            "function": {"name": "run_shell", "arguments": json.dumps({"command": "make"})}}
    project.conversations.append_many(conv, [
        ConversationMessage(role="user", content="build it", mode="agent"),
        ConversationMessage(role="assistant", content=None,
                            tool_calls=[ToolCall.model_validate(call)], mode="agent")])
    asked = log(project, conv)[0]
    printed = running_file(project.state, conv, "call_1")  # the command had begun to print
    printed.parent.mkdir(parents=True, exist_ok=True)
    printed.write_text("compiling…")
    project.conversations.append(conv, annotation(asked.id, "pin"))
    llm_server.script(Answer("The build's outcome is unknown; I will run it again."))
    drain(build_engine(project).send(conv, "what happened?", settings(llm_server),
                                     TurnOptions(mode="agent", approve="never")))
    results = [m for m in log(project, conv) if m.role == "tool"]
    assert [(m.tool_call_id, m.status) for m in results] == [("call_1", "aborted")]
    sent = llm_server.requests[-1].body["messages"]
    calls = [i for i, m in enumerate(sent) if m.get("tool_calls")]
    assert calls and sent[calls[0] + 1]["tool_call_id"] == "call_1"
    assert "whether it ran" in sent[calls[0] + 1]["content"]


def test_a_call_still_waiting_for_approval_when_the_app_died_is_said_not_to_have_run(
        project: Project, llm_server: FakeLLMServer, tmp_path: Path) -> None:
    # A write the user had not yet approved when the app was killed: it certainly did nothing,
    # and the model is told so (not "unknown"), while a call that had started is unknown.
    conv = project.conversations.create().id
    calls = [{"id": f"call_{n}", "type": "function", "function": {
        "name": "write_file", "arguments": json.dumps({"path": f"f{n}.txt", "content": "x"})}}
        for n in (1, 2)]
    project.conversations.append_many(conv, [
        ConversationMessage(role="user", content="write both", mode="agent"),
        ConversationMessage(role="assistant", content=None,
                            tool_calls=[ToolCall.model_validate(c) for c in calls], mode="agent")])
    began = started_file(project.state, conv, "call_2")  # what the runner leaves as it starts
    began.parent.mkdir(parents=True, exist_ok=True)
    began.touch()
    llm_server.script(Answer("Noted."))
    drain(build_engine(project).send(conv, "what happened?", settings(llm_server),
                                     TurnOptions(mode="agent", approve="never")))
    results = {m.tool_call_id: m.text() for m in log(project, conv) if m.role == "tool"}
    assert results["call_1"].startswith("Not run: the app closed before this call started")
    assert results["call_2"].startswith("Aborted: the app closed while this call was running")
    assert not began.exists()  # the mark goes once the result is in the log
    assert not (project.root / "f1.txt").exists()


@pytest.mark.parametrize(("action", "status"), [("pause", "paused"), ("abort", "aborted")])
def test_a_run_control_made_while_idle_brings_the_run_file_up_to_date(
        project: Project, llm_server: FakeLLMServer, action: RunAction, status: str) -> None:
    conv = project.conversations.create(title="run").id
    driver = RunDriver(build_engine(project))
    llm_server.script(Answer("Working on step one; I need your input first."),
                      Answer("Still waiting for your input."))  # after the run's one nudge
    drain(driver.start(conv, Workflow.model_validate(WORKFLOW), settings(llm_server),
                       TurnOptions(mode="run", approve="never")))
    run = driver.state(conv)
    assert run is not None and run.status == "waiting"
    files = RunFiles(project.state)
    assert files.read(run.run_id)["status"] == "waiting"  # type: ignore[index]
    driver.control(conv, action)  # no turn runs: the user pressed Pause (or Abort) in the panel
    assert files.read(run.run_id)["status"] == status  # type: ignore[index]


def test_a_run_paused_after_a_failure_resumes_by_retrying_the_failed_request(
        project: Project, llm_server: FakeLLMServer) -> None:
    conv = project.conversations.create(title="run").id
    driver = RunDriver(build_engine(project))
    llm_server.script(HttpError(500))
    drain(driver.start(conv, Workflow.model_validate(WORKFLOW), settings(llm_server),
                       TurnOptions(mode="run", approve="never")))
    assert log(project, conv)[-1].kind == "error"
    driver.control(conv, "pause")
    driver.control(conv, "resume")  # two notices now follow the failed answer
    llm_server.script(Answer("Step one is under way."), Answer("Waiting for you."))
    drain(driver.drive(conv, settings(llm_server), TurnOptions(mode="run", approve="never")))
    # Retry sent the question again, without the failed answer (Continue has nothing to go on)
    retried = llm_server.requests[1].body["messages"]
    assert retried[-1]["content"] == "Run the workflow 'Notes'."
    assert not any("LLM_ERROR" in str(m.get("content")) for m in retried)
    assert [m.text() for m in log(project, conv) if m.kind == "message"][1:] == [
        "Step one is under way.", "Waiting for you."]
