"""Auto-titles: after the first answer of an untitled conversation, a short title from the model
(the summary model when there is one), else the opening of the first message; a title the user
set is never replaced. Through the real loopback server, from the CLI and the window."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.cli.main import main
from core.llm.runtime import load_litellm
from core.store.project import Project
from core.titles import clean_title, opening_title
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, HttpError
from tests.helpers.gui import open_window, run_until, type_and_send, use_fake_provider


def cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def titles(project: Path) -> dict[str, str]:
    with Project.open(project, read_only=True) as p:
        return {r.id: r.title for r in p.conversations.list()}


def test_a_model_answer_becomes_a_clean_title() -> None:
    assert clean_title('Title: "The Capital of France."\nMore text') == "The Capital of France"
    assert clean_title("**Fixing the flaky CI job**") == "Fixing the flaky CI job"
    assert clean_title("「東京の天気」。") == "「東京の天気」"
    assert clean_title(" \n\"\"") is None
    assert opening_title("How do I\nrebase onto main?") == "How do I"
    assert opening_title("please look at the failing test in the parser module") == \
        "please look at the failing test…"
    # a small model's "title" is a sentence: its first words (SmolLM2's, from the real check)
    assert clean_title("This is a great title for the conversation. It has a positive tone") \
        == "This is a great title for…"
    assert clean_title("Your request was fulfilled") == "Your request was fulfilled"


def test_send_new_titles_from_the_opening_words_without_waiting_for_a_model(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORKBENCH_AUTO_TITLE", raising=False)
    llm_server.script(Answer("Paris is the capital."))
    code, _, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL, "--api-base",
                       llm_server.url, "What is the capital of France?")
    assert code == 0 and "titled “What is the capital of France?”" in err
    assert len(llm_server.requests) == 1  # no title request: the command did not wait for one


def test_send_new_with_title_model_asks_the_model(capsys: pytest.CaptureFixture[str],
                                                  project_dir: Path, llm_server: FakeLLMServer,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORKBENCH_AUTO_TITLE", raising=False)
    llm_server.script(Answer("Paris is the capital."),
                      Answer("The capital of France is Paris, a city of two million\nmore"))
    code, _, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL, "--api-base",
                       llm_server.url, "--title-model", "What is the capital of France?")
    assert code == 0 and "titled “The capital of France is Paris…”" in err
    assert len(llm_server.requests) == 2


def test_send_new_is_titled_by_the_summary_model(capsys: pytest.CaptureFixture[str],
                                                 project_dir: Path, llm_server: FakeLLMServer,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_AUTO_TITLE", "1")
    monkeypatch.setenv("WORKBENCH_SUMMARY_MODEL", "openai/cheap-model")
    llm_server.script(Answer("Paris is the capital."), Answer('"Capital of France."'))
    code, _, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL, "--api-base",
                       llm_server.url, "What is the capital of France?")
    assert code == 0, err
    conv = err.split()[1]
    assert "titled “Capital of France”" in err
    assert titles(project_dir)[conv] == "Capital of France"
    asked = llm_server.requests[1].body
    assert asked["model"] == "cheap-model" and "six words" in asked["messages"][0]["content"]
    assert "What is the capital of France?" in asked["messages"][1]["content"]
    # The next answer does not title it again.
    llm_server.script(Answer("About 2 million."))
    code, _, err = cli(capsys, "send", project_dir, "-c", conv, "--model", MODEL, "--api-base",
                       llm_server.url, "How many people?")
    assert code == 0 and "titled" not in err and len(llm_server.requests) == 3


def test_without_a_model_the_opening_words_and_a_users_title_stays(
        capsys: pytest.CaptureFixture[str], project_dir: Path, llm_server: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_AUTO_TITLE", "1")
    llm_server.script(Answer("Sure."), HttpError(500, "down"))
    code, _, err = cli(capsys, "send", project_dir, "--new", "--model", MODEL, "--api-base",
                       llm_server.url, "Please review the parser changes in src/parse.py today")
    assert code == 0, err
    conv = err.split()[1]
    assert titles(project_dir)[conv] == "Please review the parser changes in…"
    llm_server.script(Answer("Done."))
    code, _, err = cli(capsys, "send", project_dir, "--new", "--title", "Mine", "--model", MODEL,
                       "--api-base", llm_server.url, "anything")
    assert code == 0 and len(llm_server.requests) == 3  # no title request for a named one
    assert titles(project_dir)[err.split()[1]] == "Mine"
    with Project.open(project_dir) as p:
        fresh = p.conversations.create()
        p.conversations.rename(fresh.id, "New conversation")  # the user's, even if it reads so
        assert not p.conversations.set_title_if_untitled(fresh.id, "Other", "model")


@pytest.mark.gui
def test_the_window_titles_in_the_background_and_the_list_shows_it(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    load_litellm()
    use_fake_provider(monkeypatch, llm_server, auto_summary="0", auto_title="1")
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Answer("Bonjour !"), Answer("Salutations en français"))
    type_and_send(qtbot, window, "Dis bonjour en francais")
    run_until(qloop, lambda: "Salutations en français" in window.conversations.titles())
    assert len(llm_server.requests) == 2
    conv = controller.current_id
    window.conversations.rename_requested.emit(conv, "Greetings")
    llm_server.script(Answer("Salut !"))
    type_and_send(qtbot, window, "Encore")
    run_until(qloop, lambda: not controller.busy() and len(llm_server.requests) == 3)
    assert window.conversations.titles() == ["Greetings"]
    window.close()
