"""Long work off the window's thread waits while the window is busy, never for long, and the
window's own thread (or a process without a window) never waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from core import give_way as gw


@pytest.fixture(autouse=True)
def _idle_after() -> Iterator[None]:
    yield
    gw.window_idle()


def _pause_on_a_thread() -> tuple[threading.Thread, threading.Event]:
    done = threading.Event()

    def work() -> None:
        gw.give_way()
        done.set()

    thread = threading.Thread(target=work)
    thread.start()
    return thread, done


def test_a_pause_waits_for_the_busy_window_to_go_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gw, "LONGEST_WAIT", 30.0)
    gw.window_busy()
    thread, done = _pause_on_a_thread()
    assert not done.wait(0.2)  # still waiting: the window is busy
    gw.window_idle()
    assert done.wait(5)
    thread.join(5)


def test_a_window_busy_for_long_delays_a_pause_only_a_little(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gw, "LONGEST_WAIT", 0.1)
    gw.window_busy()
    start = time.monotonic()
    thread, done = _pause_on_a_thread()
    assert done.wait(5)
    thread.join(5)
    assert time.monotonic() - start >= 0.1  # it did wait, then went on


def test_the_window_thread_and_an_idle_window_never_wait(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gw, "LONGEST_WAIT", 30.0)  # a wait would fail the test below
    # pytest-qt processes the events of an earlier test's window right before this one runs
    # (the dispatcher wakes, "busy", and never blocks again): the window is idle from here
    gw.window_idle()
    thread, done = _pause_on_a_thread()  # no window, or an idle one
    assert done.wait(5)
    thread.join(5)
    gw.window_busy()
    start = time.monotonic()
    gw.give_way()  # on the main thread, the window's own
    assert time.monotonic() - start < 5
