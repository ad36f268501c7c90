"""Calibration's file is written outside the lock every build reads the figures under: a build
(the meter's, on the window's thread) never waits on a write's fsync, and what is on disk is
always the newest figures."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import core.context.calibration as calibration_module
from core.context.calibration import Calibration
from core.store.fileio import atomic_write_json, read_json

DEADLINE_S = 10


def test_reading_the_figures_never_waits_on_a_write_to_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cal = Calibration(tmp_path / "calibration.json")
    writing, release = threading.Event(), threading.Event()
    real = atomic_write_json  # the module's own, replaced below

    def slow_write(*args: Any, **kwargs: Any) -> None:  # a busy disk's fsync
        writing.set()
        release.wait(DEADLINE_S)
        real(*args, **kwargs)

    monkeypatch.setattr(calibration_module, "atomic_write_json", slow_write)
    engine = threading.Thread(target=cal.observe, args=("m", 1000, 1100))  # after an answer
    engine.start()
    try:
        assert writing.wait(DEADLINE_S)
        answers: list[object] = []
        window = threading.Thread(target=lambda: answers.extend(
            [cal.refuses_tools("m"), cal.factor("m")]))  # what every build asks
        window.start()
        window.join(DEADLINE_S / 2)
        assert not window.is_alive() and answers == [False, pytest.approx(1.1)]
        assert engine.is_alive()  # the write was still on its way meanwhile
    finally:
        release.set()
        engine.join(DEADLINE_S)
    assert read_json(tmp_path / "calibration.json")["m"]["factor"] == pytest.approx(1.1)


def test_writes_from_several_threads_leave_the_newest_figures_on_disk(tmp_path: Path) -> None:
    cal = Calibration(tmp_path / "calibration.json")
    threads = [threading.Thread(target=cal.remember_window, args=(f"m{n}", 1000 + n))
               for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE_S)
    assert Calibration(tmp_path / "calibration.json").remembered_windows() == {
        f"m{n}": 1000 + n for n in range(8)}
