"""Agent mode end to end: litellm against the loopback server scripted to call tools, tools on
a real project folder, every call and result in the log and back to the model."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from core.engine import (
    EntryAppended,
    QuestionAsked,
    ToolStarted,
    TurnFinished,
    TurnOptions,
)
from core.factory import build_engine
from core.model import ConversationMessage, FunctionCall, ToolCall
from core.settings import LLMSettings
from core.store.project import Project
from core.tools.runner import ALLOW_CONVERSATION, DENY
from tests.helpers.cli import cli
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, ToolCalls


def log(project: Path) -> list[ConversationMessage]:
    with Project.open(project, read_only=True) as p:
        conv = p.conversations.list()[0].id
        return p.conversations.load(conv).messages


def results(project: Path) -> dict[str, ConversationMessage]:
    return {m.tool_call_id or "": m for m in log(project) if m.role == "tool"}


def sent_results(server: FakeLLMServer, n: int) -> dict[str, str]:
    """The tool results request `n` carried back to the model."""
    return {m["tool_call_id"]: m["content"] for m in server.requests[n].body["messages"]
            if m["role"] == "tool"}


@pytest.fixture
def project(project_dir: Path) -> Path:
    project_dir.mkdir(parents=True, exist_ok=True)
    (project_dir / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (project_dir / "README.md").write_text("# Calc\nAdds numbers.\n")
    return project_dir


def agent_send(capsys: pytest.CaptureFixture[str], project: Path, server: FakeLLMServer,
               *extra: object, text: str = "fix the add function") -> tuple[int, str, str]:
    return cli(capsys, "send", project, "--new", "--mode", "agent", "--model", MODEL,
               "--api-base", server.url, *extra, text)


def test_agent_reads_lists_searches_edits_and_runs_in_the_project(
        capsys: pytest.CaptureFixture[str], project: Path, llm_server: FakeLLMServer) -> None:
    llm_server.script(
        ToolCalls([("c1", "list_dir", '{"path": "."}'),
                   ("c2", "search_files", '{"pattern": "def add"}'),
                   ("c3", "read_file", '{"path": "calc.py"}')], text="Looking around."),
        ToolCalls([("c4", "edit_file", json.dumps({"path": "calc.py", "old": "return a - b",
                                                   "new": "return a + b"}))]),
        ToolCalls([("c5", "run_shell", json.dumps({
            "command": "python3 -c 'import calc; print(calc.add(2, 3))'"}))]),
        Answer("Fixed: add now returns 5 for 2 and 3."))
    code, out, err = agent_send(capsys, project, llm_server, "--approve", "always")
    assert code == 0, err
    assert out.endswith("Fixed: add now returns 5 for 2 and 3.\n")
    assert (project / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    got = results(project)
    assert set(got) == {"c1", "c2", "c3", "c4", "c5"}
    assert all(m.status == "ok" and m.duration_ms is not None for m in got.values())
    assert "calc.py" in got["c1"].text() and "calc.py:1: def add(a, b):" in got["c2"].text()
    assert got["c5"].exit_code == 0 and "5" in got["c5"].text()
    assert got["c4"].approval == "always"
    # every result went back to the model, in the request right after its call
    assert set(sent_results(llm_server, 1)) == {"c1", "c2", "c3"}
    assert "return a - b" in sent_results(llm_server, 1)["c3"]
    assert "+1 -1" in sent_results(llm_server, 2)["c4"]
    assert "[exit code 0]" in sent_results(llm_server, 3)["c5"]
    assert {t["function"]["name"] for t in llm_server.requests[0].body["tools"]} >= {
        "read_file", "write_file", "edit_file", "run_shell", "manage_todo_list"}
    assert "workbench: tool run_shell python3 -c" in err
    # the marks of calls that started go once their results are in the log
    assert not list((project / ".workbench").rglob(".started-*"))


def test_escapes_are_refused_and_the_model_is_told(capsys: pytest.CaptureFixture[str],
                                                   project: Path, llm_server: FakeLLMServer,
                                                   tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    (project / "link").symlink_to(outside)
    llm_server.script(
        ToolCalls([("c1", "read_file", '{"path": "../outside.txt"}'),
                   ("c2", "read_file", '{"path": "link"}'),
                   ("c3", "write_file", json.dumps({"path": str(outside), "content": "x"}))]),
        Answer("I cannot reach that file."))
    code, _, err = agent_send(capsys, project, llm_server, "--approve", "always")
    assert code == 0, err
    sent = sent_results(llm_server, 1)
    assert all("outside the project folder" in sent[c] for c in ("c1", "c2", "c3"))
    assert "secret" not in json.dumps(llm_server.requests[1].body)
    assert outside.read_text() == "secret"


def test_a_megabyte_of_output_is_offloaded_with_a_head_tail_preview(
        capsys: pytest.CaptureFixture[str], project: Path, llm_server: FakeLLMServer) -> None:
    llm_server.script(ToolCalls([("big", "run_shell", '{"command": "seq 1 170000"}')]),
                      ToolCalls([("more", "read_tool_result",
                                  '{"ref": "big", "offset": 75000, "limit": 1}')]),
                      Answer("done"))
    code, _, err = agent_send(capsys, project, llm_server, "--approve", "always")
    assert code == 0, err
    entry = results(project)["big"]
    assert entry.offload is not None and entry.offload.size > 1_000_000
    assert (project / ".workbench" / entry.offload.path).stat().st_size == entry.offload.size
    preview = sent_results(llm_server, 1)["big"]
    assert preview.startswith("[exit code 0]\n1\n2\n3\n") and preview.rstrip().endswith("170000")
    name = Path(entry.offload.path).stem  # the call's id and a part no other output has
    assert name.startswith("big-") and f'read_tool_result("{name}")' in preview
    assert len(preview) < 10_000
    more = sent_results(llm_server, 2)["more"].splitlines()
    assert more[0].strip() == "75000\t74999" and "offset=75001" in more[-1]


def test_approve_never_writes_nothing_and_tells_the_model(capsys: pytest.CaptureFixture[str],
                                                          project: Path,
                                                          llm_server: FakeLLMServer) -> None:
    llm_server.script(
        ToolCalls([("w", "write_file", '{"path": "new.txt", "content": "x"}'),
                   ("s", "run_shell", '{"command": "touch ran.txt"}'),
                   ("r", "read_file", '{"path": "README.md"}')]),
        Answer("I was not allowed to write."))
    code, out, err = agent_send(capsys, project, llm_server, "--approve", "never")
    assert code == 0, err
    assert not (project / "new.txt").exists() and not (project / "ran.txt").exists()
    got = results(project)
    assert got["w"].status == got["s"].status == "denied" and got["r"].status == "ok"
    assert "approval policy 'never'" in sent_results(llm_server, 1)["w"]
    assert "Adds numbers." in sent_results(llm_server, 1)["r"]


def test_without_a_terminal_the_default_is_never(capsys: pytest.CaptureFixture[str], project: Path,
                                                 llm_server: FakeLLMServer) -> None:
    llm_server.script(ToolCalls([("w", "write_file", '{"path": "new.txt", "content": "x"}')]),
                      Answer("ok"))
    code, _, err = agent_send(capsys, project, llm_server)
    assert code == 0, err
    assert not (project / "new.txt").exists() and results(project)["w"].approval == "never"


def test_chat_mode_cannot_write_even_when_the_model_tries(capsys: pytest.CaptureFixture[str],
                                                          project: Path,
                                                          llm_server: FakeLLMServer) -> None:
    llm_server.script(ToolCalls([("w", "write_file", '{"path": "new.txt", "content": "x"}')]),
                      Answer("ok"))
    code, _, err = cli(capsys, "send", project, "--new", "--model", MODEL, "--api-base",
                       llm_server.url, "--approve", "always", "write it")
    assert code == 0, err
    assert not (project / "new.txt").exists()
    assert "no tool named 'write_file' in chat mode" in sent_results(llm_server, 1)["w"]
    assert {t["function"]["name"] for t in llm_server.requests[0].body["tools"]} == {
        "read_file", "list_dir", "search_files", "read_tool_result"}


def test_the_step_limit_pauses_visibly_and_continue_goes_on(capsys: pytest.CaptureFixture[str],
                                                            project: Path,
                                                            llm_server: FakeLLMServer) -> None:
    llm_server.script(*[ToolCalls([(f"c{n}", "read_file", '{"path": "README.md"}')])
                        for n in range(2)])
    code, _, err = agent_send(capsys, project, llm_server, "--step-limit", "2")
    assert code == 2 and "paused after 2 rounds" in err
    conv = err.split()[1]
    last = log(project)[-1]
    assert last.error is not None and last.error.type == "step_limit"
    llm_server.script(Answer("All read."))
    code, out, err = cli(capsys, "continue", project, "-c", conv, "--model", MODEL,
                         "--api-base", llm_server.url)
    assert code == 0 and out == "All read.\n", err
    sent = llm_server.requests[-1].body["messages"]
    assert sent[-1]["role"] == "tool" and "LLM_ERROR" not in json.dumps(sent)


# --- through the engine: approvals, Stop, crash ------------------------------------------------


def engine_turn(project: Path, server: FakeLLMServer, text: str, answers: list[tuple[str, str]],
                stop_after: float | None = None, mode: str = "agent"
                ) -> tuple[list[object], list[ConversationMessage]]:
    """Run one agent turn, answering approval questions from `answers` (choice, note);
    cancel the turn `stop_after` seconds after the first tool starts."""
    events: list[object] = []
    settings = LLMSettings(model=MODEL, api_base=server.url, auto_retries=0)
    with Project.open(project) as p:
        engine = build_engine(p)
        conv = p.conversations.create("t").id

        async def consume() -> None:
            async for ev in engine.send(conv, text, settings, TurnOptions(mode=mode)):  # type: ignore[arg-type]
                events.append(ev)
                if isinstance(ev, QuestionAsked):
                    choice, note = answers.pop(0)
                    ev.question.answer(choice, note)

        async def go() -> None:
            task = asyncio.create_task(consume())
            if stop_after is not None:
                deadline = time.monotonic() + 30
                while not any(isinstance(e, ToolStarted) for e in events):
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.02)
                await asyncio.sleep(stop_after)
                task.cancel()
            await asyncio.wait_for(task, 60)

        asyncio.run(go())
        return events, p.conversations.load(conv).messages


def test_a_denied_write_carries_the_users_reason_and_allow_for_conversation_sticks(
        project: Path, llm_server: FakeLLMServer) -> None:
    llm_server.script(
        ToolCalls([("w1", "write_file", '{"path": "a.txt", "content": "a"}')]),
        ToolCalls([("w2", "write_file", '{"path": "b.txt", "content": "b"}')]),
        ToolCalls([("w3", "write_file", '{"path": "c.txt", "content": "c"}')]),
        Answer("done"))
    events, history = engine_turn(project, llm_server, "write files",
                                  [(DENY, "use b.txt instead"), (ALLOW_CONVERSATION, "")])
    questions = [e.question for e in events if isinstance(e, QuestionAsked)]
    assert len(questions) == 2  # the third write was allowed by the second answer
    assert questions[0].kind == "approval" and "+++ b/a.txt" in questions[0].detail
    assert not (project / "a.txt").exists()
    assert (project / "b.txt").read_text() == "b" and (project / "c.txt").read_text() == "c"
    by_id = {m.tool_call_id: m for m in history if m.role == "tool"}
    assert by_id["w1"].status == "denied" and "use b.txt instead" in by_id["w1"].text()
    assert [by_id[c].approval for c in ("w1", "w2", "w3")] == ["denied", "conversation",
                                                               "remembered"]
    assert "use b.txt instead" in sent_results(llm_server, 1)["w1"]


def test_the_approval_prompt_names_the_sandbox_for_a_command(project: Path,
                                                             llm_server: FakeLLMServer) -> None:
    llm_server.script(ToolCalls([("s", "run_shell", '{"command": "ls"}')]), Answer("ok"))
    events, _ = engine_turn(project, llm_server, "list", [(DENY, "")])
    detail = next(e.question.detail for e in events if isinstance(e, QuestionAsked))
    assert "$ ls" in detail and "Protection:" in detail


def test_stop_during_a_command_kills_it_and_records_aborted(project: Path,
                                                            llm_server: FakeLLMServer) -> None:
    llm_server.script(ToolCalls([
        # had Stop not killed it, the command would write late.txt two seconds in
        ("s", "run_shell", '{"command": "sleep 2; touch late.txt", "timeout": 60}'),
        ("r", "read_file", '{"path": "README.md"}')]))
    events, history = engine_turn(project, llm_server, "wait", [(ALLOW_CONVERSATION, "")],
                                  stop_after=0.3)
    assert isinstance(events[-1], TurnFinished) and events[-1].status == "stopped"
    tools = [m for m in history if m.role == "tool"]
    assert [(m.tool_call_id, m.status) for m in tools] == [("s", "aborted"), ("r", "aborted")]
    assert "killed" in tools[0].text() and "Not run" in tools[1].text()
    deadline = time.monotonic() + 3  # past the moment a surviving command would write it
    while time.monotonic() < deadline:
        assert not (project / "late.txt").exists()
        time.sleep(0.1)
    assert len(llm_server.requests) == 1  # nothing more was sent after Stop


def test_a_crash_mid_tool_reopens_with_the_call_answered_as_aborted(
        project: Path, llm_server: FakeLLMServer) -> None:
    with Project.open(project) as p:
        conv = p.conversations.create("t").id
        p.conversations.append(conv, ConversationMessage(role="user", content="go"))
        p.conversations.append(conv, ConversationMessage(role="assistant", tool_calls=[
            ToolCall(id="lost", function=FunctionCall(name="run_shell",
                                                      arguments='{"command": "make"}'))]))
    leftover = project / ".workbench" / "tool-results" / conv / ".running-lost"
    leftover.parent.mkdir(parents=True, exist_ok=True)
    leftover.write_text("half of what make printed")
    llm_server.script(Answer("Understood."))
    settings = LLMSettings(model=MODEL, api_base=llm_server.url, auto_retries=0)
    with Project.open(project) as p:
        engine = build_engine(p)

        async def go() -> list[object]:
            return [e async for e in engine.send(conv, "what happened?", settings,
                                                 TurnOptions(mode="agent"))]
        events = asyncio.run(go())
        history = p.conversations.load(conv).messages
    assert [m.role for m in history] == ["user", "assistant", "tool", "user", "assistant"]
    assert history[2].tool_call_id == "lost" and history[2].status == "aborted"
    assert not leftover.exists()
    assert isinstance(events[0], EntryAppended) and events[0].message.status == "aborted"
    sent = llm_server.requests[0].body["messages"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "user"]


def test_bad_input_from_the_model_gives_clear_results_and_the_turn_goes_on(
        capsys: pytest.CaptureFixture[str], project: Path, llm_server: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("core.tools.shell.MAX_OUTPUT_BYTES", 1 * 2**20)
    (project / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    with open(project / "huge.log", "wb") as f:
        f.truncate(500 * 2**20)
    llm_server.script(
        ToolCalls([("bin", "read_file", '{"path": "logo.png"}'),
                   ("huge", "read_file", '{"path": "huge.log"}'),
                   ("json", "read_file", '{"path": "README.md"'),
                   ("made", "teleport", '{"to": "mars"}'),
                   ("args", "read_file", '{"path": "README.md", "lines": 3}'),
                   ("ok", "read_file", '{"path": "README.md"}')]),
        ToolCalls([("never", "run_shell", '{"command": "sleep 600", "timeout": 1}'),
                   ("endless", "run_shell", '{"command": "yes y", "timeout": 60}')]),
        Answer("Done despite the trouble."))
    code, out, err = agent_send(capsys, project, llm_server, "--approve", "always")
    assert code == 0 and out.endswith("Done despite the trouble.\n"), err
    first, second = sent_results(llm_server, 1), sent_results(llm_server, 2)
    assert "PNG image" in first["bin"] and "huge.log is 500 MB: larger than" in first["huge"]
    assert "not valid JSON" in first["json"] and "no tool named 'teleport'" in first["made"]
    assert "lines" in first["args"] and "Adds numbers." in first["ok"]
    assert "timed out after 1 s" in second["never"]
    assert "printed more than 1 MB" in second["endless"]
    statuses = {k: m.status for k, m in results(project).items()}
    assert statuses == {"bin": "error", "huge": "error", "json": "error", "made": "error",
                        "args": "error", "ok": "ok", "never": "error", "endless": "error"}


def test_approve_ask_reads_the_answer_from_the_terminal(project: Path,
                                                        llm_server: FakeLLMServer) -> None:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    llm_server.script(ToolCalls([("w", "write_file", '{"path": "a.txt", "content": "a"}')]),
                      ToolCalls([("s", "run_shell", '{"command": "touch b.txt"}')]),
                      Answer("ok"))
    proc = subprocess.run(
        [sys.executable, "-m", "app", "send", str(project), "--new", "--mode", "agent",
         "--model", MODEL, "--api-base", llm_server.url, "--approve", "ask", "go"],
        input="o\nd: not now\n", capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)}, cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert "+++ b/a.txt" in proc.stderr and "$ touch b.txt" in proc.stderr
    assert (project / "a.txt").read_text() == "a" and not (project / "b.txt").exists()
    assert "not now" in sent_results(llm_server, 2)["s"]


def test_the_offload_threshold_and_step_limit_come_from_the_settings(
        capsys: pytest.CaptureFixture[str], project: Path, llm_server: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_TOOL_OUTPUT_TOKENS", "100")
    (project / ".workbench").mkdir(exist_ok=True)
    (project / ".workbench" / "project.json").write_text(json.dumps(
        {"schema_version": 1, "settings": {"step_limit": 1}}))
    llm_server.script(ToolCalls([("seq", "run_shell", '{"command": "seq 1 300"}')]))
    code, _, err = agent_send(capsys, project, llm_server, "--approve", "always")
    assert code == 2 and "paused after 1 round of tool calls" in err
    assert results(project)["seq"].offload is not None  # 300 lines > 100 tokens
    monkeypatch.setenv("WORKBENCH_TOOL_OUTPUT_TOKENS", "lots")
    code, _, err = agent_send(capsys, project, llm_server)
    assert code == 1 and "the tool output limit from the environment" in err


def test_an_edit_that_cannot_apply_is_answered_without_asking(project: Path,
                                                              llm_server: FakeLLMServer) -> None:
    llm_server.script(ToolCalls([("e", "edit_file", json.dumps(
        {"path": "calc.py", "old": "return a * b", "new": "return a + b"}))]), Answer("ok"))
    events, history = engine_turn(project, llm_server, "edit", [])
    assert not any(isinstance(e, QuestionAsked) for e in events)
    result = next(m for m in history if m.role == "tool")
    assert result.status == "error" and "not found in calc.py" in result.text()


def test_a_page_of_an_offloaded_output_is_never_offloaded_again(
        capsys: pytest.CaptureFixture[str], project: Path, llm_server: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_TOOL_OUTPUT_TOKENS", "100")
    llm_server.script(ToolCalls([("seq", "run_shell", '{"command": "seq 1 300"}')]),
                      ToolCalls([("page", "read_tool_result", '{"ref": "seq", "limit": 300}')]),
                      Answer("read it all"))
    code, _, err = agent_send(capsys, project, llm_server, "--approve", "always")
    assert code == 0, err
    got = results(project)
    assert got["seq"].offload is not None and got["page"].offload is None
    assert "300\t299" in sent_results(llm_server, 2)["page"]


def test_workbench_agents_lists_them_and_says_what_is_wrong(capsys: pytest.CaptureFixture[str],
                                                            project: Path) -> None:
    agents = project / ".workbench" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.json").write_text(json.dumps({
        "name": "Reviewer", "instructions": "You review code; you never change files.",
        "tools": ["read_file", "search_files"], "model": "gpt-4o"}))
    (agents / "bad.json").write_text(json.dumps({"name": "Bad", "tools": ["teleport"]}))
    with Project.open(project):
        pass  # a project folder
    code, out, err = cli(capsys, "agents", project)
    assert code == 0 and "Reviewer\n" in out  # a cloned project's agent: its model unused
    assert "reviewer.json: its model gpt-4o is not used until you trust the project" in err
    assert cli(capsys, "trust", project, "--yes")[0] == 0
    code, out, err = cli(capsys, "agents", project)
    assert code == 0
    assert out.splitlines()[0] == "Default" and "every tool of the mode" in out
    assert "Reviewer  model gpt-4o\n  tools: read_file, search_files" in out
    assert "bad.json: tools: " in err and "teleport" in err
    assert "commands run with:" in err


def test_a_model_without_tool_support_still_chats(capsys: pytest.CaptureFixture[str], project: Path,
                                                  llm_server: FakeLLMServer) -> None:
    from tests.helpers.fake_llm import HttpError

    llm_server.script(HttpError(400, "registry.ollama.ai/library/gemma:2b does not support "
                                     "tools", type="invalid_request_error"),
                      Answer("Hello without tools."), Answer("Still fine."))
    code, out, err = cli(capsys, "send", project, "--new", "--model", MODEL, "--api-base",
                         llm_server.url, "hi")
    assert code == 0 and out == "Hello without tools.\n", err
    assert "does not accept tools" in err
    assert "tools" in llm_server.requests[0].body and "tools" not in llm_server.requests[1].body
