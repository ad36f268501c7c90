"""The real `workbench` window process, started and stopped as the system would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.gui


def test_sigterm_closes_the_window_cleanly_and_keeps_its_state(tmp_path: Path) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT),
           "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_DATA_HOME": str(tmp_path / "data")}
    project = tmp_path / "project"
    proc = subprocess.Popen([sys.executable, "-m", "app", str(project)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    ui_state = project / ".workbench" / "ui-state.json"
    deadline = time.monotonic() + 60
    while not ui_state.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert ui_state.exists(), proc.stderr.read().decode() if proc.poll() is not None else ""
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=30)
    finally:
        proc.stdout.close()
        proc.stderr.close()
    assert code == 0
    settings = json.loads((tmp_path / "cfg" / "context-workbench" / "settings.json").read_text())
    assert settings.get("window_geometry")  # saved on the way out
    assert str(project.absolute()) in settings["recent_projects"]
    assert not (project / ".workbench" / "lock").exists() or _lock_is_free(project)


def _lock_is_free(project: Path) -> bool:
    from core.store.project import Project

    with Project.open(project) as p:
        return not p.read_only
