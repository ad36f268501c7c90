"""Run mode end to end: a workflow walked step by step by the real engine against the loopback
server, the log on disk as the run's only source of truth."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from core.engine import EngineEvent, RunUpdated, TurnOptions
from core.factory import build_engine
from core.model import ConversationMessage
from core.runs.driver import RunControlError, RunDriver
from core.settings import LLMSettings
from core.store.project import Project
from core.workflows.run_files import RunFiles
from core.workflows.workflow import Workflow, WorkflowError, parse_workflow
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, HttpError, ToolCalls

WORKFLOW: dict[str, Any] = {
    "name": "Release notes",
    "description": "Draft the release notes",
    "steps": [
        {"id": "collect", "title": "Collect the changes", "brief": "BRIEF-COLLECT list changes",
         "done_when": "every change is listed"},
        {"id": "draft", "title": "Draft the notes", "brief": "BRIEF-DRAFT write notes.md",
         "done_when": "notes.md exists", "tools": ["write_file", "read_file"]},
        {"id": "review", "title": "Review", "brief": "BRIEF-REVIEW proofread",
         "done_when": "no typos"},
    ],
}
BRIEFS = ("BRIEF-COLLECT", "BRIEF-DRAFT", "BRIEF-REVIEW")


def settings(server: FakeLLMServer, **extra: Any) -> LLMSettings:
    return LLMSettings(model=MODEL, api_base=server.url, max_output_tokens=256, auto_retries=0,
                       **extra)


def complete(call_id: str, result: str) -> ToolCalls:
    return ToolCalls([(call_id, "complete_step", json.dumps({"result": result}))])


def drain(events: Any) -> list[EngineEvent]:
    async def go() -> list[EngineEvent]:
        return [e async for e in events]

    return asyncio.run(go())


def system_of(server: FakeLLMServer, n: int) -> str:
    content: str = server.requests[n].body["messages"][0]["content"]
    return content


def tools_of(server: FakeLLMServer, n: int) -> list[str]:
    return [t["function"]["name"] for t in server.requests[n].body.get("tools") or []]


def start(project: Project, server: FakeLLMServer, workflow: Workflow | None = None,
          goal: str = "", **extra: Any) -> tuple[str, RunDriver, list[EngineEvent]]:
    conv = project.conversations.create(title="run")
    driver = RunDriver(build_engine(project))
    wf = workflow or Workflow.model_validate(WORKFLOW)
    events = drain(driver.start(conv.id, wf, settings(server, **extra),
                                TurnOptions(mode="run", approve="always"), goal))
    return conv.id, driver, events


def test_three_steps_each_request_carries_only_the_active_brief_then_the_post_run(
        project: Project, llm_server: FakeLLMServer) -> None:
    llm_server.script(complete("c1", "Found 3 changes: a, b, c"),
                      ToolCalls([("w1", "write_file", json.dumps(
                          {"path": "notes.md", "content": "# Notes\n"}))]),
                      complete("c2", "notes.md written"),
                      complete("c3", "proofread, no typos"),
                      Answer("Wrap-up: all three steps are done."))
    conv_id, driver, events = start(project, llm_server, goal="for v2.0")

    assert len(llm_server.requests) == 5
    active = [0, 1, 1, 2]  # the step each request works on
    for n, step in enumerate(active):
        system = system_of(llm_server, n)
        assert "RUN_DIRECTIVE" in system and "Goal: for v2.0" in system
        assert [b for b in BRIEFS if b in system] == [BRIEFS[step]]
        assert "complete_step" in tools_of(llm_server, n)
    # the draft step offers only its own tools (and complete_step)
    assert tools_of(llm_server, 1) == ["read_file", "write_file", "complete_step"]
    assert "Result of Collect the changes (collect):\nFound 3 changes: a, b, c" in \
        system_of(llm_server, 1)
    assert "1. [done] Collect the changes (id collect): Found 3 changes" in system_of(llm_server, 1)
    post = system_of(llm_server, 4)
    assert "Post-Run Protocol" in post and not any(b in post for b in BRIEFS)
    assert "NODE_BRIEF" not in post and "complete_step" not in tools_of(llm_server, 4)
    assert (project.root / "notes.md").read_text() == "# Notes\n"

    log = project.conversations.load(conv_id).messages
    run = driver.state(conv_id)
    assert run is not None and run.status == "finished"
    assert [s.status for s in run.steps] == ["done", "done", "done"]
    assert run.steps[1].result == "notes.md written"
    assert all(m.run_id == run.run_id for m in log)  # every entry is tagged
    assert [m.step_id for m in log] == ["collect", "collect", "collect", "draft", "draft",
                                        "draft", "draft", "review", "review", None]
    final = [e for e in events if isinstance(e, RunUpdated)][-1]
    assert final.stopped == "The workflow is complete."
    # whoever shows the run hears of each step as it ends, within the one turn
    seen = [[s.status for s in e.state.steps] for e in events
            if isinstance(e, RunUpdated) and e.state is not None]
    assert ["done", "active", "pending"] in seen and ["done", "done", "active"] in seen
    saved = RunFiles(project.state).read(run.run_id)
    assert saved is not None and saved["status"] == "finished" and saved["conversation"] == conv_id


def test_a_run_that_failed_resumes_at_its_step_in_a_new_process(
        project_dir: Path, llm_server: FakeLLMServer) -> None:
    llm_server.script(complete("c1", "changes listed"), HttpError(500, "boom"))
    with Project.open(project_dir, create=True) as project:
        conv_id, driver, _ = start(project, llm_server)
        run = driver.state(conv_id)
        assert run is not None and run.status == "failed"
        assert run.active is not None and run.active.step.id == "draft"
        assert run.active.status == "failed" and "HTTP 500" in run.active.error
    # a new process: nothing but the folder
    llm_server.script(complete("c2", "drafted"), complete("c3", "reviewed"), Answer("Done."))
    with Project.open(project_dir) as project:
        driver = RunDriver(build_engine(project))
        drain(driver.drive(conv_id, settings(llm_server), TurnOptions(approve="always")))
        assert [b for b in BRIEFS if b in system_of(llm_server, 2)] == ["BRIEF-DRAFT"]
        run = driver.state(conv_id)
        assert run is not None and run.status == "finished"
        assert [s.result for s in run.steps] == ["changes listed", "drafted", "reviewed"]


def test_a_model_that_never_completes_the_step_is_nudged_once_then_waits(
        project: Project, llm_server: FakeLLMServer) -> None:
    llm_server.script(Answer("I looked around."), Answer("Still looking."))
    conv_id, driver, events = start(project, llm_server)
    assert len(llm_server.requests) == 2
    last_user = llm_server.requests[1].body["messages"][-1]
    assert last_user["role"] == "user" and "call complete_step" in last_user["content"]
    log = project.conversations.load(conv_id).messages
    assert not any("call complete_step" in m.text() for m in log)  # the nudge is not stored
    run = driver.state(conv_id)
    assert run is not None and run.status == "waiting" and run.active is not None
    assert run.active.step.id == "collect"
    assert "without completing the step" in str([e for e in events
                                                 if isinstance(e, RunUpdated)][-1].stopped)
    # the user answers: the message joins the step, which goes on
    llm_server.script(complete("c1", "listed after all"), Answer("Paused here."))
    drain(driver.send(conv_id, "the changes are in CHANGES.txt", settings(llm_server),
                      TurnOptions(approve="always")))
    log = project.conversations.load(conv_id).messages
    typed = next(m for m in log if m.text() == "the changes are in CHANGES.txt")
    assert typed.step_id == "collect" and typed.run_id == run.run_id
    run = driver.state(conv_id)
    assert run is not None and run.steps[0].status == "done" and run.active is not None
    assert run.active.step.id == "draft"


def test_complete_step_twice_in_one_answer_or_without_a_result_advances_once(
        project: Project, llm_server: FakeLLMServer) -> None:
    llm_server.script(
        ToolCalls([("a", "complete_step", json.dumps({"result": "one"})),
                   ("b", "complete_step", json.dumps({"result": "two"}))]),
        ToolCalls([("c", "complete_step", json.dumps({"result": "  "})),
                   ("d", "complete_step", "{}")]),
        Answer("ok"), Answer("ok again"))
    conv_id, driver, _ = start(project, llm_server)
    results = {m.tool_call_id: m for m in project.conversations.load(conv_id).messages
               if m.role == "tool"}
    assert results["a"].status == "ok" and "Step 1 of 3" in results["a"].text()
    assert results["b"].status == "error" and "already completed" in results["b"].text()
    assert results["c"].status == "error" and "result" in results["c"].text()
    assert results["d"].status == "error" and "result" in results["d"].text()
    run = driver.state(conv_id)
    assert run is not None and [s.status for s in run.steps] == ["done", "active", "pending"]


def test_complete_step_outside_a_run_is_an_error_the_model_reads(
        project: Project, llm_server: FakeLLMServer) -> None:
    conv = project.conversations.create()
    engine = build_engine(project)
    llm_server.script(complete("x", "done"), Answer("fine"))
    drain(engine.send(conv.id, "hi", settings(llm_server), TurnOptions(mode="run")))
    assert "complete_step" not in tools_of(llm_server, 0)  # no run: not offered
    result = next(m for m in project.conversations.load(conv.id).messages if m.role == "tool")
    assert result.status == "error" and "no tool named 'complete_step'" in result.text()
    assert "No workflow is active" in system_of(llm_server, 0)


def test_skip_redo_pause_and_abort_are_recorded_in_the_log(
        project: Project, llm_server: FakeLLMServer) -> None:
    llm_server.script(complete("c1", "listed"), Answer("working on the draft"),
                      Answer("still drafting"))
    conv_id, driver, _ = start(project, llm_server)
    driver.control(conv_id, "skip")  # the draft step
    run = driver.state(conv_id)
    assert run is not None and [s.status for s in run.steps] == ["done", "skipped", "active"]
    driver.control(conv_id, "redo", "collect")
    run = driver.state(conv_id)
    assert run is not None and [s.status for s in run.steps] == ["active", "pending", "pending"]
    assert run.steps[0].result == ""
    driver.control(conv_id, "pause")
    with pytest.raises(RunControlError, match="already paused"):
        driver.control(conv_id, "pause")
    drain(driver.drive(conv_id, settings(llm_server)))  # paused: nothing is sent
    assert len(llm_server.requests) == 3
    driver.control(conv_id, "abort")
    with pytest.raises(RunControlError, match="aborted"):
        driver.control(conv_id, "skip")
    # all of it is in the log, and a fresh read of the log says the same
    actions = [m.run_event.action for m in project.conversations.load(conv_id).messages
               if m.run_event is not None]
    assert actions == ["start", "skip", "redo", "pause", "abort"]
    assert driver.state(conv_id).status == "aborted"  # type: ignore[union-attr]


def test_a_step_limit_pauses_the_step_visibly_and_continue_goes_on(
        project: Project, llm_server: FakeLLMServer) -> None:
    wf = dict(WORKFLOW, steps=[dict(WORKFLOW["steps"][0], max_rounds=2)])
    llm_server.script(*(ToolCalls([(f"l{n}", "list_dir", "{}")]) for n in range(2)))
    conv_id, driver, events = start(project, llm_server, Workflow.model_validate(wf))
    log = project.conversations.load(conv_id).messages
    assert log[-1].error is not None and log[-1].error.type == "step_limit"
    assert "Collect the changes" in log[-1].error.message
    run = driver.state(conv_id)
    assert run is not None and run.status == "limit"
    llm_server.script(complete("c", "listed"), Answer("All done."))
    drain(driver.drive(conv_id, settings(llm_server)))
    assert driver.state(conv_id).status == "finished"  # type: ignore[union-attr]


def test_switching_to_chat_keeps_the_run_and_changes_only_the_prefix(
        project: Project, llm_server: FakeLLMServer) -> None:
    llm_server.script(complete("c1", "listed"), Answer("drafting"), Answer("drafting more"))
    conv_id, driver, _ = start(project, llm_server)
    engine = driver.engine
    llm_server.script(Answer("a chat answer"))
    drain(engine.send(conv_id, "unrelated question", settings(llm_server), TurnOptions()))
    chat = llm_server.requests[-1].body
    assert "RUN_DIRECTIVE" not in chat["messages"][0]["content"]
    log = project.conversations.load(conv_id).messages
    assert log[-1].run_id is None and log[-2].run_id is None  # not the run's entries
    run = driver.state(conv_id)
    assert run is not None and run.active is not None and run.active.step.id == "draft"
    llm_server.script(complete("c2", "drafted"), complete("c3", "reviewed"), Answer("Wrap."))
    drain(driver.drive(conv_id, settings(llm_server)))
    assert "BRIEF-DRAFT" in system_of(llm_server, len(llm_server.requests) - 3)
    assert driver.state(conv_id).status == "finished"  # type: ignore[union-attr]


def test_a_corrupt_or_stale_run_file_is_rebuilt_from_the_log(
        project: Project, llm_server: FakeLLMServer) -> None:
    llm_server.script(complete("c1", "listed"), Answer("drafting"), Answer("drafting"))
    conv_id, driver, _ = start(project, llm_server)
    run = driver.state(conv_id)
    assert run is not None
    files = RunFiles(project.state)
    files.path(run.run_id).write_text("{not json")
    assert "could not be read, so it was made again" in str(files.sync(conv_id, run))
    data = json.loads(files.path(run.run_id).read_text())
    data["status"] = "finished"
    files.path(run.run_id).write_text(json.dumps(data))
    problem = files.sync(conv_id, run)
    assert problem is not None and "brought up to date from the conversation" in problem
    assert files.read(run.run_id)["status"] == "waiting"  # type: ignore[index]
    assert files.sync(conv_id, run) is None  # agrees now


@pytest.mark.parametrize(("text", "expected"), [
    ("{\n  \"name\": \"x\",\n  \"steps\": [,]\n}", "not valid JSON: Expecting value at line 3"),
    (json.dumps({"name": "x", "steps": []}), "at least one step"),
    (json.dumps({"name": "x", "steps": [{"id": "a", "title": "A", "brief": "b"},
                                         {"id": "a", "title": "B", "brief": "c"}]}),
     "two steps have the id 'a'"),
    (json.dumps({"name": "x", "steps": [{"id": "a", "title": "A"}]}), "steps.1.brief is missing"),
    (json.dumps({"name": "x", "steps": [{"id": "a", "title": "A", "brief": "b",
                                         "tools": ["rm_rf"]}]}), "unknown tool(s) rm_rf"),
    ("[1, 2]", "must be a JSON object"),
])
def test_a_bad_workflow_is_refused_with_where_and_why(text: str, expected: str) -> None:
    with pytest.raises(WorkflowError, match=None) as info:
        parse_workflow(text, "flow.json")
    assert expected in str(info.value) and str(info.value).startswith("flow.json")


def test_the_log_alone_gives_the_state(project: Project, llm_server: FakeLLMServer) -> None:
    from core.workflows.state import fold

    llm_server.script(complete("c1", "listed"), Answer("drafting"), Answer("drafting"))
    conv_id, driver, _ = start(project, llm_server)
    lines = (project.state / "conversations" / conv_id / "messages.jsonl").read_text().splitlines()
    history = [ConversationMessage.model_validate_json(line) for line in lines]
    run = fold(history)
    assert run is not None and [s.status for s in run.steps] == ["done", "active", "pending"]
    assert run.steps[0].result == "listed" and run.status == "waiting"


def test_skipping_a_step_while_its_answer_arrives_keeps_that_answer_with_its_step(
        project: Project, llm_server: FakeLLMServer) -> None:
    llm_server.script(complete("c1", "listed"), Answer("drafting slowly " * 8, delay=0.05),
                      complete("c3", "reviewed"), Answer("Wrap-up."))
    conv = project.conversations.create(title="run")
    driver = RunDriver(build_engine(project))
    wf = Workflow.model_validate(WORKFLOW)

    async def go() -> None:
        task = asyncio.ensure_future(drain_async(driver.start(
            conv.id, wf, settings(llm_server), TurnOptions(mode="run", approve="always"))))
        deadline = asyncio.get_running_loop().time() + 20
        while len(llm_server.requests) < 2:  # the draft step's answer is on its way
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.02)
        driver.control(conv.id, "skip")
        await asyncio.wait_for(task, 30)

    asyncio.run(go())
    log = project.conversations.load(conv.id).messages
    slow = next(m for m in log if m.text().startswith("drafting slowly"))
    assert slow.step_id == "draft"  # the step its request was made for
    assert [b for b in BRIEFS if b in system_of(llm_server, 2)] == ["BRIEF-REVIEW"]
    run = driver.state(conv.id)
    assert run is not None and run.status == "finished"
    assert [s.status for s in run.steps] == ["done", "skipped", "done"]


async def drain_async(events: Any) -> list[EngineEvent]:
    return [e async for e in events]


def test_a_failed_wrap_up_is_written_once_on_resume(project: Project,
                                                     llm_server: FakeLLMServer) -> None:
    llm_server.script(complete("c1", "a"), complete("c2", "b"), complete("c3", "c"),
                      HttpError(500, "down"))
    conv_id, driver, _ = start(project, llm_server)
    run = driver.state(conv_id)
    assert run is not None and run.status == "failed" and run.active is None
    llm_server.script(Answer("The wrap-up."), *[Answer("again?")] * 5)
    drain(driver.drive(conv_id, settings(llm_server)))
    assert len(llm_server.requests) == 5  # one wrap-up, not one request after another
    assert "Post-Run Protocol" in system_of(llm_server, 4)
    assert driver.state(conv_id).status == "finished"  # type: ignore[union-attr]


def test_a_crafted_run_id_never_names_a_file_outside_the_runs_folder(
        project: Project, llm_server: FakeLLMServer) -> None:
    llm_server.script(complete("c1", "a"), Answer("drafting"), Answer("drafting"))
    conv_id, driver, _ = start(project, llm_server)
    run = driver.state(conv_id)
    assert run is not None
    run.run_id = "../../escaped"
    assert RunFiles(project.state).sync(conv_id, run) is None
    assert not (project.state.parent / "escaped.json").exists()
    assert not (project.state / "escaped.json").exists()


def test_an_answer_stopped_mid_run_stays_with_its_step_and_pauses_the_run(
        project: Project, llm_server: FakeLLMServer) -> None:
    llm_server.script(complete("c1", "listed"), Answer("drafting slowly " * 40, delay=0.05))
    conv = project.conversations.create(title="run")
    driver = RunDriver(build_engine(project))

    async def go() -> None:
        task = asyncio.ensure_future(drain_async(driver.start(
            conv.id, Workflow.model_validate(WORKFLOW), settings(llm_server),
            TurnOptions(mode="run", approve="always"))))
        deadline = asyncio.get_running_loop().time() + 20
        while len(llm_server.requests) < 2:  # the draft step's answer is on its way
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        task.cancel()  # Stop (or the window closing)
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())
    stopped = project.conversations.load(conv.id).messages[-1]
    assert stopped.error is not None and stopped.error.type == "stopped"
    assert stopped.step_id == "draft" and stopped.run_id is not None
    run = driver.state(conv.id)
    assert run is not None and run.status == "paused"  # not "running" with nothing running


def test_a_contradictory_log_is_reported_not_obeyed(project: Project,
                                                     llm_server: FakeLLMServer) -> None:
    """A log edited by hand or carried from elsewhere: a skip of a step the workflow does not
    have, and a run start with no steps. The run shown stays the real one, and says so."""
    from app.window.run_flow import view_of
    from core.model import RunEvent

    llm_server.script(Answer("collecting"))
    conv_id, driver, _ = start(project, llm_server)
    before = driver.state(conv_id)
    assert before is not None
    run_id, statuses = before.run_id, [s.status for s in before.steps]
    project.conversations.append_many(conv_id, [
        ConversationMessage(role="system", kind="notice", content="skip", run_id=run_id,
                            run_event=RunEvent(action="skip", step_id="deploy")),
        ConversationMessage(role="system", kind="notice", content="start", run_id="r-empty",
                            run_event=RunEvent(action="start", workflow={
                                "name": "empty", "description": "none", "steps": []}))])
    run = RunDriver(build_engine(project)).state(conv_id)  # as a new window reads it
    assert run is not None and run.run_id == run_id
    assert [s.status for s in run.steps] == statuses and statuses[1] == "pending"
    shown = view_of(run).message
    assert "step the workflow does not have ('deploy')" in shown
    assert "starts a run whose workflow cannot be read" in shown
