"""Issue 51's run-mode findings: nothing is sent after Pause (14), and skipping the last step
while its answer arrives still writes the wrap-up (15)."""

from __future__ import annotations

import asyncio

from core.engine import RunUpdated, TurnOptions
from core.factory import build_engine
from core.runs.driver import RunDriver
from core.store.project import Project
from core.workflows.workflow import Workflow
from tests.helpers.fake_llm import Answer, FakeLLMServer
from tests.integration.test_run import WORKFLOW, complete, drain_async, settings, system_of


def test_a_pause_while_the_answer_ends_sends_no_nudge(project: Project,
                                                      llm_server: FakeLLMServer) -> None:
    llm_server.script(Answer("I read the notes."), Answer("nudged anyway"))
    conv = project.conversations.create(title="run")
    driver = RunDriver(build_engine(project))
    wf = Workflow.model_validate(WORKFLOW)

    async def go() -> None:
        async for event in driver.start(conv.id, wf, settings(llm_server),
                                        TurnOptions(mode="run", approve="always")):
            run = event.state if isinstance(event, RunUpdated) else None
            if run is not None and run.status == "waiting":  # the report the window reads
                driver.control(conv.id, "pause")  # ... as the user presses Pause

    asyncio.run(asyncio.wait_for(go(), 30))
    assert len(llm_server.requests) == 1  # no nudge once paused
    state = driver.state(conv.id)
    assert state is not None and state.status == "paused"


def test_skipping_the_last_step_while_it_answers_still_writes_the_wrap_up(
        project: Project, llm_server: FakeLLMServer) -> None:
    llm_server.script(complete("c1", "listed"), complete("c2", "drafted"),
                      Answer("reviewing slowly " * 8, delay=0.05), Answer("Wrap-up: all done."))
    conv = project.conversations.create(title="run")
    driver = RunDriver(build_engine(project))
    wf = Workflow.model_validate(WORKFLOW)

    async def go() -> None:
        task = asyncio.ensure_future(drain_async(driver.start(
            conv.id, wf, settings(llm_server), TurnOptions(mode="run", approve="always"))))
        deadline = asyncio.get_running_loop().time() + 20
        while len(llm_server.requests) < 3:  # the review step's answer is on its way
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.02)
        driver.control(conv.id, "skip")
        await asyncio.wait_for(task, 30)

    asyncio.run(go())
    assert len(llm_server.requests) == 4
    assert "Post-Run Protocol" in system_of(llm_server, 3)  # the wrap-up was asked for
    log = project.conversations.load(conv.id).messages
    assert log[-1].text() == "Wrap-up: all done."
    run = driver.state(conv.id)
    assert run is not None and run.status == "finished"
    assert [s.status for s in run.steps] == ["done", "done", "skipped"]
