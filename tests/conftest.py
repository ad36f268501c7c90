"""Shared fixtures: an isolated environment for every test, a loopback LLM server, a project."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# GUI tests run headless wherever pytest is started from (make test sets it too).
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from core.redact import environment_secrets, find_secret
from core.store.project import Project
from tests.helpers.fake_llm import FakeLLMServer

pytest_plugins = ["tests.helpers.gui"]

_KEY_VARS = [v for v in os.environ if v.endswith("_API_KEY") or v.startswith("WORKBENCH_")]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that need a QApplication are marked `gui` automatically, so `-m "not gui"` runs
    the rest without a display."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if {"qtbot", "qapp", "qloop"} & set(fixtures):
            item.add_marker(pytest.mark.gui)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test reads or writes the real user's config, data, keyring or API keys."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    for var in _KEY_VARS:
        monkeypatch.delenv(var, raising=False)
    # A scripted failure should fail, not be retried behind the test's back; the retry tests
    # turn retries on themselves.
    monkeypatch.setenv("WORKBENCH_AUTO_RETRIES", "0")
    # A title request after the first answer would take the next scripted reply of tests about
    # something else; the title tests turn titles on themselves.
    monkeypatch.setenv("WORKBENCH_AUTO_TITLE", "0")
    # The loopback server answers from a thread of the test's own process, where a command's
    # litellm import competes with it for the GIL: on a loaded two-core machine its answer to
    # "what is your window" can take longer than the second a real server gets, and the
    # command then plans for the default window. The test about late answers sets its own.
    from core.context import server_window

    monkeypatch.setattr(server_window, "TIMEOUT_S", 10.0)
    return home


@pytest.fixture(autouse=True)
def no_key_in_the_apps_folders(isolated_env: Path) -> Iterator[None]:
    """After every test: nothing the app wrote in its config, data, state and cache folders
    holds a key (the project folder has its own check: `project_dir`). The user's own
    `mcp.json` (a server's env tokens are theirs to keep), the approvals' random key and
    tiktoken's decoded tables are not the app's writing."""
    yield
    for path in sorted(p for p in isolated_env.rglob("*") if p.is_file() and not p.is_symlink()
                       and p.name not in ("mcp.json", "approvals.key")
                       and "tokenizers" not in p.parts):
        _no_secret_in(str(path.relative_to(isolated_env)), _head_and_tail(path))


def _no_secret_in(what: str, text: str) -> None:
    """Fails the test when `text` holds a key: a key-shaped string, or the value of one of the
    environment's secret-named variables (the test's own fake keys included)."""
    found = find_secret(text, environment_secrets(os.environ))
    assert found is None, f"a key reached {what}: {found[:12]}…"


@pytest.fixture(autouse=True)
def forget_remembered_keys() -> Iterator[None]:
    """Keys a test made known (an MCP server's `env`) are redacted in that test only."""
    yield
    from core.llm import compat
    from core.redact import forget_all

    forget_all()
    compat.forget_all()  # what a loopback server showed it needs is the test's own


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    """The loopback server; after the test, no request body it received held a key."""
    with FakeLLMServer() as server:
        yield server
        for request in server.requests:
            _no_secret_in("a request body", json.dumps(request.body))


@pytest.fixture
def project_dir(tmp_path: Path) -> Iterator[Path]:
    """A project folder; after the test, nothing the app wrote in `.workbench/` holds a key."""
    folder = tmp_path / "project"
    yield folder
    state = folder / ".workbench"
    if state.is_dir():
        user_config = state / "mcp.json"  # the user's own (its `env` holds tokens)
        for path in sorted(p for p in state.rglob("*") if p.is_file() and not p.is_symlink()
                           and p != user_config):
            _no_secret_in(str(path.relative_to(folder)), _head_and_tail(path))


SCAN_BYTES = 8 * 2**20


def _head_and_tail(path: Path) -> str:
    """The file's text, or of a huge one (a runaway command's kept output: 140 MB of `yes`
    takes the regexes 13 s) its first and last SCAN_BYTES, where a leaked key would sit."""
    with path.open("rb") as f:
        data = f.read(2 * SCAN_BYTES + 1)
        if len(data) > 2 * SCAN_BYTES:
            f.seek(-SCAN_BYTES, 2)
            data = data[:SCAN_BYTES] + b"\n" + f.read()
    return data.decode("utf-8", errors="replace")


@pytest.fixture
def project(project_dir: Path) -> Iterator[Project]:
    """A writable project in a temporary folder, closed (lock released) after the test."""
    p = Project.open(project_dir)
    yield p
    p.close()
