"""MCP servers: they never delay the window, and the first agent request waits at most for the
servers' own start (two stdio FastMCP servers, started together)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.bench.common import ROOT, median, report
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer

SERVER = {"command": sys.executable, "args": ["-m", "tests.helpers.mcp_server"],
          "cwd": str(ROOT)}


def configure(project: Path, servers: int) -> None:
    (project / ".workbench").mkdir(parents=True, exist_ok=True)
    config = {"mcpServers": {f"s{n}": SERVER for n in range(servers)}}
    (project / ".workbench" / "mcp.json").write_text(json.dumps(config), encoding="utf-8")


def env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "QT_QPA_PLATFORM": "offscreen", "XDG_CONFIG_HOME": str(tmp / "cfg"),
            "XDG_DATA_HOME": str(tmp / "data"), "WORKBENCH_AUTO_TITLE": "0",
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", "PYTHONPATH": str(ROOT)}


def window_shown(tmp: Path, servers: int) -> float:
    project = tmp / f"shown{servers}"
    configure(project, servers)
    exe = str(Path(sys.executable).parent / "workbench")
    times = []
    for _ in range(3):
        start = time.time()
        proc = subprocess.run([exe, str(project)], env={**env(tmp), "WORKBENCH_EXIT_AFTER_SHOW":
                                                        "1"}, capture_output=True, text=True,
                              timeout=120)
        shown = [ln for ln in proc.stderr.splitlines() if ln.startswith("window-shown")]
        if not shown:
            return float("nan")
        times.append(float(shown[0].split()[1]) - start)
    return median(times)


OWN_START = """
import asyncio, sys, time
t = time.perf_counter()
from core.mcp import McpHub
from pathlib import Path
project = Path(sys.argv[1])
hub = McpHub.for_project(project, project / ".workbench", Path(sys.argv[2]))
async def go():
    await hub.start()
    print(time.perf_counter() - t, flush=True)
    await hub.close()
asyncio.run(go())
"""


def servers_own_start(tmp: Path) -> float:
    """In a process of their own, as a command starts them: the SDK's import included."""
    project = tmp / "own"
    configure(project, 2)
    times = []
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", OWN_START, str(project), str(tmp / "cfg")],
                              cwd=ROOT, env=env(tmp), capture_output=True, text=True,
                              timeout=120)
        times.append(float(proc.stdout.split()[0]))
    return median(times)


def first_request(tmp: Path, servers: int) -> float:
    project = tmp / f"first{servers}"
    configure(project, servers)
    times = []
    for _ in range(3):
        with FakeLLMServer() as llm:
            llm.script(Answer("ok"))
            start = time.monotonic()
            proc = subprocess.Popen(
                [sys.executable, "-m", "app", "send", str(project), "--new", "--mode", "agent",
                 "--model", MODEL, "--api-base", llm.url, "hello"], cwd=ROOT, env=env(tmp),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            llm.first_request.wait(120)
            times.append(time.monotonic() - start)
            proc.wait(120)
    return median(times)


def run() -> None:
    print("mcp")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        plain, two = window_shown(tmp, 0), window_shown(tmp, 2)
        report("window shown, no MCP servers", plain, "s")
        report("window shown, a project with two stdio MCP servers", two, "s",
               f"no later than without ({plain:.2f} s): they start with the first agent turn")
        own = servers_own_start(tmp)
        report("two stdio servers' own start, the SDK's import included", own, "s")
        without, with_two = first_request(tmp, 0), first_request(tmp, 2)
        report("`send --mode agent` to the request on the wire, no servers", without, "s")
        report("  with two stdio servers", with_two, "s",
               f"at most {without:.2f} + {own:.2f} s (their own start)")
