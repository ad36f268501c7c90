"""The `workbench` command line over a real project folder and the loopback server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.cli.main import main
from core.context.projection import LEAD
from core.store.project import Project
from tests.helpers.fake_llm import MODEL, Answer, Cut, FakeLLMServer, HttpError, ToolCalls
from tests.helpers.trajectories import make_conversation

ROOT = Path(__file__).resolve().parents[2]


def cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def new_conversation(capsys: pytest.CaptureFixture[str], project: Path, server: FakeLLMServer,
                     text: str = "hi") -> str:
    server.script(Answer("hello"))
    code, _, err = cli(capsys, "send", project, "--new", "--model", MODEL, "--api-base", server.url, text)
    assert code == 0, err
    return err.split()[1]


def test_send_prints_the_stream_and_list_shows_the_conversation(capsys: pytest.CaptureFixture[str],
                                                                project_dir: Path,
                                                                llm_server: FakeLLMServer) -> None:
    llm_server.script(Answer("Four, of course."))
    code, out, err = cli(capsys, "send", project_dir, "--new", "--title", "Maths",
                         "--model", MODEL, "--api-base", llm_server.url, "2+2?")
    assert code == 0 and out == "Four, of course.\n"
    code, out, _ = cli(capsys, "list", project_dir)
    assert code == 0 and "Maths" in out and "2 msgs" in out


def test_send_continues_an_existing_conversation_by_id_prefix(capsys: pytest.CaptureFixture[str],
                                                              project_dir: Path,
                                                              llm_server: FakeLLMServer) -> None:
    conv = new_conversation(capsys, project_dir, llm_server, "first")
    llm_server.script(Answer("second answer"))
    code, out, _ = cli(capsys, "send", project_dir, "-c", conv[:12], "--model", MODEL,
                       "--api-base", llm_server.url, "second")
    assert code == 0 and out == "second answer\n"
    assert len(llm_server.requests[-1].body["messages"]) == 4  # system prompt + 3


def test_failed_turn_exits_2_and_keeps_the_partial_text(capsys: pytest.CaptureFixture[str],
                                                        project_dir: Path,
                                                        llm_server: FakeLLMServer) -> None:
    conv = new_conversation(capsys, project_dir, llm_server)
    llm_server.script(Cut("Half an ans"))
    code, out, err = cli(capsys, "send", project_dir, "-c", conv, "--model", MODEL,
                         "--api-base", llm_server.url, "go on")
    assert code == 2 and out.startswith("Half an ans") and "connection broke" in err
    code, out, _ = cli(capsys, "export", project_dir, "-c", conv, "--format", "jsonl")
    last = json.loads(out.splitlines()[-1])
    assert last["kind"] == "error" and last["content"] == "Half an ans"


def test_provider_500_exits_2_with_plain_words(capsys: pytest.CaptureFixture[str],
                                               project_dir: Path,
                                               llm_server: FakeLLMServer) -> None:
    llm_server.script(HttpError(500))
    code, out, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL,
                         "--api-base", llm_server.url, "hi")
    assert code == 2 and "Traceback" not in err and "HTTP 500" in err


def test_no_api_key_and_unknown_model_are_error_entries_with_advice(
        capsys: pytest.CaptureFixture[str], project_dir: Path) -> None:
    code, _, err = cli(capsys, "send", project_dir, "--new", "--model", "gpt-4o-mini", "hi")
    assert code == 2 and "OPENAI_API_KEY" in err
    assert "no system keyring works here" in err and "save a key in Settings" not in err
    code, _, err = cli(capsys, "send", project_dir, "--new", "--model", "mystery-llm", "hi")
    assert code == 2 and "Unknown model 'mystery-llm'" in err


def test_import_then_export_round_trips_tool_calls(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path, project_dir: Path) -> None:
    raw = make_conversation(30, seed=7)
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"messages": raw}))
    code, out, _ = cli(capsys, "import", project_dir, src)
    assert code == 0
    conv = out.strip().splitlines()[-1]
    code, out, _ = cli(capsys, "export", project_dir, "-c", conv, "--format", "openai")
    assert code == 0 and json.loads(out)["messages"] == raw


def test_bad_import_creates_nothing_and_says_why(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                 project_dir: Path) -> None:
    src = tmp_path / "bad.json"
    src.write_text(json.dumps([{"role": "tool", "tool_call_id": "x", "content": "?"}]))
    code, _, err = cli(capsys, "import", project_dir, src)
    assert code == 1 and "no earlier assistant message made that call" in err
    src.write_text("not json at all")
    code, _, err = cli(capsys, "import", project_dir, src)
    assert code == 1 and "not valid JSON" in err
    assert not (project_dir / ".workbench").exists() or not Project.open(project_dir).conversations.list()


def test_an_imported_part_no_provider_takes_is_left_out_and_the_rest_is_sent(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    src = tmp_path / "clip.json"
    src.write_text(json.dumps({"messages": [
        {"role": "user", "content": [{"type": "text", "text": "see the clip"},
                                     {"type": "x_clip", "clip": {"id": "c1"}}]},
        {"role": "assistant", "content": "Nice clip."}]}))
    code, out, _ = cli(capsys, "import", project_dir, src)
    assert code == 0
    conv = out.strip().splitlines()[-1]
    code, out, _ = cli(capsys, "context", project_dir, "-c", conv, "--model", MODEL)
    assert code == 0 and "#1 excluded" in out and "content part of kind 'x_clip'" in out
    llm_server.script(Answer("Sure."))
    code, out, err = cli(capsys, "send", project_dir, "-c", conv, "--model", MODEL,
                         "--api-base", llm_server.url, "and now?")
    assert code == 0 and out == "Sure.\n", err
    sent = llm_server.requests[-1].body["messages"]
    # the user's turn comes first: a short stand-in for the left-out message, then the answer
    assert [m["content"] for m in sent[1:]] == [LEAD, "Nice clip.", "and now?"]
    assert "x_clip" in (project_dir / ".workbench").joinpath(
        "conversations", conv, "messages.jsonl").read_text()  # nothing lost from the log


def test_fifty_megabyte_import_loads_completely(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                project_dir: Path) -> None:
    raw = make_conversation(1500, seed=2, tool_output_chars=25_000)
    src = tmp_path / "big.json"
    src.write_text(json.dumps({"messages": raw}))
    assert src.stat().st_size > 45 * 2**20
    code, out, _ = cli(capsys, "import", project_dir, src)
    assert code == 0
    conv = out.strip().splitlines()[-1]
    with Project.open(project_dir, read_only=True) as p:
        assert len(p.conversations.load(conv).messages) == len(raw)


def test_project_path_that_is_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "file.txt"
    f.write_text("x")
    code, _, err = cli(capsys, "list", f)
    assert code == 1 and "is a file" in err


def test_usage_mistakes_exit_64(capsys: pytest.CaptureFixture[str], project_dir: Path) -> None:
    with pytest.raises(SystemExit) as e:
        main(["send", str(project_dir), "hi"])  # neither --conversation nor --new
    assert e.value.code == 64


def test_export_of_unknown_conversation(capsys: pytest.CaptureFixture[str], project_dir: Path,
                                        llm_server: FakeLLMServer) -> None:
    new_conversation(capsys, project_dir, llm_server)
    code, _, err = cli(capsys, "export", project_dir, "-c", "nope-nope")
    assert code == 1 and "no conversation with id" in err


def test_second_process_cannot_write_while_the_first_holds_the_project(
    capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer
) -> None:
    conv = new_conversation(capsys, project_dir, llm_server)
    holder = Project.open(project_dir)  # as if a window had it open
    try:
        code, _, err = cli(capsys, "send", project_dir, "-c", conv, "--model", MODEL,
                           "--api-base", llm_server.url, "intruding")
        assert code == 1 and "Another Context Workbench" in err
        code, out, _ = cli(capsys, "export", project_dir, "-c", conv)  # reading still works
        assert code == 0 and "intruding" not in out
    finally:
        holder.close()


def test_send_as_a_real_process_runs_a_tool_call_and_sends_its_result(
        project_dir: Path, llm_server: FakeLLMServer) -> None:
    project_dir.mkdir(parents=True, exist_ok=True)
    (project_dir / "README.md").write_text("# Widget\nThe widget frobs.\n")
    llm_server.script(ToolCalls([("call_1", "read_file", '{"path": "README.md"}')]),
                      Answer("It frobs."))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "app", "send", str(project_dir), "--new", "--model", MODEL,
         "--api-base", llm_server.url, "read the readme"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("It frobs.\n")
    with Project.open(project_dir, read_only=True) as p:
        conv = p.conversations.list()[0].id
        call, result, answer = p.conversations.load(conv).messages[-3:]
    assert call.tool_calls and call.tool_calls[0].function.name == "read_file"
    assert result.tool_call_id == "call_1" and "The widget frobs." in result.text()
    assert answer.text() == "It frobs."
    sent = llm_server.requests[1].body["messages"]
    assert sent[-1]["role"] == "tool" and "The widget frobs." in sent[-1]["content"]
    # the process ends at once after its work (no second of teardown), its copies all written
    copies = sorted((project_dir / ".workbench" / "requests" / conv).glob("*.json"))
    assert [json.loads(c.read_text())["messages"][-1]["role"] for c in copies] == ["user",
                                                                                  "tool"]


def test_a_failed_send_as_a_real_process_says_so_and_exits_2(project_dir: Path,
                                                             llm_server: FakeLLMServer) -> None:
    llm_server.script(HttpError(500, "the server broke"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKBENCH_AUTO_RETRIES": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "app", "send", str(project_dir), "--new", "--model", MODEL,
         "--api-base", llm_server.url, "--timeout", "20", "hello"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "500" in proc.stderr or "server" in proc.stderr.lower()


def test_sigkill_during_a_burst_of_appends_loses_no_acknowledged_message(project_dir: Path) -> None:
    with Project.open(project_dir) as p:
        conv = p.conversations.create("burst").id
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for round_no in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.append_burst", str(project_dir), conv],
            stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
        )
        acked: list[str] = []
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        while len(acked) < 150 + 37 * round_no and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line:
                acked.append(line.strip())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        acked += [ln.strip() for ln in proc.stdout.read().splitlines() if ln.strip()]
        proc.stdout.close()
        with Project.open(project_dir) as p:
            loaded = p.conversations.load(conv)
            ids = {m.id for m in loaded.messages}
        assert set(acked) <= ids, f"round {round_no}: lost {len(set(acked) - ids)} acknowledged"


def test_provider_key_is_never_sent_to_a_custom_server(capsys: pytest.CaptureFixture[str],
                                                       project_dir: Path, llm_server: FakeLLMServer,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    llm_server.script(Answer("fine"))
    code, _, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL,
                       "--api-base", llm_server.url, "hi")
    assert code == 0, err
    assert "sk-real-openai-key" not in llm_server.requests[0].headers.get("authorization", "")


def test_api_key_is_used_but_never_written_anywhere(capsys: pytest.CaptureFixture[str],
                                                    project_dir: Path, llm_server: FakeLLMServer,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-SECRET-do-not-store-123"
    monkeypatch.setenv("WORKBENCH_API_KEY", secret)
    llm_server.script(Answer("fine"))
    code, _, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL,
                       "--api-base", llm_server.url, "hi")
    assert code == 0, err
    assert llm_server.requests[0].headers.get("authorization") == f"Bearer {secret}"
    conv = Project.open(project_dir, read_only=True).conversations.list()[0].id
    for fmt in ("openai", "jsonl", "markdown"):
        code, out, _ = cli(capsys, "export", project_dir, "-c", conv, "--format", fmt)
        assert secret not in out
    for path in project_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_context_shows_what_would_be_sent_and_why(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path, project_dir: Path) -> None:
    raw = make_conversation(30, seed=9, tool_output_chars=600)
    src = tmp_path / "c.json"
    src.write_text(json.dumps({"messages": raw}))
    conv = cli(capsys, "import", project_dir, src)[1].strip().splitlines()[-1]
    code, out, _ = cli(capsys, "context", project_dir, "-c", conv, "--model", "gpt-4o", "--json")
    assert code == 0
    full = json.loads(out)
    assert full["messages"][0]["role"] == "system" and full["report"]["used"] > 0
    budget = full["report"]["used"] // 3
    code, out, _ = cli(capsys, "context", project_dir, "-c", conv, "--model", "gpt-4o",
                       "--budget", str(budget), "--json", "--mode", "agent")
    small = json.loads(out)
    assert small["report"]["used"] <= budget and small["report"]["mode"] == "agent"
    assert len(small["messages"]) < len(full["messages"])
    decided = {e["decision"] for e in small["report"]["entries"]}
    assert "digested" in decided and "synthetic" in decided
    code, out, _ = cli(capsys, "context", project_dir, "-c", conv, "--model", "gpt-4o",
                       "--budget", str(budget))
    assert code == 0 and "%" in out and "compaction tool outputs:" in out
    assert "referenced" in out and "→" in out and "read_tool_result can open" in out


def test_context_with_an_impossible_budget_says_how_many_tokens_are_needed(
    capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer
) -> None:
    conv = new_conversation(capsys, project_dir, llm_server, "a question of some length " * 20)
    code, _, err = cli(capsys, "context", project_dir, "-c", conv, "--budget", "50")
    assert code == 1 and "needs at least" in err


def test_send_in_agent_mode_uses_the_agent_prefix_and_remembers_the_mode(
    capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer
) -> None:
    conv = new_conversation(capsys, project_dir, llm_server)
    llm_server.script(Answer("on it"))
    code, _, _ = cli(capsys, "send", project_dir, "-c", conv, "--mode", "agent", "--model", MODEL,
                     "--api-base", llm_server.url, "fix the bug")
    assert code == 0
    system = llm_server.requests[-1].body["messages"][0]["content"]
    assert "Mode: agent" in system and "engineer" in system
    with Project.open(project_dir, read_only=True) as p:
        assert p.conversations.meta(conv).mode == "agent"
        assert p.conversations.load(conv).messages[-1].mode == "agent"


def test_continue_resumes_a_cut_answer_and_links_it(capsys: pytest.CaptureFixture[str],
                                                    project_dir: Path,
                                                    llm_server: FakeLLMServer) -> None:
    conv = new_conversation(capsys, project_dir, llm_server)
    llm_server.script(Cut("The three steps are: one, tw"))
    assert cli(capsys, "send", project_dir, "-c", conv, "--model", MODEL, "--api-base",
               llm_server.url, "list the steps")[0] == 2
    llm_server.script(Answer("o, three."))
    code, out, _ = cli(capsys, "continue", project_dir, "-c", conv, "--model", MODEL,
                       "--api-base", llm_server.url)
    assert code == 0 and out == "o, three.\n"
    sent = llm_server.requests[-1].body["messages"]
    assert sent[-2]["role"] == "assistant" and sent[-2]["content"].startswith("The three steps")
    assert sent[-2]["content"].endswith("[unfinished: interrupted here: the connection broke]")
    assert "Continue resumes" not in json.dumps(sent)  # the user's sentence is not the model's
    assert sent[-1]["role"] == "user" and "Continue exactly where it stopped" in sent[-1]["content"]
    with Project.open(project_dir, read_only=True) as p:
        log = p.conversations.load(conv).messages
    assert log[-1].continues == log[-2].id and log[-2].kind == "error"
    assert not any("Continue exactly" in m.text() for m in log)  # the instruction is not stored
    # from then on the answer and its continuation are one message, as the window shows them
    llm_server.script(Answer("Done."))
    assert cli(capsys, "send", project_dir, "-c", conv, "--model", MODEL, "--api-base",
               llm_server.url, "thanks")[0] == 0
    sent = llm_server.requests[-1].body["messages"]
    assert {"role": "assistant", "content": "The three steps are: one, two, three."} in sent
    assert not any("unfinished" in str(m.get("content")) for m in sent)


def test_continue_refuses_when_there_is_nothing_to_continue(capsys: pytest.CaptureFixture[str],
                                                            project_dir: Path,
                                                            llm_server: FakeLLMServer) -> None:
    conv = new_conversation(capsys, project_dir, llm_server)
    code, _, err = cli(capsys, "continue", project_dir, "-c", conv, "--model", MODEL,
                       "--api-base", llm_server.url)
    assert code == 1 and "does not end in an unfinished answer" in err


def test_retry_runs_the_failed_request_again(capsys: pytest.CaptureFixture[str], project_dir: Path,
                                             llm_server: FakeLLMServer) -> None:
    conv = new_conversation(capsys, project_dir, llm_server)
    llm_server.script(HttpError(500), Answer("second time lucky"))
    cli(capsys, "send", project_dir, "-c", conv, "--model", MODEL, "--api-base", llm_server.url,
        "try this")
    code, out, _ = cli(capsys, "retry", project_dir, "-c", conv, "--model", MODEL,
                       "--api-base", llm_server.url)
    assert code == 0 and out == "second time lucky\n"
    assert llm_server.requests[-1].body["messages"][1:] == llm_server.requests[-2].body["messages"][1:]


def test_sigkill_mid_stream_keeps_the_text_received_and_continue_resumes_it(
    capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer
) -> None:
    conv = new_conversation(capsys, project_dir, llm_server)
    llm_server.script(Answer("word " * 400, delay=0.02))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "send", str(project_dir), "-c", conv, "--model", MODEL,
         "--api-base", llm_server.url, "talk for a while"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    sidecar = project_dir / ".workbench" / "conversations" / conv / "streaming.partial.json"
    deadline = time.monotonic() + 60

    def saved() -> int:  # characters of the answer on disk so far
        try:
            return sidecar.read_text().count("word")
        except OSError:
            return 0

    while time.monotonic() < deadline and saved() < 5:  # a few flushes, however slow the machine
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.stdout is not None
    shown = proc.stdout.read().decode()
    proc.stdout.close()
    assert shown.startswith("word")

    with Project.open(project_dir) as p:
        loaded = p.conversations.load(conv)
    last = loaded.messages[-1]
    assert last.error is not None
    assert last.kind == "error" and last.error.type == "app_closed"
    assert last.text().startswith("word word") and len(last.text()) >= 20
    assert any("recovered" in problem for problem in loaded.problems)
    assert not sidecar.exists()

    llm_server.script(Answer(" and the rest."))
    code, out, _ = cli(capsys, "continue", project_dir, "-c", conv, "--model", MODEL,
                       "--api-base", llm_server.url)
    assert code == 0 and out == " and the rest.\n"
    assert llm_server.requests[-1].body["messages"][-2]["content"].startswith("word word")
