"""The window's first message: sent 1 s after launch, when does it leave, and how long after the
model library is ready (litellm takes seconds to import; a model that speaks the OpenAI protocol
does not need it, and the window does not wait for it)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.bench.common import ROOT, median, report
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer

AT = 1.0  # seconds after launch the message is sent


def run() -> None:
    print("first send")
    with tempfile.TemporaryDirectory() as tmpdir, FakeLLMServer() as server:
        tmp = Path(tmpdir)
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "XDG_CONFIG_HOME": str(tmp / "cfg"),
               "XDG_DATA_HOME": str(tmp / "data"), "WORKBENCH_MODEL": MODEL,
               "WORKBENCH_API_BASE": server.url,
               "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", "PYTHONPATH": str(ROOT)}
        # a returning user's start (the first one opens Settings and looks for local servers)
        (tmp / "cfg" / "context-workbench").mkdir(parents=True)
        (tmp / "cfg" / "context-workbench" / "settings.json").write_text("{}")
        leaves, after_ready, ready, after_sent = [], [], [], []
        for i in range(3):
            server.script(Answer("hi"))
            before = len(server.requests)
            launched = time.time()
            proc = subprocess.run([sys.executable, "-m", "tests.bench.first_send_app",
                                   str(tmp / f"p{i}"), f"{launched:.6f}", str(AT)], env=env, cwd=ROOT,
                                  capture_output=True, text=True, timeout=180)
            moments = {ln.split()[0]: float(ln.split()[1]) - launched
                       for ln in proc.stderr.splitlines()
                       if ln.split()[:1] and ln.split()[0] in ("sent", "library-ready", "done")}
            if len(server.requests) == before or "library-ready" not in moments:
                print("  the run failed:", proc.stderr[-800:])
                return
            wire = server.requests[before].arrived - launched
            leaves.append(wire)
            ready.append(moments["library-ready"])
            after_ready.append(wire - max(moments["library-ready"], moments["sent"]))
            after_sent.append(wire - moments["sent"])
        report("window: the model library ready after launch", median(ready), "s")
        report(f"window: a message sent {AT:g} s after launch leaves at", median(leaves), "s")
        report("  after it was sent", median(after_sent), "s", "< 0.3 s")
        report("  after the library was ready (or the message sent, if later)",
               median(after_ready), "s", "< 1 s")
