"""The mistakes made with a local server's address get its own words, at once: a base URL
without /v1, and an address where nothing listens."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from app.cli.main import main
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer


def send(capsys: pytest.CaptureFixture[str], project_dir: Path,
         api_base: str) -> tuple[int, str, str]:
    code = main(["send", str(project_dir), "--new", "--model", MODEL, "--api-base", api_base,
                 "hello"])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_base_url_without_v1_is_named_as_such(capsys: pytest.CaptureFixture[str],
                                                project_dir: Path,
                                                llm_server: FakeLLMServer) -> None:
    # llama-cpp-python's server answers POST /chat/completions with 404 {"detail": "Not
    # Found"}; litellm calls that an unknown model, and so did we.
    root = llm_server.url.removesuffix("/v1")
    llm_server.script(Answer("hi"))
    code, out, err = send(capsys, project_dir, root)
    assert code == 2 and out == ""
    assert f"The server at {root} answered 404" in err and f"try {root}/v1" in err, err
    assert "does not know the model" not in err
    code, out, err = send(capsys, project_dir, llm_server.url)  # the suggested address works
    assert code == 0 and out == "hi\n", err


def test_an_address_where_nothing_listens_fails_at_once_naming_it(
        capsys: pytest.CaptureFixture[str], project_dir: Path) -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, out, err = send(capsys, project_dir, f"http://127.0.0.1:{port}/v1")
    assert code == 2 and out == ""
    assert f"Nothing is listening at http://127.0.0.1:{port}/v1 (connection refused)" in err
    assert "Retrying" not in err  # it was retried for 22 s: refused at once, every time
