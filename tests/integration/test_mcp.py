"""MCP servers as tools, through the real parts: a FastMCP server over stdio (and one over
streamable HTTP on loopback), an agent turn through the loopback LLM server, the log."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from core.model import ConversationMessage
from core.store.project import Project
from tests.helpers.cli import cli
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, RecordedRequest, ToolCalls

ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "tests.helpers.mcp_server"]


def configure(project: Path, trusted: bool = True, **servers: dict[str, Any]) -> None:
    """The project's `.workbench/mcp.json`; trusted by the user (as `workbench trust` does)
    unless `trusted` is False."""
    (project / ".workbench").mkdir(parents=True, exist_ok=True)
    (project / ".workbench" / "mcp.json").write_text(json.dumps({"mcpServers": servers}),
                                                     encoding="utf-8")
    if trusted:
        with Project.open(project, read_only=True) as p:
            p.trust_now()


def configure_user(**servers: dict[str, Any]) -> None:
    """The user's own mcp.json, in the config folder (outside every project)."""
    from core.settings import config_dir

    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "mcp.json").write_text(json.dumps({"mcpServers": servers}),
                                           encoding="utf-8")


def stdio(**extra: object) -> dict[str, Any]:
    return {"command": SERVER[0], "args": SERVER[1:], "cwd": str(ROOT), **extra}


@pytest.fixture
def project(project_dir: Path) -> Path:
    project_dir.mkdir(parents=True, exist_ok=True)
    return project_dir


def agent(capsys: pytest.CaptureFixture[str], project: Path, server: FakeLLMServer, *extra: object,
          text: str = "use the tools") -> tuple[int, str, str]:
    return cli(capsys, "send", project, "--new", "--mode", "agent", "--model", MODEL,
               "--api-base", server.url, *extra, text)


def log(project: Path) -> list[ConversationMessage]:
    with Project.open(project, read_only=True) as p:
        conv = p.conversations.list()[0].id
        return p.conversations.load(conv).messages


def tool_names(request: RecordedRequest) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools", [])]


def test_a_stdio_servers_tools_are_listed_with_their_cost(capsys: pytest.CaptureFixture[str],
                                                          project: Path) -> None:
    configure(project, calc=stdio())
    code, out, err = cli(capsys, "mcp", project)
    assert code == 0, err
    assert "calc  " in out and "ready with 6 tools" in out
    lines = {line.split()[0]: line for line in out.splitlines() if "tokens" in line}
    assert set(lines) == {"calc__add", "calc__crash", "calc__echo", "calc__env_token",
                          "calc__hang", "calc__shout"}
    assert "(read-only)" in lines["calc__echo"] and "(read-only)" not in lines["calc__add"]
    assert 20 < int(lines["calc__add"].split()[1].replace(",", "")) < 200


def test_an_agent_calls_a_server_tool_with_approval_and_reads_its_result(
        capsys: pytest.CaptureFixture[str], project: Path, llm_server: FakeLLMServer) -> None:
    configure(project, calc=stdio())
    llm_server.script(ToolCalls([("c1", "calc__add", '{"a": 2, "b": 40}')]),
                      Answer("It is 42."))
    code, out, err = agent(capsys, project, llm_server, "--approve", "always")
    assert code == 0, err
    first = llm_server.requests[0]
    assert tool_names(first)[:3] == ["read_file", "list_dir", "search_files"]
    offered = [n for n in tool_names(first) if n.startswith("calc__")]
    assert offered == sorted(offered) and "calc__add" in offered  # a fixed order
    result = next(m for m in log(project) if m.role == "tool")
    assert (result.tool_name, result.content, result.status) == ("calc__add", "42", "ok")
    back = [m for m in llm_server.requests[1].body["messages"] if m["role"] == "tool"]
    assert back[0]["content"] == "42"
    assert "workbench: tool calc__add" in err


def test_without_approval_the_call_is_denied_and_nothing_runs(capsys: pytest.CaptureFixture[str],
                                                              project: Path,
                                                              llm_server: FakeLLMServer) -> None:
    configure(project, calc=stdio())
    llm_server.script(ToolCalls([("c1", "calc__shout", '{"text": "hi"}')]), Answer("ok"))
    code, _, err = agent(capsys, project, llm_server, "--approve", "never")
    result = next(m for m in log(project) if m.role == "tool")
    assert result.status == "denied" and "HI" not in str(result.content)


def test_a_read_only_tool_runs_without_asking_only_where_the_user_allows_it(
        capsys: pytest.CaptureFixture[str], project: Path, llm_server: FakeLLMServer) -> None:
    configure_user(calc=stdio(autoApproveReadOnly=True))
    llm_server.script(ToolCalls([("c1", "calc__echo", '{"text": "hi"}'),
                                 ("c2", "calc__shout", '{"text": "hi"}')]), Answer("ok"))
    agent(capsys, project, llm_server, "--approve", "never")
    results = {m.tool_name: m for m in log(project) if m.role == "tool"}
    assert results["calc__echo"].status == "ok" and results["calc__echo"].content == "hi"
    assert results["calc__shout"].status == "denied"  # not marked read-only: asks


