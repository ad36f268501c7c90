"""The command line refuses bad input in one sentence, creates nothing, and never tracebacks."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from app.cli import EXIT_FAIL, EXIT_USAGE, _window_usage_problem, main
from tests.helpers.fake_llm import MODEL, Answer


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv", [["compact", "proj"], ["compact"], ["sned", "p", "--new", "hi"]])
def test_a_mistyped_command_is_a_usage_error_not_a_new_project(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, *argv)
    assert code == EXIT_USAGE
    assert f"{argv[0]!r}" in err and "send" in err and "export" in err  # the commands are listed
    assert list(tmp_path.iterdir()) == []  # no folder named after the typo


def test_an_explicit_path_or_existing_folder_still_opens_the_window(tmp_path: Path,
                                                                    monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "existing").mkdir()
    assert _window_usage_problem([]) is None
    assert _window_usage_problem(["existing"]) is None
    assert _window_usage_problem(["./new-project"]) is None
    assert _window_usage_problem([str(tmp_path / "other" / "new")]) is None
    (tmp_path / "notes.txt").write_text("x")
    assert "is a file" in (_window_usage_problem(["notes.txt"]) or "")


def test_binary_standard_input_is_refused_before_anything_is_created(
    capsys, project_dir: Path, llm_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\x89PNG\r\n\x1a\n\xff\xfe")))
    code, out, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL,
                         "--api-base", llm_server.url, "-")
    assert code == EXIT_FAIL
    assert "not UTF-8" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not project_dir.exists() and llm_server.requests == []


def test_text_on_standard_input_is_sent(capsys, project_dir: Path, llm_server, monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("Grüße\n".encode())))
    llm_server.script(Answer("Hallo"))
    code, out, _ = cli(capsys, "send", project_dir, "--new", "--model", MODEL,
                       "--api-base", llm_server.url, "-")
    assert code == 0 and out == "Hallo\n"
    assert llm_server.requests[0].body["messages"][-1]["content"] == "Grüße\n"


@pytest.mark.parametrize("text", ["caf\udce9", "a\x00b"])
def test_argv_that_is_not_text_is_refused(capsys, project_dir: Path, llm_server, text: str) -> None:
    code, _, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL,
                       "--api-base", llm_server.url, text)
    assert code == EXIT_FAIL and "nothing was sent" in err and "Traceback" not in err
    assert not project_dir.exists() and llm_server.requests == []
