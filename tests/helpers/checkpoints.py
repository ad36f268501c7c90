"""Checkpoint tests' helpers: a project that is a real git repository (with a stash and a
staged change), the files of a folder, and the project's own git state to compare."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          env=GIT_ENV, check=True, timeout=60)
    return done.stdout


def make_repo(root: Path) -> None:
    """A git repository with a commit, a stash and a staged change."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "README.md").write_text("# Calc\nAdds numbers.\n")
    (root / "notes").mkdir()
    (root / "notes" / "keep.txt").write_text("kept\n")
    (root / ".gitignore").write_text("*.log\n")
    (root / "debug.log").write_text("ignored\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    (root / "notes" / "keep.txt").write_text("stashed change\n")
    git(root, "stash", "-q")
    (root / "notes" / "staged.txt").write_text("staged\n")
    git(root, "add", "notes/staged.txt")


def repo_state(root: Path) -> tuple[str, str, bytes, str, str]:
    """HEAD, the branch, the index's bytes, the stash list, every ref."""
    return (git(root, "rev-parse", "HEAD"), git(root, "symbolic-ref", "HEAD"),
            (root / ".git" / "index").read_bytes(), git(root, "stash", "list"),
            git(root, "for-each-ref"))


def files(root: Path) -> dict[str, bytes]:
    """Every file of the folder (not .git/, .workbench/) with its bytes."""
    found: dict[str, bytes] = {}
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if rel.parts[0] in (".git", ".workbench") or not path.is_file():
            continue
        found[rel.as_posix()] = path.read_bytes()
    return found
