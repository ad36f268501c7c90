"""What the bubblewrap sandbox promises, tried as an attacker would: real commands through the
real run_shell, with the app running as whoever runs the tests (root on CI machines)."""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.tools.base import ToolContext
from core.tools.shell import ShellArgs, detect_sandbox, run_shell, tool_environment

SANDBOX = detect_sandbox({})
pytestmark = pytest.mark.skipif(SANDBOX.kind != "bubblewrap",
                                reason=f"no bubblewrap sandbox here: {SANDBOX.why}")


def shell(root: Path, command: str, network: bool = False,
          env: dict[str, str] | None = None) -> tuple[int | None, str]:
    ctx = ToolContext(root, root / ".workbench", "conv", "c1", sandbox=SANDBOX,
                      network=network, env=env or tool_environment())

    async def go() -> tuple[int | None, str]:
        out = await asyncio.wait_for(run_shell(ShellArgs(command=command, timeout=30), ctx), 60)
        assert out.file is not None
        return out.exit_code, out.file.read_text(errors="replace")

    return asyncio.run(go())


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".workbench").mkdir(parents=True)
    (root / ".workbench" / "project.json").write_text("{}")
    return root


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    """A folder standing for $XDG_RUNTIME_DIR, outside /tmp (which is private anyway)."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp"))
    yield folder
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()


def test_no_capability_survives_and_nothing_can_be_remounted(root: Path) -> None:
    code, out = shell(root, "grep -E 'CapEff|NoNewPrivs' /proc/self/status; "
                            "mount -o remount,rw / || echo REMOUNT-REFUSED; "
                            "mount -o remount,rw .workbench || echo WORKBENCH-REFUSED; "
                            "echo x > .workbench/project.json || echo LOG-REFUSED")
    assert "CapEff:\t0000000000000000" in out and "NoNewPrivs:\t1" in out, out
    assert "REMOUNT-REFUSED" in out and "WORKBENCH-REFUSED" in out and "LOG-REFUSED" in out
    assert (root / ".workbench" / "project.json").read_text() == "{}"


def test_nothing_outside_the_project_is_written(root: Path, tmp_path: Path) -> None:
    outside = Path(tempfile.mkdtemp(dir="/var/tmp"))
    try:
        shell(root, f"echo x > {outside}/planted; echo x > inside.txt")
        assert not (outside / "planted").exists() and (root / "inside.txt").exists()
    finally:
        for p in outside.iterdir():
            p.unlink()
        outside.rmdir()


def test_the_apps_environment_is_out_of_reach(root: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_API_KEY", "Zq8ms9Lk2Pw7Qx4Tr6Yv3Hn")
    _, out = shell(root, f"cat /proc/{os.getpid()}/environ; umount /proc || echo UMOUNT-REFUSED;"
                         f" cat /proc/{os.getpid()}/environ")
    assert "Zq8ms9Lk2Pw7Qx4Tr6Yv3Hn" not in out and "UMOUNT-REFUSED" in out


def test_unix_sockets_are_hidden_without_the_network(root: Path, runtime_dir: Path) -> None:
    path = runtime_dir / "bus"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    os.chmod(path, 0o777)
    env = {**tool_environment(), "XDG_RUNTIME_DIR": str(runtime_dir)}
    probe = (f"python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); "
             f"s.connect('{path}'); print('CONNECTED')\" 2>&1 | tail -1")
    try:
        _, out = shell(root, probe, env=env)
        assert "CONNECTED" not in out, out
        _, out = shell(root, probe, network=True, env=env)  # allowed: the user said so
        assert "CONNECTED" in out, out
    finally:
        server.close()


def test_the_network_is_unreachable_without_permission(root: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    probe = (f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3);"
             f" print('CONNECTED')\" 2>&1 | tail -1")
    try:
        _, out = shell(root, probe)
        assert "CONNECTED" not in out, out
    finally:
        server.close()
