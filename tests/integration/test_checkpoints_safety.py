"""Checkpoints under hostile and broken conditions: a project that ships a checkpoint repository
whose git configuration would run commands, the user's own GIT_* environment, no git at all,
files too big or inside nested repositories, and a restore killed half-way (SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from core.checkpoints.store import SIZE_LIMIT, Store
from core.checkpoints.turn import Checkpointer
from core.checkpoints.views import turns
from tests.helpers.checkpoints import files, git, make_repo, repo_state
from tests.helpers.cli import cli
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, ToolCalls

ROOT = Path(__file__).resolve().parents[2]


def one_turn(root: Path, conv: str, entry: str, change: Callable[[], None]) -> None:
    """A turn as the engine records it: before, `change()`, after."""
    recorder = Checkpointer(root, root / ".workbench").turn(conv, lambda: entry)
    assert recorder.before() is None
    change()
    assert recorder.after() is None


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    make_repo(root)
    (root / ".workbench").mkdir()
    return root


def test_a_shipped_checkpoint_repository_runs_nothing(repo: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ran"
    shadow = repo / ".workbench" / "checkpoints.git"
    (shadow / "hooks").mkdir(parents=True)
    touch = f"touch {marker}"
    (shadow / "config").write_text(
        f"[core]\n\tfsmonitor = {touch}\n\thooksPath = hooks\n\tpager = {touch}\n"
        f"[filter \"evil\"]\n\tclean = {touch}\n\tsmudge = {touch}\n\trequired = true\n"
        f"[diff]\n\texternal = {touch}\n[diff \"evil\"]\n\ttextconv = {touch}\n")
    for hook in ("post-commit", "pre-commit", "reference-transaction", "post-index-change"):
        (shadow / "hooks" / hook).write_text(f"#!/bin/sh\n{touch}\n")
        (shadow / "hooks" / hook).chmod(0o755)
    (shadow / "commondir").write_text(str(repo / ".git") + "\n")  # refs into the project's .git
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    # the user's own git environment points at the project's repository
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index"))
    monkeypatch.setenv("GIT_WORK_TREE", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='{touch}'")
    before_git = repo_state(repo.absolute())
    before = files(repo)

    def change() -> None:
        (repo / "calc.py").write_text("changed\n")

    one_turn(repo, "conv", "e1", change)
    store = Store(repo, repo / ".workbench")
    [turn] = turns(store, "conv")
    assert turn.modified == ["calc.py"]
    from core.checkpoints.views import turn_diff, undo

    assert "+changed" in turn_diff(store, "conv", "e1")
    undo(store, "conv", "e1")
    assert files(repo) == before
    assert not marker.exists()
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_INDEX_FILE")
    monkeypatch.delenv("GIT_WORK_TREE")
    monkeypatch.delenv("GIT_CONFIG_PARAMETERS")
    assert repo_state(repo) == before_git
    assert "checkpoints" not in git(repo, "for-each-ref")


def test_without_git_a_turn_says_so_once_and_works(capsys: pytest.CaptureFixture[str],
                                                   project_dir: Path, llm_server: FakeLLMServer,
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    project_dir.mkdir()
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    llm_server.script(
        ToolCalls([("w1", "write_file", '{"path": "a.txt", "content": "1"}')]),
        ToolCalls([("w2", "write_file", '{"path": "b.txt", "content": "2"}')]),
        Answer("Wrote them."))
    code, out, err = cli(capsys, "send", project_dir, "--new", "--mode", "agent", "--model",
                         MODEL, "--api-base", llm_server.url, "--approve", "always", "write")
    assert code == 0, err
    assert out.endswith("Wrote them.\n")
    assert (project_dir / "a.txt").read_text() == "1" and (project_dir / "b.txt").exists()
    assert err.count("git is not installed") == 1
    assert not (project_dir / ".workbench" / "checkpoints.git").exists()
    conv = err.split("conversation ", 1)[1].split()[0]
    code, _, err = cli(capsys, "checkpoints", project_dir, "-c", conv)
    assert code == 1 and "git is not installed" in err


def test_big_files_nested_repositories_and_ignored_files_are_left_out(repo: Path) -> None:
    nested = repo / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    (nested / "lib.c").write_text("int x;\n")

    def change() -> None:
        (repo / "big.bin").write_bytes(b"\0" * (SIZE_LIMIT + 1))
        (repo / "small.txt").write_text("small\n")
        (repo / "trace.log").write_text("ignored by .gitignore\n")
        (nested / "lib.c").write_text("int y;\n")

    one_turn(repo, "conv", "e1", change)
    [turn] = turns(Store(repo, repo / ".workbench"), "conv")
    assert turn.added == ["small.txt"] and turn.modified == [] and turn.deleted == []
    assert set(turn.skipped) == {"big.bin", "vendor/lib"}
    assert "larger than 5 MB" in turn.skipped["big.bin"]
    assert "nested git repository" in turn.skipped["vendor/lib"]


def test_a_restore_killed_half_way_is_finished_by_the_next_use(repo: Path,
                                                               tmp_path: Path) -> None:
    many = [f"src/m{i:03}.py" for i in range(300)]
    for name in many:
        (repo / name).parent.mkdir(exist_ok=True)
        (repo / name).write_text(f"v = {name!r}  # before\n")
    before = files(repo)

    def change() -> None:
        for name in many:
            (repo / name).write_text("v = 'after'\n")
        (repo / "src" / "added.py").write_text("added\n")

    one_turn(repo, "conv", "e1", change)
    after = files(repo)
    marker = tmp_path / "half-way"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.checkpoint_restorer",
                             str(repo), "conv", "e1", "150", str(marker)], env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, "the restorer ended before it was half-way"
            assert time.monotonic() < deadline, "the restorer never got half-way"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    half = files(repo)
    assert half != before and half != after  # really killed in the middle
    journal = json.loads((repo / ".workbench" / "checkpoints.journal").read_text())
    assert journal["entry"] == "e1"

    store = Store(repo, repo / ".workbench")  # the next use (the project opened again)
    [turn] = turns(store, "conv")
    assert files(repo) == before
    assert turn.undone
    assert not (repo / ".workbench" / "checkpoints.journal").exists()


def test_a_snapshot_that_fails_is_a_notice_and_the_turn_goes_on(capsys: pytest.CaptureFixture[str],
                                                                project_dir: Path,
                                                                llm_server: FakeLLMServer) -> None:
    project_dir.mkdir()
    (project_dir / ".workbench").mkdir()
    (project_dir / ".workbench" / "checkpoints.git").write_text("not a repository\n")
    llm_server.script(
        ToolCalls([("w1", "write_file", '{"path": "a.txt", "content": "1"}')]),
        Answer("Wrote it."))
    code, out, err = cli(capsys, "send", project_dir, "--new", "--mode", "agent", "--model",
                         MODEL, "--api-base", llm_server.url, "--approve", "always", "write")
    assert code == 0, err
    assert out.endswith("Wrote it.\n") and (project_dir / "a.txt").read_text() == "1"
    assert "warning: The files were not checkpointed before this change" in err
