"""No key reaches any byte under the project or any request body: a tool that reads `.env`, an
answer that quotes a key, a key the user pastes, a crash sidecar. Real engine, real loopback
server, real files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from core.engine import TurnOptions
from core.factory import build_engine
from core.settings import LLMSettings
from core.store.project import Project
from tests.helpers.fake_llm import MODEL, Answer, Cut, FakeLLMServer, ToolCalls

SHAPED = "sk-proj-Q7f3Lm9Xa2Vd8Kp4Rt6Wz1Bc5Ng0"  # shaped like a provider's key
IN_USE = "Zq8ms9Lk2Pw7Qx4Tr6Yv3Hn"  # shaped like nothing, but a token in this process's env


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_SERVICE_TOKEN", IN_USE)


def every_byte_under(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


def turn(project_dir: Path, server: FakeLLMServer, text: str) -> None:
    settings = LLMSettings(model=MODEL, api_base=server.url, max_output_tokens=256,
                           auto_retries=0)

    async def go() -> None:
        with Project.open(project_dir) as project:
            conv = project.conversations.list()[0].id if project.conversations.list() else \
                project.conversations.create("secrets").id
            async for _ in build_engine(project).send(
                    conv, text, settings, TurnOptions(mode="agent", approve="always")):
                pass

    asyncio.run(go())


def test_no_key_reaches_the_project_folder_or_a_request(
        project_dir: Path, llm_server: FakeLLMServer, secret_env: None) -> None:
    project_dir.mkdir(parents=True, exist_ok=True)
    (project_dir / ".env").write_text(f"OPENAI_API_KEY={SHAPED}\nDEBUG=1\n")
    (project_dir / "deploy.txt").write_text(f"credentials for the build: {IN_USE}\n")
    llm_server.script(
        ToolCalls([("r1", "read_file", json.dumps({"path": ".env"})),
                   ("r2", "read_file", json.dumps({"path": "deploy.txt"})),
                   ("w1", "write_file", json.dumps({"path": "notes.md",
                                                    "content": f"token {IN_USE}"}))]),
        Answer(f"The key in .env is {SHAPED} and the build uses {IN_USE}."),
        Cut(f"Again: {SHAPED}", transport=True))  # an answer cut mid-way keeps its text too
    turn(project_dir, llm_server, f"Here is my key {SHAPED}, check the config.")
    turn(project_dir, llm_server, "once more")
    state = every_byte_under(project_dir / ".workbench")
    assert SHAPED.encode() not in state and IN_USE.encode() not in state
    assert b"[redacted]" in state  # said where they were, not dropped silently
    assert len(llm_server.requests) == 3
    for request in llm_server.requests:  # what the model was sent, the user's message too
        body = json.dumps(request.body)
        assert SHAPED not in body and IN_USE not in body
    # the user's own files are theirs: only what the app keeps is cleaned ...
    assert SHAPED in (project_dir / ".env").read_text()
    # ... and a call runs as the log records it: the secret it quoted is not written either
    assert (project_dir / "notes.md").read_text() == "token [redacted]"


def test_a_long_output_kept_on_disk_holds_no_key_either(
        project_dir: Path, llm_server: FakeLLMServer, secret_env: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_SANDBOX", "none")
    project_dir.mkdir(parents=True, exist_ok=True)
    lines = [f"line {n}: nothing to see\n" for n in range(40_000)]
    lines[20_000] = f"export OPENAI_API_KEY={SHAPED}\n"
    lines[30_000] = f"the build token is {IN_USE}\n"
    (project_dir / "build.log").write_text("".join(lines))
    llm_server.script(
        ToolCalls([("s1", "run_shell", json.dumps({"command": "cat build.log"})),
                   ("r1", "read_file", json.dumps({"path": "build.log", "limit": 10000,
                                                   "offset": 19000}))]),
        Answer("read it"))
    turn(project_dir, llm_server, "what does the build log say?")
    kept = list((project_dir / ".workbench" / "tool-results").rglob("*.txt"))
    assert kept  # the output is long: kept whole on disk
    state = every_byte_under(project_dir / ".workbench")
    assert SHAPED.encode() not in state and IN_USE.encode() not in state
    whole = b"".join(p.read_bytes() for p in kept)
    assert b"line 39999: nothing to see" in whole and b"[redacted]" in whole  # whole, cleaned
