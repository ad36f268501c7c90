"""Start-up decisions a user meets before any window exists."""

from __future__ import annotations

import ctypes.util
from pathlib import Path

import pytest

from app.window.start import DEFAULT_PROJECT_NAME, choose_project, missing_display_libraries
from core.settings import SettingsStore


def test_missing_x11_libraries_are_named_with_the_command_to_install_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)  # a bare machine
    message = missing_display_libraries()
    assert message is not None and "apt-get install" in message and "libxcb-cursor0" in message


def test_headless_runs_need_no_x11_libraries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    assert missing_display_libraries() is None


def test_first_start_uses_the_default_project_then_the_last_one(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path / "cfg")
    assert choose_project(None, store).name == DEFAULT_PROJECT_NAME
    last = tmp_path / "work"
    (last / ".workbench").mkdir(parents=True)
    store.remember_project(last)
    assert choose_project(None, store) == last
    assert choose_project(str(tmp_path / "explicit"), store) == tmp_path / "explicit"
