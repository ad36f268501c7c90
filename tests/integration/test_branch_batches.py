"""A fork never cuts a batch of tool calls from its results: at a tool card, at the answer
whose results follow a pin, or `--before` one of the results. A branch cut that way before
this held is repaired truthfully: a call that ran where the branch grew from is never said to
have done nothing. Real files, the real CLI and engine, the loopback LLM server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.engine import INTERRUPTED_RUNNING, LEFT_UPSTREAM
from core.factory import build_engine
from core.last_turn import last_turn
from core.model import ConversationMessage, FunctionCall, ToolCall, annotation
from core.store.project import Project
from core.tools.base import started_file
from tests.helpers.cli import cli


def shell(cid: str, command: str) -> ToolCall:
    return ToolCall(id=cid, function=FunctionCall(name="run_shell",
                                                  arguments=json.dumps({"command": command})))


def result(cid: str, text: str) -> ConversationMessage:
    return ConversationMessage(role="tool", tool_call_id=cid, tool_name="run_shell", status="ok",
                               content=text)


def batch_session(project_dir: Path, pin_while_running: bool = False
                  ) -> tuple[str, list[ConversationMessage]]:
    """user, an answer calling c1 and c2, (a pin made while they ran,) both results, an answer."""
    user = ConversationMessage(role="user", content="clean and rebuild")
    asked = ConversationMessage(role="assistant", content=None, mode="agent",
                                tool_calls=[shell("c1", "ls build"), shell("c2", "rm -rf build")])
    aside = [annotation(user.id, "pin")] if pin_while_running else []
    msgs = [user, asked, *aside, result("c1", "[exit code 0]\nout.o"),
            result("c2", "[exit code 0]\n(no output)"),
            ConversationMessage(role="assistant", content="Removed build/.", mode="agent")]
    with Project.open(project_dir) as p:
        conv = p.conversations.create("batch").id
        p.conversations.append_many(conv, msgs)
    return conv, msgs


def branch_log(project_dir: Path, branch: str) -> list[ConversationMessage]:
    with Project.open(project_dir, read_only=True) as p:
        return p.conversations.load(branch).messages


@pytest.mark.parametrize("at", ["c1", "c2", "pin", "answer"])
def test_a_fork_inside_a_batch_takes_the_whole_batch(project_dir: Path, at: str) -> None:
    conv, msgs = batch_session(project_dir, pin_while_running=True)
    entry = {"c1": msgs[3], "c2": msgs[4], "pin": msgs[2], "answer": msgs[1]}[at]
    with Project.open(project_dir) as p:
        branch = p.conversations.fork(conv, entry.id).id
    log = branch_log(project_dir, branch)
    assert [m.id for m in log] == [m.id for m in msgs[:5]]  # both results came along
    assert last_turn(log).unanswered == ()


def test_fork_before_a_tool_result_moves_the_cut_before_its_call(
        capsys: pytest.CaptureFixture[str], project_dir: Path) -> None:
    conv, msgs = batch_session(project_dir)
    code, out, err = cli(capsys, "fork", project_dir, "-c", conv, msgs[3].id, "--before")
    assert code == 0, err
    assert "the cut moved so that no tool call is parted from its result" in err
    log = branch_log(project_dir, out.strip().splitlines()[-1])
    assert [m.id for m in log] == [msgs[0].id]  # the user's message: no call without result


def test_a_branch_cut_inside_a_batch_is_never_told_a_call_that_ran_did_nothing(
        project_dir: Path) -> None:
    conv, msgs = batch_session(project_dir)
    with Project.open(project_dir) as p:  # a branch cut as forks were before: c2 left out
        store = p.conversations
        branch = store.fork(conv, msgs[0].id).id
        store.append_many(branch, [msgs[1], msgs[2]])
        engine = build_engine(p)
        list(engine.close_interrupted(branch))
        repaired = {m.tool_call_id: m for m in store.load(branch).messages if m.role == "tool"}
    assert repaired["c2"].status == "aborted" and repaired["c2"].text() == LEFT_UPSTREAM
    assert "did nothing" not in repaired["c2"].text()


def test_a_branch_made_inside_a_batch_a_crash_cut_says_the_started_call_may_have_run(
        project_dir: Path) -> None:
    """Killed while c2 ran (its mark is the origin's), a branch at c1's result ends with c2
    unanswered: the branch's repair reads the mark where the call ran, as the origin's does."""
    conv, msgs = batch_session(project_dir)
    with Project.open(project_dir) as p:
        store = p.conversations
        crashed = store.create("crashed").id
        store.append_many(crashed, msgs[:3])  # user, c1 and c2 called, c1's result
        mark = started_file(p.state, crashed, "c2")
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()
        branch = store.fork(crashed, msgs[2].id).id
        engine = build_engine(p)
        for which in (branch, crashed):
            list(engine.close_interrupted(which))
            repaired = {m.tool_call_id: m for m in store.load(which).messages
                        if m.role == "tool"}
            assert repaired["c2"].status == "aborted"
            assert repaired["c2"].text() == INTERRUPTED_RUNNING
