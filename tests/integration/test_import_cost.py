"""What the quick commands and the window's start import: neither litellm (seconds) nor the openai
SDK. Each runs in a fresh interpreter under `python -X importtime`, whose report names every
module imported; the test fails on litellm or openai among them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.fake_llm import MODEL

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("litellm", "openai")

# The window as `workbench` starts it, shown and closed at once (WORKBENCH_EXIT_AFTER_SHOW),
# without the warm-up it starts once it is on screen (that one imports the model's transport).
WINDOW = """
import sys
import app.window.process as process
import app.window.start as start
process.warm_up_library = lambda model: None
sys.exit(start.run_gui(sys.argv[1]))
"""


def heavy_imports(args: list[str], env: dict[str, str]) -> list[str]:
    """The heavy modules a fresh interpreter running `args` imported."""
    done = subprocess.run([sys.executable, "-X", "importtime", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
             if line.startswith("import time:")}
    return sorted(n for n in names if n.split(".")[0] in HEAVY)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
            "XDG_DATA_HOME": str(tmp_path / "data"), "QT_QPA_PLATFORM": "offscreen",
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
            "WORKBENCH_MODEL": MODEL, "WORKBENCH_API_BASE": "http://127.0.0.1:9/v1"}


def test_list_help_and_context_import_neither_litellm_nor_the_sdk(
        tmp_path: Path, env: dict[str, str]) -> None:
    source = tmp_path / "c.json"
    source.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                               {"role": "assistant", "content": "hello"}]}))
    project = str(tmp_path / "p")
    made = subprocess.run([sys.executable, "-m", "app.cli.main", "import", project, str(source)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    conv = made.stdout.strip().splitlines()[-1]
    assert heavy_imports(["-m", "app.cli.main", "--help"], env) == []
    assert heavy_imports(["-m", "app.cli.main", "list", project], env) == []
    for model in (MODEL, "gpt-4o", "anthropic/claude-3-5-sonnet-20240620"):
        assert heavy_imports(["-m", "app.cli.main", "context", project, "-c", conv,
                              "--model", model], env) == [], model


def test_the_window_starts_without_litellm_or_the_sdk(tmp_path: Path,
                                                      env: dict[str, str]) -> None:
    env = {**env, "WORKBENCH_EXIT_AFTER_SHOW": "1", "WORKBENCH_AUTO_TITLE": "0"}
    assert heavy_imports(["-c", WINDOW, str(tmp_path / "p")], env) == []