def test_invalid_arguments_are_answered_without_a_call(capsys: pytest.CaptureFixture[str],
                                                       project: Path,
                                                       llm_server: FakeLLMServer) -> None:
    configure(project, calc=stdio())
    llm_server.script(ToolCalls([("c1", "calc__add", '{"a": "two", "b": 40}')]), Answer("ok"))
    agent(capsys, project, llm_server, "--approve", "always")
    result = next(m for m in log(project) if m.role == "tool")
    assert result.status == "error" and "Invalid arguments" in str(result.content)
    assert "'two' is not of type 'integer'" in str(result.content)


def test_a_server_that_crashes_mid_call_is_a_result_and_the_turn_ends(
        capsys: pytest.CaptureFixture[str], project: Path, llm_server: FakeLLMServer) -> None:
    configure(project, calc=stdio())
    llm_server.script(ToolCalls([("c1", "calc__crash", "{}")]),
                      Answer("The tool failed; sorry."))
    code, out, err = agent(capsys, project, llm_server, "--approve", "always")
    assert code == 0, err
    result = next(m for m in log(project) if m.role == "tool")
    assert isinstance(result.content, str)
    assert result.status == "error" and "failed during the call to 'crash'" in result.content
    assert out.strip() == "The tool failed; sorry."


def test_a_server_that_hangs_is_given_up_after_its_timeout(capsys: pytest.CaptureFixture[str],
                                                           project: Path,
                                                           llm_server: FakeLLMServer) -> None:
    configure(project, calc=stdio(timeout=1.5))
    llm_server.script(ToolCalls([("c1", "calc__hang", "{}")]), Answer("done"))
    started = time.monotonic()
    code, _, err = agent(capsys, project, llm_server, "--approve", "always")
    assert code == 0, err
    assert time.monotonic() - started < 60  # the deadline: the turn does not hang
    result = next(m for m in log(project) if m.role == "tool")
    assert isinstance(result.content, str)
    assert result.status == "error" and "did not answer 'hang' within 1.5 s" in result.content
    assert "the server is being started again" in result.content


def test_a_stuck_server_is_started_again_and_answers_the_next_call(tmp_path: Path) -> None:
    import asyncio

    from core.mcp import McpHub
    from core.mcp_state import ServerConfig

    hub = McpHub({"calc": ServerConfig.model_validate(stdio(timeout=1.0))}, [], tmp_path)

    async def go() -> tuple[tuple[str, bool], tuple[str, bool], str]:
        await hub.start()
        first = await hub.call("calc", "hang", {})
        deadline = asyncio.get_running_loop().time() + 60
        while hub.servers["calc"].status != "ready" and \
                asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        second = await hub.call("calc", "add", {"a": 1, "b": 2})
        line = hub.servers["calc"].line()
        await hub.close()
        return first, second, line

    first, second, line = asyncio.run(go())
    assert first[1] and "started again" in first[0]
    assert second == ("3", False) and line == "ready with 6 tools"


def test_an_unreachable_http_server_says_why(capsys: pytest.CaptureFixture[str],
                                             project: Path) -> None:
    configure(project, remote={"url": f"http://127.0.0.1:{free_port()}/mcp"})
    code, out, _ = cli(capsys, "mcp", project)
    assert code == 1 and "remote" in out and "failed: " in out
    assert "cancel scope" not in out


def test_a_server_that_cannot_start_is_a_state_and_the_turn_goes_on(
        capsys: pytest.CaptureFixture[str], project: Path, llm_server: FakeLLMServer) -> None:
    configure(project, broken={"command": "/nonexistent/mcp-server"}, calc=stdio())
    code, out, err = cli(capsys, "mcp", project)
    assert code == 1 and "broken" in out and "failed: " in out
    llm_server.script(Answer("fine"))
    code, _, err = agent(capsys, project, llm_server)
    assert code == 0, err
    names = tool_names(llm_server.requests[0])
    assert "calc__add" in names and not any(n.startswith("broken__") for n in names)


def test_secrets_in_env_never_reach_the_log(capsys: pytest.CaptureFixture[str], project: Path,
                                            llm_server: FakeLLMServer) -> None:
    from core.settings import config_dir

    token = "mcp-secret-0123456789"
    config_dir().mkdir(parents=True, exist_ok=True)  # the user's own file, outside the project
    (config_dir() / "mcp.json").write_text(json.dumps(
        {"mcpServers": {"calc": stdio(env={"MCP_TOKEN": token})}}), encoding="utf-8")
    llm_server.script(ToolCalls([("c1", "calc__env_token", "{}")]), Answer("ok"))
    agent(capsys, project, llm_server, "--approve", "always")
    logged = "".join(p.read_text(encoding="utf-8", errors="replace")
                     for p in (project / ".workbench").rglob("*.jsonl"))
    assert "token is " in logged and token not in logged


