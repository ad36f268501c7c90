"""Checkpoints end to end: an agent turn (the loopback server scripting its tool calls) writes,
edits, deletes by shell and creates by shell in a project that is a real git repository; the
turn is listed, diffed and restored exactly through `workbench`, the project's own .git is
never touched, and a file the user changed after the turn is protected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.checkpoints.store import Store
from core.checkpoints.views import redo, turns, undo
from core.store.project import Project
from tests.helpers.checkpoints import files, make_repo, repo_state
from tests.helpers.cli import cli
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, ToolCalls

SHELL = "rm README.md && mkdir -p made/deep && printf 'by shell\\n' > made/deep/by_shell.txt"


def script_turn(server: FakeLLMServer) -> None:
    server.script(
        ToolCalls([("c0", "list_dir", '{"path": "."}')]),  # a read-only round: no checkpoint
        ToolCalls([("c1", "write_file", json.dumps({"path": "new.py", "content": "x = 1\n"})),
                   ("c2", "edit_file", json.dumps({"path": "calc.py", "old": "return a - b",
                                                   "new": "return a + b"}))]),
        ToolCalls([("c3", "run_shell", json.dumps({"command": SHELL}))]),
        Answer("Done."))


def conversation(project: Path) -> tuple[str, str]:
    """The project's conversation and its (first) user entry."""
    with Project.open(project, read_only=True) as p:
        conv = p.conversations.list()[0].id
        user = next(m for m in p.conversations.load(conv).messages if m.role == "user")
        return conv, user.id


@pytest.fixture
def repo(project_dir: Path) -> Path:
    make_repo(project_dir)
    return project_dir


def agent_turn(capsys: pytest.CaptureFixture[str], repo: Path, server: FakeLLMServer,
               *where: str) -> None:
    script_turn(server)
    code, _, err = cli(capsys, "send", repo, *(where or ("--new",)), "--mode", "agent",
                       "--model", MODEL, "--api-base", server.url, "--approve", "always",
                       "change things")
    assert code == 0, err


def test_a_turn_is_listed_diffed_and_restored_exactly(capsys: pytest.CaptureFixture[str],
                                                      repo: Path,
                                                      llm_server: FakeLLMServer) -> None:
    before, git_before = files(repo), repo_state(repo)
    agent_turn(capsys, repo, llm_server)
    after = files(repo)
    assert "README.md" not in after and after["made/deep/by_shell.txt"] == b"by shell\n"
    conv, entry = conversation(repo)

    code, out, err = cli(capsys, "checkpoints", repo, "-c", conv, "--json")
    assert code == 0, err
    [turn] = json.loads(out)
    assert turn["entry"] == entry
    assert (turn["added"], turn["modified"], turn["deleted"]) == (
        ["made/deep/by_shell.txt", "new.py"], ["calc.py"], ["README.md"])
    code, out, _ = cli(capsys, "checkpoints", repo, "-c", conv)
    assert code == 0 and f"{entry}" in out and "4 files changed" in out and "D README.md" in out

    code, out, _ = cli(capsys, "diff", repo, "-c", conv, entry[:10])
    assert code == 0
    assert "-    return a - b\n+    return a + b" in out and "+x = 1" in out
    assert "-Adds numbers." in out and "+by shell" in out

    (repo / "mine.txt").write_text("the user's own file, never touched by a restore\n")
    code, out, err = cli(capsys, "restore", repo, "-c", conv, entry)
    assert code == 0, err
    assert "restored 4 files" in out
    assert files(repo) == {**before, "mine.txt": b"the user's own file, never touched by a "
                                                 b"restore\n"}
    assert not (repo / "made").exists()  # the folders the turn made went with its files
    assert repo_state(repo) == git_before  # HEAD, index, stash and refs: never touched

    code, out, _ = cli(capsys, "checkpoints", repo, "-c", conv, "--json")
    assert json.loads(out)[0]["undone"] is True


