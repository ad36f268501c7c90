"""What the bubblewrap sandbox promises, tried as an attacker would, as a table: each row runs
real commands in the sandbox the app makes, once through the real run_shell as whoever runs
the tests (root on CI machines), and once as an ordinary user (where the tests run as root and
`setpriv` can drop to `nobody`; that user runs the very command line run_shell would run)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from core.store.project import Project
from core.tools.base import ToolContext
from core.tools.sandbox import detect_sandbox
from core.tools.shell import ShellArgs, command_argv, run_shell, tool_environment

SANDBOX = detect_sandbox({})
ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"
pytestmark = pytest.mark.skipif(SANDBOX.kind != "bubblewrap",
                                reason=f"no bubblewrap sandbox here: {SANDBOX.why}")

Shell = Callable[..., str]


def _as_app(root: Path, command: str, network: bool = False,
            env: dict[str, str] | None = None) -> str:
    ctx = ToolContext(root, root / ".workbench", "conv", "c1", sandbox=SANDBOX,
                      network=network, env=env or tool_environment())

    async def go() -> str:
        out = await asyncio.wait_for(run_shell(ShellArgs(command=command, timeout=30), ctx), 60)
        assert out.file is not None
        return out.file.read_text(errors="replace")

    return asyncio.run(go())


def _as_nobody(root: Path, command: str, network: bool = False,
               env: dict[str, str] | None = None) -> str:
    argv = command_argv(SANDBOX, root, command, network, env or tool_environment())
    done = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                           "--clear-groups", *argv], cwd=root, env=env or tool_environment(),
                          capture_output=True, text=True, timeout=60, check=False)
    return done.stdout + done.stderr


def _nobody_can_sandbox() -> str:
    """'' when the rows can run as an ordinary user here, else why not."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return "needs root and setpriv to act as an ordinary user"
    folder = _open_folder()
    try:
        done = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                               "--clear-groups", *command_argv(SANDBOX, folder, "true", False)],
                              capture_output=True, timeout=30, check=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return "" if done.returncode == 0 else "ordinary users cannot make user namespaces here"


@pytest.fixture(params=["as the app's user", "as an ordinary user"])
def shell(request: pytest.FixtureRequest) -> Shell:
    if request.param == "as the app's user":
        return _as_app
    why = _nobody_can_sandbox()
    if why:
        pytest.skip(why)
    return _as_nobody


