"""Compaction's LLM stage through the real parts: `workbench compact` against the loopback
server, the summary entry in the log, the next request built around it, failures that change
nothing, and the engine's incremental second summary."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from core.engine import CompactionFinished, CompactionStarted, Engine
from core.factory import build_engine
from core.llm.tokens import TokenCounter
from core.settings import LLMSettings
from core.store.project import Project
from tests.helpers.cli import cli
from tests.helpers.fake_llm import (
    MODEL,
    Answer,
    Cut,
    FakeLLMServer,
    HttpError,
    ToolCalls,
    summary_text,
)
from tests.helpers.trajectories import make_agent_session

COUNTER = TokenCounter("o200k_base")
SUMMARY = ("## User intent\nParsers that keep line numbers; never change the public API.\n"
           "## Progress\nTasks 0-9 done.\n## Current state\nAll parsers reviewed.\n"
           "## Files\npkg/mod_0.py … pkg/mod_9.py")


@pytest.fixture
def llm_server(llm_server: FakeLLMServer) -> FakeLLMServer:
    """The loopback server saying, as vLLM does, that its model has a 128k window."""
    llm_server.info["/v1/models"] = {"data": [{"id": "test-model", "max_model_len": 128_000}]}
    return llm_server


def session_project(path: Path, rounds: int = 12) -> str:
    with Project.open(path) as p:
        conv = p.conversations.create("long session")
        p.conversations.append_many(conv.id, [COUNTER.with_count(m)
                                              for m in make_agent_session(rounds, seed=3)])
        return conv.id


def log_bytes(path: Path, conv: str) -> bytes:
    return (path / ".workbench" / "conversations" / conv / "messages.jsonl").read_bytes()


def context_json(capsys: pytest.CaptureFixture[str], project: Path, conv: str,
                 *extra: object) -> dict[str, Any]:
    code, out, err = cli(capsys, "context", project, "-c", conv, "--model", "gpt-4o", "--json",
                         *extra)
    assert code == 0, err
    shown: dict[str, Any] = json.loads(out)
    return shown


def test_compact_appends_a_summary_the_next_request_uses_in_place_of_what_it_covers(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer) -> None:
    conv = session_project(project_dir)
    before = context_json(capsys, project_dir, conv, "--model", MODEL)
    llm_server.script(Answer(SUMMARY, usage=(3000, 120)))
    code, out, err = cli(capsys, "compact", project_dir, "-c", conv, "--model", MODEL,
                         "--api-base", llm_server.url, "--focus", "the parser rules")
    assert code == 0, err
    assert "summarizing" in err and "-token summary" in out
    # what the summarizer read: the structured prompt, the old entries, the focus
    sent = llm_server.requests[-1].body["messages"]
    assert "## User intent" in sent[0]["content"] and "## Next steps" in sent[0]["content"]
    assert "Task 0: the parser in pkg/mod_0.py" in sent[1]["content"]
    assert "focus on: the parser rules" in sent[1]["content"]
    assert "Task 11:" not in sent[1]["content"]  # the recent rounds stay verbatim
    after = context_json(capsys, project_dir, conv, "--model", MODEL)  # counted alike
    # one size for the summary: what the notice said is what the request counts for it
    size = int(out.split("-token summary")[0].rsplit(" ", 1)[1].replace(",", ""))
    entry = next(e for e in after["report"]["entries"] if e["kind"] == "summary")
    # (the JSON gives our own count and the calibration every figure shown applies)
    assert round(entry["tokens"] * after["report"]["calibration"]) == size
    assert f"-> {size:,} tokens" in out
    summary = [m for m in after["messages"] if SUMMARY in str(m.get("content"))]
    assert len(summary) == 1 and summary[0]["role"] == "user"
    assert after["messages"].index(summary[0]) == 1  # where the covered entries were
    decisions = {e["decision"] for e in after["report"]["entries"]}
    assert "summarized" in decisions
    assert after["report"]["used"] < before["report"]["used"]
    text = json.dumps(after["messages"])
    assert "Task 0: the parser" not in text and "Task 11: the parser" in text


def test_a_failed_compact_changes_no_byte_of_the_log_and_exits_2(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer) -> None:
    conv = session_project(project_dir)
    before = log_bytes(project_dir, conv)
    assert before
    for reply, words in ((HttpError(500), "failed"), (Cut("## User intent\npartial"), "failed"),
                         (Answer("   "), "empty")):
        llm_server.script(reply)
        code, _, err = cli(capsys, "compact", project_dir, "-c", conv, "--model", MODEL,
                           "--api-base", llm_server.url, "--timeout", "5")
        assert code == 2 and words in err and "Nothing was changed" in err, err
        assert log_bytes(project_dir, conv) == before


def test_a_summary_larger_than_what_it_covers_is_rejected(capsys: pytest.CaptureFixture[str],
                                                          project_dir: Path,
                                                          llm_server: FakeLLMServer) -> None:
    with Project.open(project_dir) as p:
        conv = p.conversations.create("short").id
        p.conversations.append_many(conv, [COUNTER.with_count(m)
                                           for m in make_agent_session(4, seed=1,
                                                                       output_chars=60)])
    before = log_bytes(project_dir, conv)
    llm_server.script(Answer(SUMMARY + "\n" + "word " * 3000))
    code, _, err = cli(capsys, "compact", project_dir, "-c", conv, "--model", MODEL,
                       "--api-base", llm_server.url, "--max-tokens", "20000")
    assert code == 2 and "larger" in err
    assert log_bytes(project_dir, conv) == before


def test_an_answer_that_is_not_a_summary_is_refused(capsys: pytest.CaptureFixture[str],
                                                    project_dir: Path,
                                                    llm_server: FakeLLMServer) -> None:
    # SmolLM2-135M answered the summarizer with its own cut-off error text: 223 tokens of
    # history were "summarized" into 84 tokens that said nothing of them.
    conv = session_project(project_dir)
    before = log_bytes(project_dir, conv)
    llm_server.script(Answer("I'm sorry, but the conversation is too long for me to read."))
    code, _, err = cli(capsys, "compact", project_dir, "-c", conv, "--model", MODEL,
                       "--api-base", llm_server.url)
    assert code == 2 and "not a summary" in err and "0 of the 7 sections" in err, err
    assert "Nothing was changed" in err and "--summary-model" in err
    assert log_bytes(project_dir, conv) == before


def test_compact_on_a_small_window_keeps_room_for_the_answer_once(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer) -> None:
    # A 2,048-token window with the default output limit leaves nothing to read: the fix is
    # a smaller summary, which --max-tokens gives (the answer's room was taken twice, so
    # even 512 left nothing).
    conv = session_project(project_dir)
    before = log_bytes(project_dir, conv)
    flags = ("-c", conv, "--model", MODEL, "--api-base", llm_server.url,
             "--context-window", "2048")
    code, _, err = cli(capsys, "compact", project_dir, *flags)
    assert code == 2 and "leaves no room" in err and "--max-tokens" in err, err
    assert log_bytes(project_dir, conv) == before and llm_server.requests == []
    llm_server.script(*[Answer(summary_text(f"PART {k}")) for k in range(1, 40)])
    code, out, err = cli(capsys, "compact", project_dir, *flags, "--max-tokens", "512")
    assert code == 0 and "-token summary" in out, err
    assert all(r.body["max_tokens"] == 512 for r in llm_server.requests)


def test_a_low_answer_limit_does_not_cut_every_summary(project_dir: Path,
                                                       llm_server: FakeLLMServer) -> None:
    # A small local model set to answer in 64 tokens: the automatic summary was asked for 64
    # tokens too, cut every time, and refused ("reached its output limit (64 tokens)").
    conv = session_project(project_dir)
    settings = LLMSettings(model=MODEL, api_base=llm_server.url, max_output_tokens=64)
    llm_server.script(Answer(SUMMARY))

    async def run() -> list[object]:
        with Project.open(project_dir) as p:
            return [e async for e in build_engine(p).summarize(conv, settings)]

    done = asyncio.run(run())[-1]
    assert isinstance(done, CompactionFinished) and done.status == "ok", done
    assert [r.body["max_tokens"] for r in llm_server.requests] == [512]


def test_nothing_to_summarize_says_so(capsys: pytest.CaptureFixture[str], project_dir: Path,
                                      llm_server: FakeLLMServer) -> None:
    llm_server.script(Answer("hello"))
    code, _, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL, "--api-base",
                       llm_server.url, "hi")
    conv = err.split()[1]
    code, _, err = cli(capsys, "compact", project_dir, "-c", conv, "--model", MODEL,
                       "--api-base", llm_server.url)
    assert code == 1 and "nothing worth summarizing" in err
    assert len(llm_server.requests) == 1  # no summarizer call


def test_a_second_compact_is_incremental_and_excluding_it_restores_the_first(
        project_dir: Path, llm_server: FakeLLMServer) -> None:
    conv = session_project(project_dir, rounds=8)
    settings = LLMSettings(model=MODEL, api_base=llm_server.url, context_window=200_000,
                           summary_model=MODEL)

    def summarize(engine: Engine) -> list[object]:
        async def run() -> list[object]:
            return [e async for e in engine.summarize(conv, settings)]
        return asyncio.run(run())

    with Project.open(project_dir) as p:
        engine = build_engine(p)
        llm_server.script(Answer(summary_text("FIRST SUMMARY of tasks 0-5")))
        events = summarize(engine)
        started = next(e for e in events if isinstance(e, CompactionStarted))
        first = events[-1]
        assert isinstance(first, CompactionFinished) and first.status == "ok", first
        assert started.model == MODEL and started.entries == first.covered
        assert first.tokens_after < first.tokens_before and first.freed > 0
        # more work arrives, then a second summary folds only what is new
        later = [m.model_copy(update={"content": "Later " + m.text()}) if m.role == "user"
                 else m for m in make_agent_session(4, seed=9)]
        p.conversations.append_many(conv, [COUNTER.with_count(m) for m in later])
        llm_server.script(Answer(summary_text("SECOND SUMMARY of tasks 0-9")))
        second = summarize(engine)[-1]
        assert isinstance(second, CompactionFinished) and second.status == "ok", second
        read = llm_server.requests[-1].body["messages"][1]["content"]
        assert "FIRST SUMMARY of tasks 0-5" in read  # the preamble, not its sources
        assert "Task 0: the parser" not in read.replace("Later Task 0", "")
        assert "Later Task 0: the parser" in read  # only what is new
        assert first.entry is not None and second.entry is not None
        assert first.entry.id in (second.entry.covers or [])
        history = p.conversations.load(conv).messages
        built = engine.context.build(conv, history, settings)
        text = json.dumps(built.messages)
        assert "SECOND SUMMARY" in text and "FIRST SUMMARY" not in text
        # undo: the second summary excluded (as the Inspector's Undo will do)
        undone = [m.model_copy(update={"include_in_context": False})
                  if m.id == second.entry.id else m for m in history]
        text = json.dumps(engine.context.build(conv, undone, settings).messages)
        assert "FIRST SUMMARY" in text and "SECOND SUMMARY" not in text


def test_the_summary_model_from_the_cli_writes_the_summary(capsys: pytest.CaptureFixture[str],
                                                           project_dir: Path) -> None:
    conv = session_project(project_dir)
    with FakeLLMServer() as server:
        server.info["/v1/models"] = {"data": [{"id": "cheap-model", "max_model_len": 64_000}]}
        server.script(Answer(SUMMARY))
        code, out, err = cli(capsys, "compact", project_dir, "-c", conv, "--model", MODEL,
                             "--api-base", server.url, "--summary-model", "openai/cheap-model")
        assert code == 0, err
        assert server.requests[-1].body["model"] == "cheap-model"
        assert "openai/cheap-model" in out


def test_a_conversation_larger_than_the_summarizers_window_is_folded_in_several_calls(
        project_dir: Path, llm_server: FakeLLMServer) -> None:
    conv = session_project(project_dir, rounds=10)
    settings = LLMSettings(model=MODEL, api_base=llm_server.url, context_window=9000,
                           max_output_tokens=1024)
    llm_server.script(*[Answer(summary_text(f"RUNNING SUMMARY {k}")) for k in range(1, 30)])

    async def run() -> list[object]:
        with Project.open(project_dir) as p:
            return [e async for e in build_engine(p).summarize(conv, settings)]

    events = asyncio.run(run())
    started = next(e for e in events if isinstance(e, CompactionStarted))
    done = events[-1]
    assert isinstance(done, CompactionFinished) and done.status == "ok", done
    assert started.calls > 1 and len(llm_server.requests) == started.calls
    for k, request in enumerate(llm_server.requests[1:], start=1):
        body = request.body
        assert f"RUNNING SUMMARY {k}" in body["messages"][1]["content"]  # merged, in order
        assert body["max_tokens"] <= 1024
    assert done.entry is not None and done.entry.text() == summary_text(f"RUNNING SUMMARY {started.calls}")


def test_a_long_imported_conversation_keeps_working_at_a_small_window(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers.trajectories import make_conversation

    raw = make_conversation(120, seed=21, tool_output_chars=3000)
    src = tmp_path / "long.json"
    src.write_text(json.dumps({"messages": raw}))
    code, out, err = cli(capsys, "import", project_dir, src)
    assert code == 0, err
    conv = out.strip().splitlines()[-1]
    monkeypatch.setenv("WORKBENCH_CONTEXT_WINDOW", "8000")
    llm_server.script(Answer("still with you"))
    code, out, err = cli(capsys, "send", project_dir, "-c", conv, "--model", MODEL,
                         "--api-base", llm_server.url, "what did I ask first?")
    assert code == 0 and out == "still with you\n", err
    sent = llm_server.requests[-1].body["messages"]
    counter = TokenCounter("o200k_base")
    assert sum(counter.openai_message(m) for m in sent) < 8000
    digest = next(m["content"] for m in sent if str(m.get("content")).startswith(
        "[Context digest"))
    assert "Round 0: please look at src/mod_0.py" in digest  # the first request survives
    assert "read_tool_result" in json.dumps(sent)  # old outputs point to the full text


def test_the_window_and_the_engine_share_the_kept_compaction(project_dir: Path) -> None:
    # The meter (window thread) and the engine build with the project's one context, so the
    # request the meter shows after a compaction is the one the engine sends, the compaction
    # kept and extended by what is new.
    from core.context.service import ProjectContext
    from core.model import ConversationMessage

    conv = session_project(project_dir, rounds=30)
    with Project.open(project_dir) as p:
        window = ProjectContext.for_project(p)
        engine = build_engine(p, window)
        settings = LLMSettings(model="gpt-4o", context_window=9000, max_output_tokens=1000)
        shown = window.preview(conv, settings, "agent")
        assert any(s["name"] == "key messages" for s in shown.report.stages)
        p.conversations.append(conv, COUNTER.with_count(
            ConversationMessage(role="user", content="Go on with the next file.")))
        history = p.conversations.load(conv).messages
        sent = engine.context.build(conv, history, settings, "agent")
        assert [s["name"] for s in sent.report.stages if s["name"] == "reused"] == ["reused"]
        assert sent.messages[:len(shown.messages)] == shown.messages
        again = window.build(conv, history, settings, "agent", ask_servers=False)
        assert again.messages == sent.messages


def test_the_digest_of_an_agent_session_names_a_failed_test_run_and_its_fix(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A real agent session: pytest fails in the project, the model edits, pytest passes. When
    # a small window leaves that work out, the digest says which command failed, with the
    # lines pytest printed, what the model did next, and that a later run went well; and the
    # rule the user stated, word for word.
    import sys

    project_dir.mkdir(parents=True, exist_ok=True)
    (project_dir / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (project_dir / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    pytest_cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"
    # The test's own interpreter runs pytest; wherever the checkout lives (a clone in /tmp is
    # hidden by the sandbox's private /tmp), so this test, about the digest, runs it unsandboxed.
    monkeypatch.setenv("WORKBENCH_SANDBOX", "none")
    llm_server.script(
        ToolCalls([("c1", "run_shell", json.dumps({"command": pytest_cmd}))]),
        ToolCalls([("c2", "edit_file", json.dumps({"path": "calc.py", "old": "return a - b",
                                                   "new": "return a + b"}))]),
        ToolCalls([("c3", "run_shell", json.dumps({"command": pytest_cmd}))]),
        Answer("Fixed add; the test passes."))
    code, out, err = cli(capsys, "send", project_dir, "--new", "--mode", "agent", "--model",
                         MODEL, "--api-base", llm_server.url, "--approve", "always",
                         "Never change the test file. Make the tests pass.")
    assert code == 0, err
    with Project.open(project_dir, read_only=True) as p:
        conv = p.conversations.list()[0].id
        history = p.conversations.load(conv).messages
    first_run = next(m for m in history if m.role == "tool" and m.tool_call_id == "c1")
    assert first_run.exit_code == 1 and "1 failed" in first_run.text()  # pytest really ran
    # More work (long answers), then a window that only holds the latest of it.
    for k in range(6):
        llm_server.script(Answer(f"Step {k}: " + "reviewed the module and found nothing. " * 40))
        code, out, err = cli(capsys, "send", project_dir, "-c", conv, "--model", MODEL,
                             "--api-base", llm_server.url, f"Review module {k}.")
        assert code == 0, err
    monkeypatch.setenv("WORKBENCH_CONTEXT_WINDOW", "5000")
    llm_server.script(Answer("The add test failed, I fixed calc.py, it passes now."))
    code, out, err = cli(capsys, "send", project_dir, "-c", conv, "--mode", "agent", "--model",
                         MODEL, "--api-base", llm_server.url, "What went wrong earlier?")
    assert code == 0, err
    sent = llm_server.requests[-1].body["messages"]
    digest = next(m["content"] for m in sent if str(m.get("content")).startswith(
        "[Context digest"))
    line = next(x for x in digest.splitlines() if "pytest" in x)
    assert "(run 2 times) → ok (it had failed: " in line, digest
    assert "FAILED test_calc.py::test_add - assert -1 == 5 … 1 failed in" in line
    assert "then the model: edit_file calc.py" in line and line.endswith("resolved)")
    assert "Rules you stated" in digest and "Never change the test file." in digest