def test_a_file_the_user_changed_since_the_turn_is_protected(capsys: pytest.CaptureFixture[str],
                                                             repo: Path,
                                                             llm_server: FakeLLMServer) -> None:
    before = files(repo)
    agent_turn(capsys, repo, llm_server)
    conv, entry = conversation(repo)
    (repo / "calc.py").write_text("def add(a, b):\n    return b + a  # mine\n")
    now = files(repo)
    code, _, err = cli(capsys, "restore", repo, "-c", conv, entry)
    assert code == 1 and "calc.py" in err and "--force" in err
    assert "new.py" not in err.split(":")[-1]
    assert files(repo) == now  # nothing was restored
    code, _, err = cli(capsys, "restore", repo, "-c", conv, entry, "--force")
    assert code == 0, err
    assert files(repo) == before


def test_undo_is_undoable_and_a_later_turn_is_undone_with_an_earlier_one(
        capsys: pytest.CaptureFixture[str], repo: Path, llm_server: FakeLLMServer) -> None:
    before = files(repo)
    agent_turn(capsys, repo, llm_server)
    conv, first = conversation(repo)
    after_first = files(repo)
    llm_server.script(
        ToolCalls([("d1", "write_file", json.dumps({"path": "new.py", "content": "x = 2\n"})),
                   ("d2", "write_file", json.dumps({"path": "second.txt", "content": "2\n"}))]),
        Answer("Again."))
    code, _, err = cli(capsys, "send", repo, "-c", conv, "--mode", "agent", "--model", MODEL,
                       "--api-base", llm_server.url, "--approve", "always", "more")
    assert code == 0, err
    after_second = files(repo)
    store = Store(repo, repo / ".workbench")
    listed = turns(store, conv)
    assert [t.entry for t in listed][0] == first and len(listed) == 2
    second = listed[1].entry
    assert (listed[1].added, listed[1].modified) == (["second.txt"], ["new.py"])

    undo(store, conv, second)
    assert files(repo) == after_first
    redo(store, conv, second)
    assert files(repo) == after_second
    undo(store, conv, first)  # back before both turns
    assert files(repo) == before
    redo(store, conv, first)
    assert files(repo) == after_second


def test_a_chat_turn_and_a_read_only_turn_take_no_checkpoint(capsys: pytest.CaptureFixture[str],
                                                             repo: Path,
                                                             llm_server: FakeLLMServer) -> None:
    llm_server.script(ToolCalls([("r1", "read_file", '{"path": "calc.py"}')]), Answer("Read."))
    code, _, err = cli(capsys, "send", repo, "--new", "--mode", "agent", "--model", MODEL,
                       "--api-base", llm_server.url, "--approve", "always", "look")
    assert code == 0, err
    conv, _ = conversation(repo)
    code, out, _ = cli(capsys, "checkpoints", repo, "-c", conv)
    assert code == 0 and "No agent turn of this conversation changed files." in out
    assert Store(repo, repo / ".workbench").checkpoints(conv) == []
    assert not (repo / ".workbench" / "checkpoints.git").exists()  # reading made nothing


def test_a_stopped_turn_still_takes_its_after_checkpoint(repo: Path,
                                                         llm_server: FakeLLMServer) -> None:
    import asyncio
    import time

    from core.engine import TurnOptions
    from core.factory import build_engine
    from core.settings import LLMSettings

    llm_server.script(ToolCalls([("s", "run_shell", json.dumps(
        {"command": "printf made > made.txt; sleep 30", "timeout": 60}))]))
    settings = LLMSettings(model=MODEL, api_base=llm_server.url, auto_retries=0)
    with Project.open(repo) as p:
        engine = build_engine(p)
        conv = p.conversations.create("t").id

        async def go() -> None:
            async def consume() -> None:
                async for _ in engine.send(conv, "make it", settings,
                                           TurnOptions(mode="agent", approve="always")):
                    pass

            task = asyncio.create_task(consume())
            deadline = time.monotonic() + 60
            while not (repo / "made.txt").exists():
                assert time.monotonic() < deadline and not task.done()
                await asyncio.sleep(0.02)
            task.cancel()  # Stop
            await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 60)

        asyncio.run(go())
    store = Store(repo, repo / ".workbench")
    assert [c.phase for c in store.checkpoints(conv)] == ["before", "after"]
    [turn] = turns(store, conv)
    assert turn.added == ["made.txt"]
