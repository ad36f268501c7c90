"""CLI: cold start of `workbench send` to the first request on the wire (against a bare import of
litellm and of the openai SDK, in the same venv) and its peak memory; shared-data round trip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.bench.common import ROOT, SHARED_TRAJECTORIES, median, report
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer

FLOOR = """
import time
t = time.perf_counter()
from core.llm.runtime import load_litellm
load_litellm()
print(time.perf_counter() - t)
"""
OPENAI_FLOOR = """
import time
t = time.perf_counter()
import openai
print(time.perf_counter() - t)
"""


# Started from a small process of its own: a child's peak counts the pages of the process that
# started it (fork, or vfork, share them until exec), and `make bench` is large by the time this
# runs after the window's benchmarks.
PEAK_RSS = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
print(usage.ru_maxrss)
"""


def peak_rss_mb(args: list[str], env: dict[str, str]) -> float:
    """Run `args` to its end; its peak resident memory (its own alone), in MB."""
    done = subprocess.run([sys.executable, "-c", PEAK_RSS, *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return int(done.stdout) / 1024


def run() -> None:
    print("cli")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    exe = str(Path(sys.executable).parent / "workbench")
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as server:
        env["XDG_CONFIG_HOME"] = tmp
        firsts, whole = [], []
        for i in range(3):
            server.script(Answer("ok"))
            before = len(server.requests)
            start = time.time()
            subprocess.run([exe, "send", f"{tmp}/p{i}", "--new", "--model", MODEL,
                            "--api-base", server.url, "hello"],
                           env=env, cwd=ROOT, capture_output=True, check=True)
            whole.append(time.time() - start)
            firsts.append(server.requests[before].arrived - start)
        floors = {name: median([float(subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
            check=True).stdout) for _ in range(3)]) for name, code in
            (("litellm", FLOOR), ("openai", OPENAI_FLOOR))}
        report("`workbench send` cold start to first request on the wire", median(firsts), "s",
               "< 2.0 s")
        report("  the whole command, answer included", median(whole), "s")
        report("  a bare `import litellm` (offline) in this venv", floors["litellm"], "s")
        report("  a bare `import openai` in this venv", floors["openai"], "s")
        report("  send to wire / import litellm", median(firsts) / floors["litellm"], "x",
               "<= 0.5")
        report("  send to wire / import openai", median(firsts) / floors["openai"], "x", "<= 2")
        server.script(*[Answer("ok") for _ in range(3)])
        rss = [peak_rss_mb([exe, "send", f"{tmp}/rss{i}", "--new", "--model", MODEL,
                            "--api-base", server.url, "hello"], env) for i in range(3)]
        report("`workbench send` one-shot, peak RSS", median(rss), "MB", "<= 150 MB")

        # `workbench context --json` on a 10,000-message conversation: the whole command.
        from tests.helpers.trajectories import make_conversation

        src = Path(tmp) / "long.json"
        src.write_text(json.dumps({"messages": make_conversation(2500, seed=5,
                                                                 tool_output_chars=400)}))
        imp = subprocess.run([exe, "import", f"{tmp}/long", str(src)], env=env, cwd=ROOT,
                             capture_output=True, text=True, check=True)
        conv = imp.stdout.strip().splitlines()[-1]
        took = []
        for _ in range(3):
            start = time.time()
            subprocess.run([exe, "context", f"{tmp}/long", "-c", conv, "--model", "gpt-4o",
                            "--json"], env=env, cwd=ROOT, capture_output=True, check=True)
            took.append(time.time() - start)
        report("`workbench context --json`, ~10,000 messages, whole command", median(took), "s",
               "< 1.5 s")

        if not SHARED_TRAJECTORIES.is_dir():
            print("  (../shared/data/trajectories not present: round trip skipped)")
            return
        files = sorted(SHARED_TRAJECTORIES.glob("*.json"))
        same = 0
        t = time.perf_counter()
        for f in files:
            imp = subprocess.run([exe, "import", f"{tmp}/shared", str(f)], env=env, cwd=ROOT,
                                 capture_output=True, text=True, check=True)
            conv = imp.stdout.strip().splitlines()[-1]
            exp = subprocess.run([exe, "export", f"{tmp}/shared", "-c", conv], env=env, cwd=ROOT,
                                 capture_output=True, text=True, check=True)
            same += json.loads(exp.stdout)["messages"] == json.loads(f.read_text())["messages"]
        elapsed = time.perf_counter() - t
        report(f"import+export round trip identical ({same}/{len(files)} files)",
               100.0 * same / len(files), "%", "100 %")
        report("  wall time for all of them (two processes each)", elapsed, "s")
