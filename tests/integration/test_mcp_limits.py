"""MCP servers that misbehave, through the real parts (a FastMCP server over stdio, the loopback
LLM server, the CLI): names that would clash, a server that does not speak MCP, a result past
the limit, a call after a time-out, a restart under way when the project closes."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from core.context.service import ProjectContext
from core.mcp import McpHub
from core.mcp_state import ServerConfig
from core.settings import LLMSettings
from tests.helpers.cli import cli
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, ToolCalls
from tests.integration.test_keys_written import probe
from tests.integration.test_mcp import ROOT, configure, log

PROBE = [sys.executable, "-m", "tests.helpers.mcp_probe"]


def named(server_id: str, tool: str) -> dict[str, Any]:
    return probe(args=["-m", "tests.helpers.mcp_probe", "named", tool],
                 env={"SERVER_ID": server_id})


@pytest.fixture
def project(project_dir: Path) -> Path:
    project_dir.mkdir(parents=True, exist_ok=True)
    return project_dir


def test_server_names_that_could_give_one_tool_name_are_refused(capsys: pytest.CaptureFixture[str],
                                                                project: Path,
                                                                llm_server: FakeLLMServer) -> None:
    configure(project, trusted=True, **{"a": named("A", "b__c"), "a__b": named("AB", "c"),
                                        "x_": named("X_", "y")})
    code, out, err = cli(capsys, "mcp", project)
    assert "'a__b'" in err + out and "may not hold '__'" in err + out
    assert "'x_'" in err + out and "end in '_'" in err + out
    assert out.count("a__b__c") == 1 and "x___y" not in out
    llm_server.script(ToolCalls([("m1", "a__b__c", "{}")]), Answer("done"))
    code, _, err = cli(capsys, "send", project, "--new", "--mode", "agent", "--model", MODEL,
                       "--api-base", llm_server.url, "--approve", "always", "go")
    assert code == 0, err
    names = [t["function"]["name"] for t in llm_server.requests[0].body["tools"]]
    assert names.count("a__b__c") == 1
    result = next(m for m in log(project) if m.role == "tool")
    assert result.content == "server A ran"


def _cached(project_state: Path, servers: dict[str, dict[str, Any]],
            tools: dict[str, list[dict[str, Any]]]
            ) -> None:
    (project_state / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    cache = {name: {"config": ServerConfig.model_validate(servers[name]).fingerprint(),
                    "tools": [{"schema": schema, "read_only": False, **t} for t in listed]}
             for name, listed in tools.items()}
    (project_state / "mcp-tools.json").write_text(json.dumps(cache))


def test_a_server_is_switched_off_by_its_name_and_a_kept_list_names_its_own_tools(
        project_dir: Path) -> None:
    from core.store.project import Project

    with Project.open(project_dir) as p:
        entry, other = {"command": "true"}, {"command": "true", "args": ["x"]}
        _cached(p.state, {"team__docs": entry, "team-docs": entry, "a": other},
                {"team__docs": [{"server": "team__docs", "tool": "search",
                                 "name": "team__docs__search", "description": "d"}],
                 "team-docs": [{"server": "team-docs", "tool": "search",
                                "name": "team-docs__search", "description": "d"}],
                 "a": [{"server": "a", "tool": "b", "name": "a__b", "description": "d"},
                       {"server": "a", "tool": "x", "name": "team-docs__x",  # not its own
                        "description": "planted"}]})
        p.review_trust()
        p.trust_now()  # the user trusts these servers
        context = ProjectContext.for_project(p)
        conv = p.conversations.create().id
        s = LLMSettings(model="openai/gpt-4o-mini", max_output_tokens=256)

        def offered() -> list[str]:
            return [t["function"]["name"] for t in context.build(conv, [], s, "agent").tools
                    if "__" in t["function"]["name"]]

        assert offered() == ["a__b", "team-docs__search"]  # team__docs: not started
        assert context.mcp is not None
        assert any("'team__docs'" in problem for problem in context.mcp.problems)
        p.conversations.update_meta(conv, tools_off=["team-docs__*"])
        assert offered() == ["a__b"]


def test_a_server_that_does_not_speak_mcp_is_one_sentence_without_a_traceback(
        capsys: pytest.CaptureFixture[str], project: Path) -> None:
    configure(project, noisy=probe(args=["-m", "tests.helpers.mcp_probe", "garbage"]))
    code, out, err = cli(capsys, "mcp", project)
    assert "Traceback" not in out + err and "BrokenResourceError" not in out + err
    assert "failed: it does not speak MCP (it wrote 'Starting the probe server on port " \
           "8080...' where a JSON-RPC message belongs)" in out


def test_a_message_past_the_limit_stops_the_server(tmp_path: Path) -> None:
    from mcp import ClientSession

    from core.mcp_stdio import Launch, Said, stdio_streams

    said = Said()

    async def go() -> str:
        launch = Launch(PROBE[0], PROBE[1:], None, str(ROOT))
        async with stdio_streams(launch, tmp_path / "probe.log", said, max_message=2**20) \
                as streams, ClientSession(*streams) as session:
            await asyncio.wait_for(session.initialize(), 30)
            try:
                await asyncio.wait_for(session.call_tool("big", {"mb": 3}), 60)
            except Exception as e:  # the connection it closed
                return str(e)
            return "answered"

    assert asyncio.run(go()) != "answered"
    assert said.why == "it sent a message larger than 1 MB, the limit; it was stopped"


def test_a_large_result_is_kept_on_disk_whole_and_a_huge_one_stops_at_the_limit(
        tmp_path: Path) -> None:
    from core.tools.base import ToolContext
    from core.tools.mcp_tools import output

    state = tmp_path / ".workbench"
    ctx = ToolContext(root=tmp_path, state=state, conv_id="c1", call_id="call1")
    parts = ["y" * 99 + "\n"] * 30_000  # 3 MB
    kept = output(parts, False, ctx)
    assert kept.file is not None and kept.header == ""
    assert kept.file.stat().st_size == 3_000_000 + len(parts) - 1  # joined by line ends
    cut = output(parts, False, ctx, limit=2**20)
    assert cut.file is not None and cut.file.stat().st_size <= 2**20
    assert cut.header == "[the result is larger than 1 MB; only its first 1 MB are kept]\n"


def test_a_call_after_a_time_out_is_told_the_server_is_restarting(
        capsys: pytest.CaptureFixture[str], project: Path, llm_server: FakeLLMServer) -> None:
    configure(project, probe=probe(timeout=1.5))
    llm_server.script(ToolCalls([("h1", "probe__hang", "{}")]),
                      ToolCalls([("t1", "probe__token", "{}")]), Answer("done"))
    code, _, err = cli(capsys, "send", project, "--new", "--mode", "agent", "--model", MODEL,
                       "--api-base", llm_server.url, "--approve", "always", "go")
    assert code == 0, err
    results = {m.tool_call_id: str(m.content) for m in log(project) if m.role == "tool"}
    assert "did not answer 'hang' within 1.5 s" in results["h1"]
    assert "no tool named" not in results["t1"]
    assert "The MCP server 'probe' is restarting" in results["t1"] or \
        results["t1"] == "token=(none)"  # started again already


def _probe_processes() -> list[int]:
    me, found = os.getpid(), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            ppid = int((proc / "stat").read_text().split(") ")[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"tests.helpers.mcp_probe" in cmd and ppid == me:
            found.append(int(proc.name))
    return found


def test_a_restart_under_way_does_not_outlive_the_hubs_close(tmp_path: Path) -> None:
    hub = McpHub({"probe": ServerConfig.model_validate(probe(timeout=1.0))}, [], tmp_path)

    async def go() -> tuple[str, bool, str]:
        await hub.start()
        first, _ = await hub.call("probe", "hang", {})  # times out: a restart is started
        await hub.close()  # the project closes right then
        restarts_left = bool(hub._restarts) or not all(f.done() for f in hub._restarts)
        return first, restarts_left, hub.servers["probe"].status

    first, restarts_left, status = asyncio.run(go())
    assert "being started again" in first
    assert not restarts_left and status != "ready"
    deadline = time.monotonic() + 15  # the hung server ends with the close (reaped soon)
    while _probe_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _probe_processes() == []


def test_a_servers_secrets_are_its_secret_named_values_of_any_length(tmp_path: Path) -> None:
    from core.redact import redact

    entry = {"command": "true", "env": {"MCP_TOKEN": "abc1", "NODE_ENV": "test",
                                        "ROOT": "/some/long/path"}}
    web = {"url": "http://127.0.0.1:9/mcp", "headers": {"X-API-Key": "k3y", "Accept": "*/*"}}
    hub = McpHub({"a": ServerConfig.model_validate(entry),
                  "w": ServerConfig.model_validate(web)}, [], tmp_path)
    assert sorted(hub.secrets()) == ["/some/long/path", "abc1", "k3y"]
    assert redact("token abc1, in /some/long/path, key k3y; a test of */*") == \
        "token [redacted], in [redacted], key [redacted]; a test of */*"
