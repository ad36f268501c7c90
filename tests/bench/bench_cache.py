"""Prompt-cache friendliness: over a long session at its window's limit, how many consecutive
requests keep the previous request as an exact prefix, and how often the history is compacted.

The session is the largest shared agent trajectory (or a made-up agent session without
../shared), imported into a project and continued turn after turn at a 24,000-token window:
each turn appends the user's message, builds the request as the engine does, then the answer
(every other turn a tool call with its output). Measured twice: one long-lived process (the
window), and a fresh process for every turn (`workbench send`), where only what is persisted
with the conversation carries the kept compaction over."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from core.context.service import ProjectContext
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage, FunctionCall, ToolCall
from core.settings import LLMSettings
from core.store.project import Project
from tests.bench.common import SHARED_TRAJECTORIES, project_with, report
from tests.helpers.trajectories import make_agent_session

TURNS = 30
WINDOW = 24_000
COMPACTING = ("tool outputs", "key messages", "digest")


def _history() -> tuple[str, list[ConversationMessage]]:
    counter = TokenCounter.for_model("gpt-4o")
    if SHARED_TRAJECTORIES.is_dir():
        path = max(SHARED_TRAJECTORIES.glob("claudecode-*.json"), key=lambda p: p.stat().st_size)
        raw = json.loads(path.read_text())["messages"]
        msgs = [ConversationMessage.from_openai(m) for m in raw if m.get("role") != "system"]
        return path.stem, [counter.with_count(m) for m in msgs]
    return "a made-up agent session", [counter.with_count(m) for m in make_agent_session(60)]


def _turn_entries(n: int) -> list[ConversationMessage]:
    """What one turn adds after the user's message: an answer, every other turn a tool call
    and its (long) output first."""
    if n % 2:
        return [ConversationMessage(role="assistant", content=f"Turn {n}: done, the tests pass. "
                                    + "Details follow. " * 40)]
    call = ToolCall(id=f"bench_{n}", function=FunctionCall(
        name="read_file", arguments=json.dumps({"path": f"src/module_{n}.py"})))
    output = "\n".join(f"{k:4d}  def handler_{n}_{k}(request): return request.value * {k}"
                       for k in range(120))
    return [ConversationMessage(role="assistant", content=None, tool_calls=[call]),
            ConversationMessage(role="tool", tool_call_id=call.id, tool_name="read_file",
                                status="ok", content=output),
            ConversationMessage(role="assistant", content=f"Read module {n}; it needs no change.")]


def session(fresh_each_turn: bool) -> tuple[float, int, int]:
    """(share of consecutive requests with the previous one as exact prefix, compactions,
    requests)."""
    name, history = _history()
    settings = LLMSettings(model="gpt-4o", max_output_tokens=2048, context_window=WINDOW)
    stable = compactions = 0
    previous: list[str] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        conv = project_with(Path(tmp) / "p", history, name)
        project = Project.open(Path(tmp) / "p")
        service = ProjectContext(project.conversations, offer_tools=True)
        try:
            for n in range(TURNS):
                if fresh_each_turn:  # what a new process knows: the folder
                    project.close()
                    project = Project.open(Path(tmp) / "p")
                    service = ProjectContext(project.conversations, offer_tools=True)
                store = project.conversations
                counter = service.counter("gpt-4o")
                store.append(conv, counter.with_count(ConversationMessage(
                    role="user", content=f"Next, turn {n}: check module {n} and report.")))
                built = service.build(conv, store.load(conv).messages, settings, "agent")
                sent = [json.dumps(m, sort_keys=True) for m in built.messages]
                if previous is not None and sent[:len(previous)] == previous:
                    stable += 1
                names = {s["name"] for s in built.report.stages}
                compactions += bool(names & set(COMPACTING)) and "reused" not in names
                previous = sent
                store.append_many(conv, [counter.with_count(m) for m in _turn_entries(n)])
        finally:
            project.close()
    return stable / (TURNS - 1), compactions, TURNS


def run() -> None:
    print("prompt cache")
    for label, fresh in (("one process (the window)", False),
                         ("a fresh process per turn (workbench send)", True)):
        share, compactions, turns = session(fresh)
        report(f"{label}: requests with the previous one as prefix", 100 * share, "%",
               ">= 80 %")
        report(f"  compactions in {turns} turns at a {WINDOW:,}-token window", compactions,
               "", f"<= {turns // 5}")
    stable, pairs = cli_session()
    report(f"workbench send, {pairs + 1} turns: requests with the previous one as prefix",
           100 * stable / pairs, "%", ">= 80 %")




def cli_session(turns: int = 12) -> tuple[int, int]:
    """`workbench send` turn after turn on the imported session at a 24,000-token window,
    against the loopback server: (requests with the previous one as exact prefix, pairs)."""
    import contextlib
    import io
    import os

    from app.cli.main import main
    from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer

    name, history = _history()
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as server:
        conv = project_with(Path(tmp) / "p", history, name)
        os.environ["WORKBENCH_CONTEXT_WINDOW"] = str(WINDOW)
        try:
            for n in range(turns):
                server.script(Answer(f"Answer {n}: checked, nothing to change. " * 8))
                with contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()):
                    code = main(["send", str(Path(tmp) / "p"), "--conversation", conv,
                                 "--model", MODEL, "--api-base", server.url,
                                 f"question {n}: what about module {n}?"])
                assert code == 0, code
        finally:
            del os.environ["WORKBENCH_CONTEXT_WINDOW"]
        sent = [r.body["messages"] for r in server.requests]
    stable = sum(1 for a, b in zip(sent, sent[1:], strict=False) if b[:len(a)] == a)
    return stable, len(sent) - 1