def _open_folder() -> Path:
    """A folder outside /tmp (which the sandbox replaces) that anyone may enter and write, so
    only the sandbox stands in the way."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp"))
    folder.chmod(0o777)
    return folder


@pytest.fixture
def root() -> Iterator[Path]:
    top = _open_folder()
    root = top / "proj"
    (root / ".workbench").mkdir(parents=True)
    (root / ".workbench" / "project.json").write_text("{}")
    for p in (root, root / ".workbench", root / ".workbench" / "project.json"):
        p.chmod(0o777 if p.is_dir() else 0o666)
    yield root
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def outside() -> Iterator[Path]:
    folder = _open_folder()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_no_capability_survives_and_nothing_can_be_remounted(shell: Shell, root: Path) -> None:
    out = shell(root, "grep -E 'CapEff|NoNewPrivs' /proc/self/status; "
                      "mount -o remount,rw / || echo REMOUNT-REFUSED; "
                      "mount -o remount,rw .workbench || echo WORKBENCH-REFUSED; "
                      "echo x > .workbench/project.json || echo LOG-REFUSED")
    assert "CapEff:\t0000000000000000" in out and "NoNewPrivs:\t1" in out, out
    assert "REMOUNT-REFUSED" in out and "WORKBENCH-REFUSED" in out and "LOG-REFUSED" in out
    assert (root / ".workbench" / "project.json").read_text() == "{}"


def test_nothing_outside_the_project_is_written(shell: Shell, root: Path,
                                                outside: Path) -> None:
    shell(root, f"echo x > {outside}/planted; echo x > inside.txt")
    assert not (outside / "planted").exists() and (root / "inside.txt").exists()


def test_the_apps_environment_is_out_of_reach(shell: Shell, root: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_API_KEY", "Zq8ms9Lk2Pw7Qx4Tr6Yv3Hn")
    out = shell(root, f"cat /proc/{os.getpid()}/environ; umount /proc || echo UMOUNT-REFUSED; "
                      f"cat /proc/{os.getpid()}/environ")
    assert "Zq8ms9Lk2Pw7Qx4Tr6Yv3Hn" not in out and "UMOUNT-REFUSED" in out


def test_unix_sockets_are_hidden_without_the_network(shell: Shell, root: Path,
                                                     outside: Path) -> None:
    path = outside / "bus"  # stands for $XDG_RUNTIME_DIR/bus (D-Bus, the keyring)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    path.chmod(0o777)
    env = {**tool_environment(), "XDG_RUNTIME_DIR": str(outside)}
    probe = (f"{PYTHON} -c \"import socket; s=socket.socket(socket.AF_UNIX); "
             f"s.connect('{path}'); print('CONNECTED')\" 2>&1 | tail -1")
    try:
        assert "CONNECTED" not in shell(root, probe, env=env)
        assert "CONNECTED" in shell(root, probe, network=True, env=env)  # the user allowed it
    finally:
        server.close()


def test_the_network_is_unreachable_without_permission(shell: Shell, root: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    probe = (f"{PYTHON} -c \"import socket; socket.create_connection(('127.0.0.1', "
             f"{server.getsockname()[1]}), 3); print('CONNECTED')\" 2>&1 | tail -1")
    try:
        assert "CONNECTED" not in shell(root, probe)
        assert "CONNECTED" in shell(root, probe, network=True)
    finally:
        server.close()


def test_git_is_protected_before_it_exists_and_where_a_gitdir_file_points(root: Path) -> None:
    """A command must not plant a hook that git would run later, outside any sandbox."""
    out = _as_app(root, "mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit "
                        "|| echo PLANT-REFUSED")
    assert "PLANT-REFUSED" in out and not (root / ".git").exists()  # nothing left behind
    (root / "repo-git" / "hooks").mkdir(parents=True)
    (root / ".git").write_text("gitdir: repo-git\n")  # a worktree's or submodule's .git file
    out = _as_app(root, "echo evil > repo-git/hooks/pre-commit || echo HOOK-REFUSED; "
                        "echo x >> .git || echo FILE-REFUSED")
    assert "HOOK-REFUSED" in out and "FILE-REFUSED" in out
    assert not (root / "repo-git" / "hooks" / "pre-commit").exists()
    assert (root / ".git").read_text() == "gitdir: repo-git\n"


def test_nested_repositories_git_is_read_only_too(shell: Shell, root: Path) -> None:
    """A project holding other clones: a hook planted in lib/.git would run, unsandboxed, at
    the user's next commit in lib/."""
    (root / "lib" / ".git" / "hooks").mkdir(parents=True)
    (root / "vendor" / "dep").mkdir(parents=True)
    (root / "vendor" / "dep" / ".git").write_text("gitdir: ../../lib/.git\n")  # a submodule's
    for p in (root / "lib", root / "lib" / ".git", root / "lib" / ".git" / "hooks",
              root / "vendor", root / "vendor" / "dep"):
        p.chmod(0o777)
    out = shell(root, "echo evil > lib/.git/hooks/pre-commit || echo HOOK-REFUSED; "
                      "echo x >> vendor/dep/.git || echo FILE-REFUSED; echo ok > lib/a.txt")
    assert "HOOK-REFUSED" in out and "FILE-REFUSED" in out, out
    assert not (root / "lib" / ".git" / "hooks" / "pre-commit").exists()
    assert (root / "vendor" / "dep" / ".git").read_text() == "gitdir: ../../lib/.git\n"
    assert (root / "lib" / "a.txt").exists()  # the clone's files stay writable


CHILD = """
import asyncio, sys
from pathlib import Path
from core.tools.base import ToolContext
from core.tools.sandbox import detect_sandbox
from core.tools.shell import ShellArgs, run_shell
root = Path(sys.argv[1])
ctx = ToolContext(root, root / ".workbench", "c", "k1", sandbox=detect_sandbox({}))
asyncio.run(run_shell(ShellArgs(command="sleep 60"), ctx))
"""


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True,
                          timeout=30, check=False)


def test_the_git_stand_in_is_an_empty_folder_and_a_crash_leaves_git_working(root: Path) -> None:
    """A project in a subfolder of a repository, without a `.git` of its own: while a command
    runs, and after the app was killed during one, git there still works (an empty `.git` file
    broke it for good); the next open of the project removes what was left."""
    repo = root.parent
    assert _git(repo, "init", "-q").returncode == 0
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root)], cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 30
        while not os.path.lexists(root / ".git") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (root / ".git").is_dir() and not any((root / ".git").iterdir())
        assert _git(root, "status", "--short").returncode == 0  # while the command runs
    finally:
        child.kill()  # the app is killed (a crash, the OOM killer, a logout)
        child.wait(timeout=30)
    assert (root / ".git").is_dir()  # left behind: still nothing to git
    status = _git(root, "status", "--short")
    assert status.returncode == 0, status.stderr
    Project.open(root).close()
    assert not os.path.lexists(root / ".git")


def test_an_empty_git_file_left_by_an_older_version_is_removed_on_open(root: Path) -> None:
    (root / ".git").write_bytes(b"")
    assert _git(root, "init", "-q").returncode != 0  # "invalid gitfile format"
    Project.open(root).close()
    assert _git(root, "init", "-q").returncode == 0
    (root / "lib").mkdir()
    (root / "lib" / ".git").write_text("gitdir: elsewhere\n")  # content: never removed
    Project.open(root).close()
    assert (root / "lib" / ".git").read_text() == "gitdir: elsewhere\n"
    assert (root / ".git" / "HEAD").is_file()