def test_switching_a_tool_off_removes_exactly_its_schema(capsys: pytest.CaptureFixture[str],
                                                         project: Path,
                                                         llm_server: FakeLLMServer) -> None:
    configure(project, calc=stdio())
    llm_server.script(Answer("one"), Answer("two"))
    agent(capsys, project, llm_server)
    with Project.open(project) as p:
        conv = p.conversations.list()[0].id
        p.conversations.update_meta(conv, tools_off=["calc__hang"])
    code, _, err = cli(capsys, "send", project, "-c", conv, "--mode", "agent", "--model",
                       MODEL, "--api-base", llm_server.url, "again")
    assert code == 0, err
    before, after = (r.body["tools"] for r in llm_server.requests[-2:])
    assert [t for t in before if t["function"]["name"] != "calc__hang"] == after
    assert len(after) == len(before) - 1


def test_the_context_command_counts_the_servers_tools_before_they_start(
        capsys: pytest.CaptureFixture[str], project: Path, llm_server: FakeLLMServer) -> None:
    configure(project, calc=stdio())
    llm_server.script(Answer("one"))
    agent(capsys, project, llm_server)  # started once: the tools are known from then on
    conv = log(project)[0]
    with Project.open(project, read_only=True) as p:
        conv_id = p.conversations.list()[0].id
    code, out, _ = cli(capsys, "context", project, "-c", conv_id, "--mode", "agent",
                       "--model", MODEL, "--json")
    assert code == 0 and conv.role == "user"
    assert json.loads(out)["tools"] == llm_server.requests[0].body["tools"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_streamable_http_server_on_loopback(capsys: pytest.CaptureFixture[str], project: Path,
                                              llm_server: FakeLLMServer) -> None:
    port = free_port()
    proc = subprocess.Popen([*SERVER, "http", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.2)
        configure(project, remote={"url": f"http://127.0.0.1:{port}/mcp"})
        code, out, err = cli(capsys, "mcp", project)
        assert code == 0 and "ready with 6 tools" in out, out + err
        llm_server.script(ToolCalls([("c1", "remote__add", '{"a": 1, "b": 2}')]),
                          Answer("3"))
        code, _, err = agent(capsys, project, llm_server, "--approve", "always")
        assert code == 0, err
        result = next(m for m in log(project) if m.role == "tool")
        assert (result.tool_name, result.content) == ("remote__add", "3")
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_tool_with_an_unusable_schema_is_left_out_and_said(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from core.mcp import McpHub
    from core.mcp_state import ServerConfig, ServerState

    hub = McpHub({"s": ServerConfig(command="x")}, [], None)
    state = ServerState("s", ServerConfig(command="x"))
    listed = [SimpleNamespace(name="good", description="ok", annotations=None,
                              inputSchema={"type": "object", "properties": {}}),
              SimpleNamespace(name="bad", description="", annotations=None,
                              inputSchema={"type": "string"}),
              SimpleNamespace(name="worse", description="", annotations=None,
                              inputSchema={"type": "object", "properties": {"a": {"type": 7}}})]
    tools, skipped = hub._infos(state, listed)
    assert [t.name for t in tools] == ["s__good"]
    assert skipped[0] == "tool 'bad' left out: its input schema is not a JSON object schema"
    assert skipped[1].startswith("tool 'worse' left out: its input schema is invalid")


def test_a_broken_configuration_says_what_is_wrong_and_keeps_the_rest(tmp_path: Path) -> None:
    from core.mcp import load_config

    good = tmp_path / "global.json"
    good.write_text(json.dumps({"mcpServers": {
        "a": {"command": "x"}, "b": {"url": "http://127.0.0.1:1/mcp"},
        "both": {"command": "x", "url": "http://h/mcp"}, "neither": {"args": ["y"]},
        "bad name!": {"command": "x"}, "typed": {"command": "x", "args": "not a list"}}}),
        encoding="utf-8")
    broken = tmp_path / "project.json"
    broken.write_text("{not json", encoding="utf-8")
    servers, problems = load_config([good, broken, tmp_path / "missing.json"])
    assert list(servers) == ["a", "b"]
    text = "\n".join(problems)
    assert "'both'" in text and "'neither'" in text and "needs either a command or a url" in text
    assert "'bad name!'" in text and "letters, digits" in text
    assert "'typed'" in text and "args" in text
    assert f"{broken} could not be read" in text
