"""A window learned from a server's refusal belongs to that server (address and model); a
window the user states wins over it; `workbench forget-window` drops it."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.context.calibration import Calibration
from core.settings import SettingsStore
from tests.helpers.cli import cli
from tests.helpers.fake_llm import MODEL, Answer, ContextLengthError, FakeLLMServer


def send(capsys: pytest.CaptureFixture[str], project: Path, server: FakeLLMServer, text: str,
         *extra: object) -> tuple[int, str, str]:
    return cli(capsys, "send", project, "--new", "--model", MODEL, "--api-base", server.url,
               *extra, text)


def test_a_learned_window_is_the_server_s_and_a_stated_one_wins(
        capsys: pytest.CaptureFixture[str], project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_AUTO_TITLE", "0")
    llm_server.script(ContextLengthError(limit=100, requested=900))
    code, _, err = send(capsys, project_dir, llm_server, "hello")
    assert code == 2 and "accepts 100 tokens" in err
    calibration = Calibration(SettingsStore().folder / "calibration.json")
    assert calibration.window(MODEL, llm_server.url) == 100
    assert calibration.window(MODEL) is None  # not the model's everywhere

    with FakeLLMServer() as other:  # the same model at another server: not held to 100
        other.script(Answer("a roomier server"))
        code, out, _ = send(capsys, project_dir, other, "hello there")
        assert code == 0 and out == "a roomier server\n"

    code, _, err = send(capsys, project_dir, llm_server, "again")  # refused at once
    assert code == 2 and "forget-window" in err and len(llm_server.requests) == 1
    llm_server.script(Answer("the stated window wins"))
    code, out, _ = send(capsys, project_dir, llm_server, "stated", "--context-window", "4096")
    assert code == 0 and out == "the stated window wins\n"

    code, out, _ = cli(capsys, "forget-window", project_dir, "--model", MODEL,
                       "--api-base", llm_server.url)
    assert code == 0 and "forgot the window learned for" in out
    assert Calibration(calibration.path).window(MODEL, llm_server.url) is None  # as read anew
    code, out, _ = cli(capsys, "forget-window", project_dir, "--model", MODEL,
                       "--api-base", llm_server.url)
    assert code == 0 and "nothing to forget" in out
    llm_server.script(Answer("asked again"))
    code, out, _ = send(capsys, project_dir, llm_server, "third try")
    assert code == 0 and out == "asked again\n"


def new_conversation(folder: Path) -> str:
    """A conversation with one message of the user's, as `workbench context` needs one."""
    from core.model import ConversationMessage
    from core.store.project import Project

    with Project.open(folder, create=True) as project:
        conv = project.conversations.create("hello").id
        project.conversations.append_many(conv, [ConversationMessage(role="user",
                                                                      content="hello")])
    return conv


def test_a_server_that_states_no_window_is_counted_once_before_the_first_turn(
        capsys: pytest.CaptureFixture[str], project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-cpp-python with --n_ctx 2048 says nothing of its window (no /props, nothing on
    /v1/models): requests were planned for the 8,192 assumed until the first refusal. One
    count of a prompt over 8,192 tokens, which it refuses naming 2,048, learns it first."""
    from core.context import server_window
    from core.llm import compat

    monkeypatch.setenv("WORKBENCH_AUTO_TITLE", "0")
    llm_server.llama_cpp_python, llm_server.n_ctx = True, 2048
    conv = new_conversation(project_dir)
    code, out, _ = cli(capsys, "context", project_dir, "-c", conv, "--model", MODEL,
                       "--api-base", llm_server.url)
    assert code == 0 and "window 2,048 (provider)" in out, out  # before any turn
    assert llm_server.probes.count("count:window") == 1 and llm_server.requests == []
    calibration = Calibration(SettingsStore().folder / "calibration.json")
    assert calibration.window(MODEL, llm_server.url) == 2048  # as a refusal's, per server
    assert calibration.window_count(llm_server.url, MODEL) == (True, None)

    server_window.forget_all()  # the next command: a new process
    compat.forget_all()
    llm_server.script(Answer("Hello."))
    code, out, _ = cli(capsys, "send", project_dir, "-c", conv, "--model", MODEL,
                       "--api-base", llm_server.url, "--max-tokens", "4000", "hi")
    assert code == 0 and out == "Hello.\n"
    assert llm_server.probes.count("count:window") == 1  # asked once
    # built within 2,048 from the start (the answer's room half of it, not 2,048 of 8,192),
    # never refused; asked again only whole, as llama-cpp-python takes a request with tools
    first, *again = (r.body for r in llm_server.requests)
    assert first["stream"] and first["max_tokens"] == 1024
    assert [(b["messages"], b["max_tokens"], "stream" in b) for b in again] == \
        [(first["messages"], 1024, False)]

    # a window the user states wins, and nothing is counted for it
    other = "openai/other-model"
    code, out, _ = cli(capsys, "context", project_dir, "-c", conv, "--model", other,
                       "--api-base", llm_server.url, "--context-window", "4096")
    assert code == 0 and "window 4,096 (override)" in out, out
    assert llm_server.probes.count("count:window") == 1
    # forget-window drops what the count learned: counted again next time
    code, out, _ = cli(capsys, "forget-window", project_dir, "--model", MODEL,
                       "--api-base", llm_server.url)
    assert code == 0 and "forgot the window learned for" in out
    llm_server.n_ctx = 4096  # restarted with more
    code, out, _ = cli(capsys, "context", project_dir, "-c", conv, "--model", MODEL,
                       "--api-base", llm_server.url)
    assert "window 4,096 (provider)" in out and llm_server.probes.count("count:window") == 2


def test_a_count_the_server_takes_is_remembered_and_not_read_twice(
        capsys: pytest.CaptureFixture[str], project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    """A server with a window over the one assumed reads the count whole (minutes, on a CPU):
    once. The plan stays the default's, and the note says the window is larger."""
    from core.context import server_window

    conv = new_conversation(project_dir)
    for _ in range(2):
        server_window.forget_all()  # each command a new process
        code, out, _ = cli(capsys, "context", project_dir, "-c", conv, "--model", MODEL,
                           "--api-base", llm_server.url)
        assert code == 0 and "window 8,192 (default)" in out, out
        assert "took a count of 8,2" in out and "larger than the 8,192 assumed" in out, out
    assert llm_server.probes.count("count:window") == 1


def test_a_hosted_provider_is_never_counted(
        project_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A count over the window is a request someone pays for at a hosted API: only a server
    on this machine or the local network is asked (core.llm.compat.is_local)."""
    from core.context import server_window
    from core.context.service import ProjectContext
    from core.settings import LLMSettings
    from core.store.project import Project

    counted: list[str] = []
    monkeypatch.setattr(server_window, "_ask", lambda base, model: (True, None))
    monkeypatch.setattr("core.context.service.count_window",
                        lambda base, model: counted.append(base))
    monkeypatch.setattr("core.context.service.count_prompt",  # nor the sample counts
                        lambda base, model, *_: counted.append(f"sample {base}"))
    with Project.open(project_dir, create=True) as project:
        context = ProjectContext(project.conversations,
                                 calibration=Calibration(tmp_path / "calibration.json"))
        for base in ("https://openrouter.ai/api/v1", "https://llm.example.com/v1", None):
            budget = context.budget(None, LLMSettings(model="openai/never-heard-of-it",
                                                      api_base=base))
            assert budget.source == "default"
        local = LLMSettings(model="openai/never-heard-of-it", api_base="http://127.0.0.1:9/v1")
        context.budget(None, local)
    # (the local one: the test's own check that it would see a count)
    assert counted == ["sample http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"]
