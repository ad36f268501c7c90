"""The command line refuses bad input in one sentence, creates nothing, and never tracebacks."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.cli.commands import EXIT_INTERRUPTED
from app.cli.main import EXIT_FAIL, EXIT_USAGE, _window_usage_problem, main
from core.store.project import Project
from tests.helpers.disk import disk_full
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, ToolCalls


def cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv", [["compcat", "proj"], ["compcat"], ["sned", "p", "--new", "hi"]])
def test_a_mistyped_command_is_a_usage_error_not_a_new_project(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    argv: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, *argv)
    assert code == EXIT_USAGE
    assert f"{argv[0]!r}" in err and "send" in err and "export" in err  # the commands are listed
    assert list(tmp_path.iterdir()) == []  # no folder named after the typo


def test_an_explicit_path_or_existing_folder_still_opens_the_window(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "existing").mkdir()
    assert _window_usage_problem([]) is None
    assert _window_usage_problem(["existing"]) is None
    assert _window_usage_problem(["./new-project"]) is None
    assert _window_usage_problem([str(tmp_path / "other" / "new")]) is None
    (tmp_path / "notes.txt").write_text("x")
    assert "is a file" in (_window_usage_problem(["notes.txt"]) or "")


def test_binary_standard_input_is_refused_before_anything_is_created(
    capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\x89PNG\r\n\x1a\n\xff\xfe")))
    code, out, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL,
                         "--api-base", llm_server.url, "-")
    assert code == EXIT_FAIL
    assert "not UTF-8" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not project_dir.exists() and llm_server.requests == []


def test_text_on_standard_input_is_sent(capsys: pytest.CaptureFixture[str], project_dir: Path,
                                        llm_server: FakeLLMServer,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("Grüße\n".encode())))
    llm_server.script(Answer("Hallo"))
    code, out, _ = cli(capsys, "send", project_dir, "--new", "--model", MODEL,
                       "--api-base", llm_server.url, "-")
    assert code == 0 and out == "Hallo\n"
    assert llm_server.requests[0].body["messages"][-1]["content"] == "Grüße\n"


@pytest.mark.parametrize("text", ["caf\udce9", "a\x00b"])
def test_argv_that_is_not_text_is_refused(capsys: pytest.CaptureFixture[str], project_dir: Path,
                                          llm_server: FakeLLMServer, text: str) -> None:
    code, _, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL,
                       "--api-base", llm_server.url, text)
    assert code == EXIT_FAIL and "nothing was sent" in err and "Traceback" not in err
    assert not project_dir.exists() and llm_server.requests == []


def test_an_import_killed_while_writing_leaves_nothing_or_everything(tmp_path: Path) -> None:
    import json
    import os
    import signal
    import subprocess
    import time

    from core.store.project import Project

    root = Path(__file__).resolve().parents[2]
    project = tmp_path / "proj"
    Project.open(project).close()
    big = tmp_path / "big.json"
    n = 60_000
    big.write_text(json.dumps({"messages": [{"role": "user", "content": f"message {i} " * 20}
                                            for i in range(n)]}))
    proc = subprocess.Popen([sys.executable, "-m", "app", "import", str(project), str(big)],
                            cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conversations = project / ".workbench" / "conversations"
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if any(p.name.startswith(".importing-") for p in conversations.iterdir()):
                break  # caught it writing
            time.sleep(0.002)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    with Project.open(project) as p:
        rows = p.conversations.list()
        assert [r.message_count for r in rows] in ([], [n])  # never a half conversation
        assert not any(x.name.startswith(".") and x.is_dir() for x in conversations.iterdir())


def run_on_terminal(args: list[str]) -> str:
    """Run the CLI with its standard output on a pseudo-terminal; what the terminal received."""
    import os
    import pty
    import select
    import subprocess
    import time

    root = Path(__file__).resolve().parents[2]
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "app", *args], cwd=root, stdout=slave,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(root)})
    os.close(slave)
    received = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other side closed
                break
            if not chunk:
                break
            received += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    return received.decode("utf-8", "replace")


def test_control_bytes_in_titles_and_messages_are_escaped_on_a_terminal(tmp_path: Path) -> None:
    from core.model import ConversationMessage
    from core.store.project import Project

    project = tmp_path / "proj"
    with Project.open(project) as p:
        conv = p.conversations.import_conversation(
            "evil\x1b]0;pwned\x07title",
            [ConversationMessage(role="user", content="clear\x1b[2J\x00screen")])
    listing = run_on_terminal(["list", str(project)])
    assert "evil" in listing and "\x1b" not in listing and "\\x1b]0;pwned\\x07" in listing
    markdown = run_on_terminal(["export", str(project), "-c", conv.id, "--format", "markdown"])
    assert "clear" in markdown and "\x1b" not in markdown and "\x00" not in markdown
    assert "\\x1b[2J\\x00screen" in markdown
    # Into a pipe or a file the bytes are data and stay exactly as they are.
    import subprocess
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-m", "app", "export", str(project), "-c", conv.id,
                          "--format", "markdown"], cwd=root, capture_output=True, timeout=60)
    assert b"clear\x1b[2J\x00screen" in out.stdout


def _immutable(path: Path) -> bool:
    import subprocess

    try:
        return subprocess.run(["chattr", "+i", str(path)], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _mutable(path: Path) -> None:
    import subprocess

    subprocess.run(["chattr", "-i", str(path)], capture_output=True, timeout=10)


@pytest.mark.parametrize("which", ["messages.jsonl", "conversation.json"])
def test_an_immutable_log_or_metadata_file_is_one_sentence(capsys: pytest.CaptureFixture[str],
                                                           project_dir: Path,
                                                           llm_server: FakeLLMServer,
                                                           which: str) -> None:
    llm_server.script(Answer("first"))
    code, _, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL,
                       "--api-base", llm_server.url, "hi")
    assert code == 0, err
    conv = err.split()[1]
    target = project_dir / ".workbench" / "conversations" / conv / which
    if not _immutable(target):
        pytest.skip("chattr +i is not permitted here (needs CAP_LINUX_IMMUTABLE)")
    try:
        code, out, err = cli(capsys, "send", project_dir, "-c", conv, "--mode", "agent",
                             "--model", MODEL, "--api-base", llm_server.url, "again")
    finally:
        _mutable(target)
    assert code == EXIT_FAIL and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "not writable" in err
    assert len(llm_server.requests) == 1  # nothing was sent


def _send_process(project: Path, server_url: str, *extra: str) -> subprocess.Popen[bytes]:
    root = Path(__file__).resolve().parents[2]
    return subprocess.Popen(
        [sys.executable, "-m", "app", "send", str(project), "--new", "--model", MODEL,
         "--api-base", server_url, *extra, "go"],
        cwd=root, env={**os.environ, "PYTHONPATH": str(root), "WORKBENCH_SANDBOX": "none"},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(proc: subprocess.Popen[bytes], said: bytes, seconds: float = 60) -> bytes:
    """What the process wrote on stderr until it said `said` (fails at the deadline)."""
    assert proc.stderr is not None
    os.set_blocking(proc.stderr.fileno(), False)
    seen = b""
    deadline = time.monotonic() + seconds
    while said not in seen:
        assert time.monotonic() < deadline and proc.poll() is None, seen.decode()
        seen += proc.stderr.read() or b""
        time.sleep(0.05)
    return seen


def _interrupt(proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    try:
        code = proc.wait(timeout=20)  # at once, not at the next Enter
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.stderr is not None
    os.set_blocking(proc.stderr.fileno(), True)
    rest = proc.stderr.read().decode()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    return code, rest


def test_ctrl_c_while_an_answer_streams_exits_130_and_keeps_what_arrived(
        tmp_path: Path, llm_server: FakeLLMServer) -> None:
    llm_server.script(Answer("word " * 400, delay=0.05))
    proc = _send_process(tmp_path / "proj", llm_server.url)
    deadline = time.monotonic() + 60
    while not llm_server.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # some words have arrived
    code, err = _interrupt(proc)
    assert code == EXIT_INTERRUPTED and "Stopped by you" in err, err
    with Project.open(tmp_path / "proj") as p:
        conv = p.conversations.list()[0].id
        last = p.conversations.load(conv).messages[-1]
    assert last.role == "assistant" and last.status == "aborted" and "word" in last.text()


def test_ctrl_c_at_the_approval_prompt_exits_at_once(tmp_path: Path,
                                                     llm_server: FakeLLMServer) -> None:
    llm_server.script(ToolCalls([("w1", "write_file",
                                  json.dumps({"path": "a.txt", "content": "x"}))]))
    proc = _send_process(tmp_path / "proj", llm_server.url, "--mode", "agent",
                         "--approve", "ask")
    _wait_for(proc, b"Allow?")
    code, err = _interrupt(proc)
    assert code == EXIT_INTERRUPTED and "interrupted" in err, err
    assert not (tmp_path / "proj" / "a.txt").exists()


def test_send_new_on_a_full_disk_leaves_no_empty_conversation(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    Project.open(project_dir).close()
    with disk_full(monkeypatch):
        code, out, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL,
                             "--api-base", llm_server.url, "hello")
    assert code == EXIT_FAIL and "could not be saved" in err, err
    assert llm_server.requests == []  # nothing sent that is not kept
    with Project.open(project_dir) as p:
        assert p.conversations.list() == []
    assert [d for d in (project_dir / ".workbench" / "conversations").iterdir()] == []
