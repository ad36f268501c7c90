"""Tools: our own overhead in a turn of 20 tool calls, and memory while a command prints 100 MB."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.bench.common import ROOT, median, report
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, ToolCalls


def run() -> None:
    print("tools")
    from core.engine import EntryAppended, RequestStarted, TurnOptions
    from core.factory import build_engine
    from core.settings import LLMSettings
    from core.store.project import Project

    with tempfile.TemporaryDirectory() as tmpdir, FakeLLMServer() as server:
        root = Path(tmpdir) / "proj"
        root.mkdir()
        for n in range(20):
            (root / f"f{n}.txt").write_text(f"file {n}\n" * 50)
        settings = LLMSettings(model=MODEL, api_base=server.url, auto_retries=0)
        with Project.open(root) as project:
            engine = build_engine(project)

            def bare(calls: list[tuple[str, str, str]]) -> float:
                """Milliseconds the tools themselves take, called directly one after another."""
                from core.tools import tools_for
                from core.tools.base import ToolContext

                by_name = {t.name: t for t in tools_for("agent")}

                async def go() -> float:
                    t = time.perf_counter()
                    for cid, name, raw in calls:
                        tool = by_name[name]
                        ctx = ToolContext(root.resolve(), project.state, "c", cid)
                        await tool.run(tool.args.model_validate(json.loads(raw)), ctx)
                    return (time.perf_counter() - t) * 1000
                return asyncio.run(go())

            def turn(calls: list[tuple[str, str, str]], mode: str, approve: str) -> float:
                """Milliseconds from the answer with the calls on disk to the next request on
                its way, minus what the same tools take when called directly."""
                server.script(ToolCalls(calls), Answer("done"))
                conv = project.conversations.create("bench").id
                marks: dict[str, float] = {}

                async def go() -> None:
                    async for ev in engine.send(conv, "go", settings, TurnOptions(
                            mode=mode, approve=approve)):  # type: ignore[arg-type]
                        if isinstance(ev, EntryAppended) and ev.message.tool_calls:
                            marks["calls"] = time.perf_counter()
                        elif isinstance(ev, RequestStarted) and "calls" in marks:
                            marks["next"] = time.perf_counter()
                asyncio.run(go())
                return (marks["next"] - marks["calls"]) * 1000 - bare(calls)

            reads = [(f"r{n}", "read_file", json.dumps({"path": f"f{n}.txt"}))
                     for n in range(20)]
            figures = [turn(reads, "agent", "always") for _ in range(5)]
            report("20 read_file calls in one answer: our overhead (median of 5)",
                   median(figures), "ms", "< 50 ms")
            writes = [(f"w{n}", "write_file", json.dumps({"path": f"out{n}.txt", "content": "x"}))
                      for n in range(20)]
            figures = [turn(writes, "agent", "always") for _ in range(5)]
            report("20 write_file calls (approved by policy): our overhead (median of 5)",
                   median(figures), "ms", "< 50 ms")
    _big_output()


SCRIPT = r"""
import asyncio, json, sys, time
from pathlib import Path
from core.llm.tokens import TokenCounter
from core.model import FunctionCall, ToolCall
from core.tools import tools_for
from core.tools.runner import ToolResult, ToolRunner
from core.tools.sandbox import detect_sandbox
from core.tools.shell import tool_environment

root = Path(sys.argv[1])
counter = TokenCounter.for_model(None)
counter.text("warm up the encoding")
runner = ToolRunner(root, root / ".workbench", tools_for("agent"), counter, "always",
                    detect_sandbox(), env=tool_environment())
call = ToolCall(id="cat", function=FunctionCall(name="run_shell",
                                                arguments='{"command": "cat big.bin"}'))

async def go():
    return [e.entry async for e in runner.run("c", [call], []) if isinstance(e, ToolResult)]

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0

# VmHWM is this process's own peak (ru_maxrss would carry the parent's over fork and exec)
before = status("VmHWM")
current = status("VmRSS")
t = time.perf_counter()
entry = asyncio.run(go())[0]
took = time.perf_counter() - t
after = status("VmHWM")
print(json.dumps({"growth_mb": after - before, "s": took, "peak_mb": after,
                  "current_mb": current,
                  "offloaded": entry.offload.size if entry.offload else 0,
                  "preview_chars": len(entry.text()), "sandbox": runner.sandbox.kind}))
"""


def _big_output() -> None:
    with tempfile.TemporaryDirectory() as tmpdir:
        root = Path(tmpdir)
        (root / ".workbench").mkdir()
        with open(root / "big.bin", "wb") as f:
            line = b"0123456789abcdef" * 6 + b"\n"
            f.write(line * (100 * 2**20 // len(line)))
        out = subprocess.run([sys.executable, "-c", SCRIPT, str(root)], capture_output=True,
                             text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                             timeout=300, check=True)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        report(f"cat of a 100 MB file through run_shell ({figures['sandbox']}): peak RSS growth",
               figures["growth_mb"], "MB", "< 50 MB")
        report(f"  peak RSS of that process (RSS before the command "
               f"{figures['current_mb']:.0f} MB)", figures["peak_mb"], "MB")
        report(f"  time, offloaded {figures['offloaded'] / 2**20:.0f} MB, preview "
               f"{figures['preview_chars']:,} chars", figures["s"], "s")
