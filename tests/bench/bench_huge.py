"""Huge answers: a long answer and a long tool argument in small chunks (as a local server
streams them, a few characters each), and a runaway answer cut at the app's limit. Each runs
`workbench send` in a process of its own against a server in another: its wall time and its
peak memory (RSS) are the figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.bench.common import ROOT, report
from tests.helpers.fake_llm import MODEL, Answer, Reply, ServerProcess, ToolCalls

TEXT = "lorem ipsum dolor sit amet "


def _text(n: int) -> str:
    return (TEXT * (n // len(TEXT) + 1))[:n]


def _send(tmp: str, name: str, *replies: Reply) -> tuple[float, float, str]:
    """(seconds, peak RSS in MB, the last line on stderr) of one `workbench send`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": tmp,
           "WORKBENCH_SANDBOX": "none", "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    code = ("import resource, sys\nfrom app.cli.main import main\ncode = main(sys.argv[1:])\n"
            "print(f'maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', "
            "file=sys.stderr)\nraise SystemExit(code)")
    with ServerProcess(*replies) as server:
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", code, "send", f"{tmp}/{name}", "--new", "--model", MODEL,
             "--api-base", server.url, "--mode", "agent", "--approve", "always", "go"],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
        elapsed = time.perf_counter() - start
    lines = done.stderr.strip().splitlines()
    rss = next((int(ln.split()[1]) / 1024 for ln in lines if ln.startswith("maxrss")), 0.0)
    said = next((ln for ln in reversed(lines) if not ln.startswith("maxrss")), "")
    return elapsed, rss, said


def run() -> None:
    print("huge answers")
    with tempfile.TemporaryDirectory() as tmp:
        n = 250_000
        text = _text(n)
        secs, rss, _ = _send(tmp, "answer", Answer(text, chunks=[text[i:i + 4]
                                                             for i in range(0, n, 4)]))
        report(f"{n:,}-character answer in 4-character chunks: time", secs, "s")
        report("  peak memory of the process", rss, "MB")
        args = json.dumps({"path": "big.txt", "content": text})
        secs, rss, _ = _send(tmp, "tool", ToolCalls([("w1", "write_file", args)]),
                             Answer("written"))
        report(f"{len(args):,}-character tool argument in 7-character chunks: time", secs, "s")
        report("  peak memory of the process", rss, "MB")
        big = _text(3_000_000)
        secs, rss, said = _send(tmp, "runaway", Answer(big, chunks=[big[i:i + 1000]
                                                                 for i in range(0, len(big),
                                                                                1000)]))
        report("3,000,000-character runaway answer (1,000-character chunks): time", secs, "s")
        report("  peak memory of the process", rss, "MB")
        print(f"  said: {said[:160]}")
        kept = sum(p.stat().st_size for p in Path(tmp, "runaway").rglob("messages.jsonl"))
        report("  log kept (the cut answer's text)", kept / 1e6, "MB")
