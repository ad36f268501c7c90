"""What crash repair writes in a run stays with the run and its step (README: every entry a run
produces is tagged): the answer that was arriving when `workbench run` was killed, recovered
from its sidecar, and a call the crash left without a result, answered as aborted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from core.factory import build_engine
from core.model import ConversationMessage, FunctionCall, ToolCall
from core.store.project import Project
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer
from tests.integration.test_run import WORKFLOW

ROOT = Path(__file__).resolve().parents[2]


def test_the_answer_recovered_after_a_kill_mid_run_keeps_its_run_and_step(
        project_dir: Path, tmp_path: Path, llm_server: FakeLLMServer) -> None:
    flow = tmp_path / "release.json"
    flow.write_text(json.dumps(WORKFLOW))
    llm_server.script(Answer("word " * 400, delay=0.02))
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "run", str(project_dir), "--new", "--workflow", str(flow),
         "--model", MODEL, "--api-base", llm_server.url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60

    def saved() -> int:  # words of the answer in a sidecar so far
        return sum(p.read_text(errors="replace").count("word") for p in
                   (project_dir / ".workbench" / "conversations").glob("*/streaming.partial.json"))

    try:
        while time.monotonic() < deadline and saved() < 5:
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    with Project.open(project_dir) as p:
        conv = p.conversations.list()[0].id
        log = p.conversations.load(conv).messages
    start = log[0]
    recovered = log[-1]
    assert recovered.error is not None and recovered.error.type == "app_closed"
    assert start.run_id is not None and recovered.text().startswith("word word")
    assert (recovered.run_id, recovered.step_id) == (start.run_id, "collect")


def test_a_call_a_crash_left_without_result_is_answered_within_its_step(project: Project) -> None:
    conv = project.conversations.create(title="run").id
    call = ToolCall(id="c1", function=FunctionCall(name="run_shell",
                                                   arguments=json.dumps({"command": "make"})))
    project.conversations.append_many(conv, [
        ConversationMessage(role="user", content="go", mode="run", run_id="r1", step_id="draft"),
        ConversationMessage(role="assistant", content=None, tool_calls=[call], mode="run",
                            run_id="r1", step_id="draft")])
    list(build_engine(project).close_interrupted(conv))
    aborted = project.conversations.load(conv).messages[-1]
    assert aborted.tool_call_id == "c1" and aborted.status == "aborted"
    assert (aborted.mode, aborted.run_id, aborted.step_id) == ("run", "r1", "draft")
