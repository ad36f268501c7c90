"""No key the app knows is written, sent or printed, on the paths around the log writer: an MCP
tool's description, its server's stderr and its short `env` values, AGENTS.md, an import, a
title (the user's and the title model's), an export, the list, the window's drafts, crash.log,
the streamed answer on stdout. Real CLI, real MCP server, real loopback LLM server; after each
test every file the app wrote (the project's `.workbench/`, the config, state, data and cache
folders) is read for the keys."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication

from core.model import ConversationMessage
from core.store.project import Project
from tests.helpers.cli import cli
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, ToolCalls
from tests.integration.test_mcp import ROOT, configure

SHAPED = "sk-proj-Q7f3Lm9Xa2Vd8Kp4Rt6Wz1Bc5Ng0"  # shaped like a provider's key
IN_USE = "Zq8ms9Lk2Pw7Qx4Tr6Yv3Hn"  # shaped like nothing: a token of this process's environment
SHORT = "short12"  # an MCP server's token of 7 characters
LONG = "longtokenvalue-PROBE-0123456789"  # another, in a variable not named like a secret
KEYS = (SHAPED, IN_USE, SHORT, LONG)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_SERVICE_TOKEN", IN_USE)


@pytest.fixture
def project(project_dir: Path) -> Path:
    project_dir.mkdir(parents=True, exist_ok=True)
    return project_dir


def probe(**extra: object) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "tests.helpers.mcp_probe"],
            "cwd": str(ROOT), **extra}


def send(capsys: pytest.CaptureFixture[str], project: Path, server: FakeLLMServer, *extra: object,
         text: str = "go") -> tuple[int, str, str]:
    return cli(capsys, "send", project, "--model", MODEL, "--api-base", server.url, *extra,
               text)


def written(project: Path, home: Path) -> dict[str, bytes]:
    """Every file the app wrote: the project's `.workbench/`, the config, state, data and
    cache folders (not the user's own mcp.json)."""
    files = [*(project / ".workbench").rglob("*"), *home.rglob("*")]
    mine = project / ".workbench" / "mcp.json"  # the user's, with the servers' tokens
    return {str(p): p.read_bytes() for p in files
            if p.is_file() and not p.is_symlink() and p != mine}


def assert_no_key(project: Path, home: Path, server: FakeLLMServer, *printed: str) -> None:
    for path, data in written(project, home).items():
        for key in KEYS:
            assert key.encode() not in data, f"{key[:8]}… written to {path}"
    for n, request in enumerate(server.requests):
        body = json.dumps(request.body)
        for key in KEYS:
            assert key not in body, f"{key[:8]}… sent in request {n}"
    for text in printed:
        for key in KEYS:
            assert key not in text, f"{key[:8]}… printed"


def test_an_mcp_servers_description_stderr_and_short_token_are_never_written(
        capsys: pytest.CaptureFixture[str], project: Path, llm_server: FakeLLMServer, keys: None,
        isolated_env: Path) -> None:
    configure(project, probe=probe(env={"MCP_TOKEN": SHORT, "LONG_SETTING": LONG,
                                        "LONG_TOKEN": LONG, "PRINT_ENV": "1",
                                        "DESCRIBE": f"Use {IN_USE} for it."}))
    llm_server.script(ToolCalls([("t1", "probe__token", "{}")]), Answer("done"),
                      ToolCalls([("t2", "probe__token", "{}")]), Answer("again"))
    code, out, err = send(capsys, project, llm_server, "--new", "--mode", "agent",
                          "--approve", "always")
    assert code == 0, err
    code, out2, err2 = cli(capsys, "mcp", project)
    assert code == 0, err2
    tools = llm_server.requests[0].body["tools"]
    described = next(t["function"]["description"] for t in tools
                     if t["function"]["name"] == "probe__token")
    assert "Use [redacted] for it." in described  # said where it was
    result = next(m for m in _log(project) if m.role == "tool")
    assert result.content == "token=[redacted]"  # 7 characters, as a word of its own
    log = (project / ".workbench" / "mcp-logs" / "probe.log").read_text()
    assert '"MCP_TOKEN": "[redacted]"' in log and '"LONG_TOKEN": "[redacted]"' in log
    assert_no_key(project, isolated_env, llm_server, out, err, out2, err2)


def test_agents_md_an_import_titles_an_export_and_the_list_hold_no_key(
        capsys: pytest.CaptureFixture[str], project: Path, llm_server: FakeLLMServer, keys: None,
        isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "AGENTS.md").write_text(f"# Build\nUse key {SHAPED} for the staging API.\n")
    session = tmp_path / "session.json"
    session.write_text(json.dumps({"messages": [
        {"role": "user", "content": f"imported key {SHAPED}"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "c1", "type": "function", "function": {
                "name": "run_shell", "arguments": json.dumps({"command": f"echo {IN_USE}"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": f"OPENAI_API_KEY={SHAPED}\n"},
        {"role": "assistant", "content": f"sure {IN_USE}"}]}))
    code, out, err = cli(capsys, "import", project, session, "--title", f"imported {IN_USE}")
    assert code == 0, err
    imported = out.strip().splitlines()[-1]
    llm_server.script(Answer("noted"))
    code, out2, err2 = send(capsys, project, llm_server, "-c", imported)
    assert code == 0, err2
    llm_server.script(Answer("ok"))
    code, out3, err3 = send(capsys, project, llm_server, "--new", "--title", f"title {SHAPED}")
    assert code == 0, err3
    monkeypatch.setenv("WORKBENCH_AUTO_TITLE", "1")
    llm_server.script(Answer("fine"), Answer(f"Title with {SHAPED} inside"))
    code, out4, err4 = send(capsys, project, llm_server, "--new")
    assert code == 0, err4
    assert "workbench: titled “Title with [redacted] inside”" in err4
    system = llm_server.requests[0].body["messages"][0]["content"]
    assert "Use key [redacted] for the staging API." in str(system)
    printed = [out, err, out2, err2, out3, err3, out4, err4]
    for fmt in ("markdown", "openai", "jsonl"):
        code, exported, e = cli(capsys, "export", project, "-c", imported, "--format", fmt)
        assert code == 0 and "[redacted]" in exported, e
        printed.append(exported)
    code, listed, e = cli(capsys, "list", project)
    assert code == 0 and "[redacted]" in listed, e
    assert_no_key(project, isolated_env, llm_server, *printed, listed)


def test_an_agents_instructions_are_sent_without_a_key(capsys: pytest.CaptureFixture[str],
                                                       project: Path, llm_server: FakeLLMServer,
                                                       keys: None, isolated_env: Path) -> None:
    agents = project / ".workbench" / "agents"
    agents.mkdir(parents=True)
    (agents / "deployer.json").write_text(json.dumps(
        {"name": "Deployer", "instructions": f"Deploy with the token {IN_USE}."}))
    llm_server.script(Answer("ok"))
    code, out, err = send(capsys, project, llm_server, "--new", "--mode", "agent",
                          "--agent", "Deployer")
    assert code == 0, err
    system = str(llm_server.requests[0].body["messages"][0]["content"])
    assert "Deploy with the token [redacted]." in system
    (agents / "deployer.json").unlink()  # the user's own file: only what the app wrote
    assert_no_key(project, isolated_env, llm_server, out, err)


def test_the_streamed_answer_is_printed_without_a_key_split_across_two_pieces(
        capsys: pytest.CaptureFixture[str], project: Path, llm_server: FakeLLMServer, keys: None,
        isolated_env: Path) -> None:
    pieces = ["The key is sk-proj-Q7f3L", "m9Xa2Vd8Kp4Rt6Wz1Bc5Ng0 and the token Zq8ms9Lk2",
              "Pw7Qx4Tr6Yv3Hn", ", that is all."]
    llm_server.script(Answer("".join(pieces), chunks=pieces))
    code, out, err = send(capsys, project, llm_server, "--new")
    assert code == 0, err
    assert out == "The key is [redacted] and the token [redacted], that is all.\n"
    assert_no_key(project, isolated_env, llm_server, out, err)


def test_window_drafts_hold_no_key(project: Path, keys: None, isolated_env: Path,
                                   llm_server: FakeLLMServer) -> None:
    with Project.open(project) as p:
        p.save_ui_state({"drafts": {"c1": f"draft with key {SHAPED} and {IN_USE}"}})
        assert p.ui_state()["drafts"]["c1"] == "draft with key [redacted] and [redacted]"
    assert_no_key(project, isolated_env, llm_server)


def test_crash_log_holds_no_key(qapp: QApplication, project: Path, keys: None, isolated_env: Path,
                                llm_server: FakeLLMServer,
                                capsys: pytest.CaptureFixture[str]) -> None:
    from app.window import boundary
    from app.window.notices import Notices

    log = boundary.crash_log()
    try:
        raise RuntimeError(f"the request with {IN_USE} failed: Bearer {SHAPED}")
    except RuntimeError as e:
        boundary.report(Notices(), log, type(e), e, e.__traceback__)
    assert "[redacted] failed: Bearer [redacted]" in log.read_text()
    out, err = capsys.readouterr()
    assert "[redacted] failed" in err  # its copy on stderr too
    assert_no_key(project, isolated_env, llm_server, out, err)


def _log(project: Path) -> list[ConversationMessage]:
    with Project.open(project, read_only=True) as p:
        conv = p.conversations.list()[0].id
        return p.conversations.load(conv).messages
