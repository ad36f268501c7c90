"""The context window a model's own server states is asked once and applies to the budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.context import server_window
from core.context.service import ProjectContext
from core.settings import LLMSettings
from core.store.project import Project
from tests.helpers.fake_llm import MODEL, FakeLLMServer


@pytest.fixture(autouse=True)
def fresh() -> None:
    server_window.forget_all()


def settings(server: FakeLLMServer, window: int | None = None) -> LLMSettings:
    return LLMSettings(model=MODEL, api_base=server.url, max_output_tokens=1000,
                       context_window=window)


@pytest.mark.parametrize("path, body, expected", [
    ("/v1/models", {"data": [{"id": "other", "max_model_len": 4096},
                             {"id": "test-model", "max_model_len": 32768}]}, 32768),
    ("/api/v0/models/test-model", {"loaded_context_length": 16384}, 16384),
    ("/props", {"default_generation_settings": {"n_ctx": 8000}}, 8000),
    ("/api/show", {"parameters": "temperature 0.7\nnum_ctx 12288",
                   "model_info": {"llama.context_length": 131072}}, 12288),
])
def test_each_kind_of_server_states_its_window(project: Project, llm_server: FakeLLMServer,
                                               path: str, body: dict[str, Any],
                                               expected: int) -> None:
    llm_server.info[path] = body
    conv = project.conversations.create()
    service = ProjectContext(project.conversations)
    budget = service.budget(conv.id, settings(llm_server))
    assert (budget.window, budget.source) == (expected, "server")
    assert llm_server.requests == []  # asking never counts as (or costs) a chat request


def test_the_server_is_asked_once_and_the_window_thread_never_asks(
        project: Project, llm_server: FakeLLMServer) -> None:
    conv = project.conversations.create()
    context = ProjectContext(project.conversations)
    assert context.budget(conv.id, settings(llm_server), ask_servers=False).source != "server"
    llm_server.info["/props"] = {"default_generation_settings": {"n_ctx": 8000}}
    assert context.budget(conv.id, settings(llm_server)).window == 8000  # the engine's thread
    del llm_server.info["/props"]  # a second ask would find nothing now
    assert context.budget(conv.id, settings(llm_server)).window == 8000
    # the window's thread: what the server said, without asking
    assert context.budget(conv.id, settings(llm_server), ask_servers=False).window == 8000


def test_the_smaller_of_the_setting_and_the_servers_window_applies(
        project: Project, llm_server: FakeLLMServer) -> None:
    """A server that runs its model with 8,000 tokens refuses a request built for the 20,000
    set in Settings; a conversation set to 3,000 gets 3,000. Whichever applies is named."""
    llm_server.info["/props"] = {"default_generation_settings": {"n_ctx": 8000}}
    conv = project.conversations.create()
    service = ProjectContext(project.conversations)
    budget = service.budget(conv.id, settings(llm_server, window=20000))
    assert (budget.window, budget.source) == (8000, "server")
    assert budget.note is not None and "fewer than the 20,000 set in Settings" in budget.note
    project.conversations.update_meta(conv.id, context_window=3000)
    budget = service.budget(conv.id, settings(llm_server, window=20000))
    assert (budget.window, budget.source, budget.note) == (3000, "override", None)


def test_an_unknown_model_keeps_most_of_a_guessed_window_for_the_request(project: Project) -> None:
    conv = project.conversations.create()
    budget = ProjectContext(project.conversations).budget(
        conv.id, LLMSettings(model="openai/never-heard-of-it", max_output_tokens=4096))
    assert budget.source == "default" and budget.reserved_output == 2048
    assert budget.usable > 5500


def test_what_a_server_said_is_remembered_across_runs_until_a_request_fails(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer) -> None:
    # Every CLI command used to ask the server's four information routes again (a process
    # each); now what it said (or that it said nothing) is kept beside the calibration, and a
    # failed request makes it asked anew (the server may have been restarted otherwise).
    import json

    from app.cli.main import main
    from tests.helpers.fake_llm import Answer, HttpError

    def cli(*args: object) -> tuple[int, str]:
        server_window.forget_all()  # each command is a new process
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        assert code in (0, 2), err
        return code, out

    src = project_dir.parent / "c.json"
    project_dir.mkdir(parents=True, exist_ok=True)
    src.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    _, out = cli("import", project_dir, src)
    conv = out.strip().splitlines()[-1]
    flags = ("-c", conv, "--model", MODEL, "--api-base", llm_server.url)
    llm_server.info["/props"] = {"default_generation_settings": {"n_ctx": 2048}}
    _, out = cli("context", project_dir, *flags)
    assert "window 2,048 (server)" in out, out
    asked = len(llm_server.probes)
    assert asked >= 1
    llm_server.script(Answer("fine"))
    assert cli("send", project_dir, *flags, "hello")[0] == 0
    _, out = cli("context", project_dir, *flags)
    assert "window 2,048 (server)" in out and len(llm_server.probes) == asked  # not asked
    llm_server.info["/props"] = {"default_generation_settings": {"n_ctx": 4096}}  # restarted
    llm_server.script(HttpError(500, "model reloading"))
    assert cli("send", project_dir, *flags, "again")[0] == 2
    _, out = cli("context", project_dir, *flags)
    assert "window 4,096 (server)" in out and len(llm_server.probes) > asked, out


def test_the_window_is_given_on_the_command_line(capsys: pytest.CaptureFixture[str],
                                                 project_dir: Path,
                                                 llm_server: FakeLLMServer) -> None:
    import json

    from app.cli.main import main

    src = project_dir.parent / "c.json"
    project_dir.mkdir(parents=True, exist_ok=True)
    src.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    assert main(["import", str(project_dir), str(src)]) == 0
    conv = capsys.readouterr().out.strip().splitlines()[-1]
    flags = ["-c", conv, "--model", "openai/unknown-local", "--api-base", llm_server.url]
    assert main(["context", str(project_dir), *flags]) == 0
    out = capsys.readouterr().out
    # (the loopback server states no window, and took the count over the default: larger)
    assert "window 8,192 (default)" in out and "its window is larger than the 8,192" in out \
        and "--context-window" in out, out
    assert main(["context", str(project_dir), *flags, "--context-window", "3000"]) == 0
    out = capsys.readouterr().out
    assert "window 3,000 (override)" in out and "assuming" not in out, out
    assert main(["context", str(project_dir), *flags, "--context-window", "-5"]) != 0
    err = capsys.readouterr().err
    assert "context window from the command line must be a positive whole number" in err


def test_a_local_server_is_asked_once_to_count_a_sample_and_whether_it_counts_tools(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer) -> None:
    # llama-cpp-python streams no usage, so no answer ever brings a count to calibrate
    # against, and its chat template may leave the tools out of the prompt: the meter counted
    # 514 tokens of tools the server never read (+26% against its own count). A local server
    # is asked once to count a small sample, with and without a tool offered.
    import json

    from app.cli.main import main
    from tests.helpers.fake_llm import Answer

    src = project_dir.parent / "c.json"
    project_dir.mkdir(parents=True, exist_ok=True)
    src.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    assert main(["import", str(project_dir), str(src)]) == 0
    conv = capsys.readouterr().out.strip().splitlines()[-1]
    flags = ["-c", conv, "--model", MODEL, "--api-base", llm_server.url]
    llm_server.count_tools = False
    assert main(["context", str(project_dir), *flags, "--mode", "agent"]) == 0
    out = capsys.readouterr().out
    assert llm_server.probes.count("count") == 1 and llm_server.probes.count("count+tools") == 1
    assert "tools 0," in out and "leaves the tools out of the prompt" in out, out
    assert "calibrated x" in out and "from 1 count the provider reported" in out, out
    assert llm_server.requests == []  # counting is not a chat request
    server_window.forget_all()  # a new process: nothing is asked again
    llm_server.script(Answer("ok"))
    assert main(["send", str(project_dir), *flags, "hello"]) == 0
    capsys.readouterr()
    assert llm_server.probes.count("count") == 1 and len(llm_server.requests) == 1


def test_a_server_that_does_not_answer_in_time_is_asked_again_not_taken_as_silent(
        project: Project, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    # A local server busy with a generation (or still starting) answers late: what it would
    # say is not known yet. It was remembered as saying nothing beside the calibration, so
    # every later run (and window) built for the default window until a request failed.
    from core.context.calibration import Calibration

    def context() -> ProjectContext:
        return ProjectContext(project.conversations,
                              calibration=Calibration(tmp_path / "calibration.json"))

    monkeypatch.setattr(server_window, "TIMEOUT_S", 0.2)
    llm_server.info["/props"] = {"default_generation_settings": {"n_ctx": 8000}}
    llm_server.info_delay = 0.6
    conv = project.conversations.create()
    assert context().budget(conv.id, settings(llm_server)).source != "server"
    llm_server.info_delay = 0.0
    server_window.forget_all()  # the next run: a new process, the calibration on disk
    budget = context().budget(conv.id, settings(llm_server))
    assert (budget.window, budget.source) == (8000, "server")
    llm_server.info.clear()  # what it said is remembered now: it is not asked again
    server_window.forget_all()
    assert context().budget(conv.id, settings(llm_server)).window == 8000

    # In one process, a server that did not answer is asked again after RETRY_S, not at
    # every build (the meter builds at every keystroke's pause).
    server_window.forget_all()
    llm_server.info["/props"] = {"default_generation_settings": {"n_ctx": 6000}}
    other = settings(llm_server).model_copy(update={"model": "openai/other-model"})
    llm_server.info_delay = 0.6
    window = context()
    assert window.budget(conv.id, other).source != "server"
    llm_server.info_delay = 0.0
    asked = len(llm_server.probes)
    assert window.budget(conv.id, other).source != "server" and len(llm_server.probes) == asked
    monkeypatch.setattr(server_window, "RETRY_S", 0.0)
    assert window.budget(conv.id, other).window == 6000
