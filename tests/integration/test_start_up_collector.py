"""A front end's start runs without Python's cyclic collector (it would rescan the modules and
types the start makes, again and again, while the first request waits for them): the collector
must come back on once the warm-up has ended, or after START_UP_S if it never does, or cycles
would pile up for as long as the window stays open."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app import start_up
from app.window import memory, process
from core.llm import runtime
from tests.helpers.fake_llm import MODEL
from tests.helpers.gui import open_window


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    yield
    gc.enable()
    gc.unfreeze()  # the next tests start from a collector as they know it


def wait_for_collector(seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not gc.isenabled() and time.monotonic() < deadline:
        time.sleep(0.01)
    return gc.isenabled()


def test_the_collector_is_off_during_the_start_and_on_once_the_warm_up_ends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(start_up, "START_UP_S", 1000.0)  # on again by the warm-up, not late
    start_up.without_collector()
    assert not gc.isenabled()
    frozen = gc.get_freeze_count()
    process.warm_up_library(MODEL)  # an OpenAI-compatible model: the SDK's warm-up
    assert wait_for_collector(60)
    assert gc.get_freeze_count() > frozen  # what the start made is left alone from now on


def test_a_warm_up_that_never_ends_does_not_keep_the_collector_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    stuck = threading.Event()
    never = threading.Thread(target=stuck.wait, daemon=True)
    never.start()
    monkeypatch.setattr(runtime, "start_background_import", lambda **_: never)
    monkeypatch.setattr(start_up, "START_UP_S", 0.2)
    start_up.without_collector()
    process.warm_up_library(MODEL)
    assert wait_for_collector(10)
    assert never.is_alive()
    stuck.set()


def test_a_command_without_a_warm_up_has_the_collector_back_after_the_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`workbench list`, `context`, ...: no model's transport to wait for; a long command
    still gets the collector back."""
    monkeypatch.setattr(start_up, "START_UP_S", 0.2)
    start_up.without_collector()
    assert not gc.isenabled()
    assert wait_for_collector(10)
    assert gc.get_freeze_count() > 0


@pytest.mark.gui
def test_the_first_project_opened_runs_no_full_collection_and_a_switch_does(
        qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full collection of the start's heap is a pause while the first request waits; the
    first project closes none, so there is nothing to free. Leaving one frees its cycles."""
    settled: list[bool] = []
    monkeypatch.setattr(memory, "settle", lambda collect=True: settled.append(collect))
    window, controller = open_window(qtbot, tmp_path / "first", tmp_path / "cfg")
    assert True not in settled  # (showing its short conversation freezes it: no collection)
    assert controller.open_project(tmp_path / "second")
    assert settled.count(True) == 1
    controller.shutdown()
