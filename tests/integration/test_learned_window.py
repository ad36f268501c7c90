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
