"""ui.throttle.Throttle: a burst of calls runs the function once, with the last arguments;
debounce waits for the calls to rest, throttle runs once per delay while they keep coming;
cancel forgets the call asked for.

No test sleeps and then hopes the machine kept up: each waits (with a deadline) for what it
expects, and an order of events is checked against witnesses, timers whose deadline lies well
between the moments the two behaviours differ. Qt fires expired timers in the order of their
deadlines, so a loaded machine that runs everything late still runs it in that order."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ui.throttle import Mode, Throttle

pytestmark = pytest.mark.gui

D = 300  # ms, the delay under test; the witnesses stand at fractions of it
DEADLINE = 10_000  # ms a wait may take before the test fails (a loaded CI machine)


class Log:
    """What happened, in order: ("run", args, kwargs) for each call of the function, and the
    name of each witness as it fires."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def func(self, *args: Any, **kwargs: Any) -> None:
        self.events.append(("run", args, kwargs))

    def witness(self, name: str, after_ms: int) -> None:
        QTimer.singleShot(after_ms, lambda: self.events.append(name))

    def runs(self) -> list[Any]:
        return [e for e in self.events if isinstance(e, tuple)]


@pytest.mark.parametrize("mode", ["debounce", "throttle"])
def test_a_burst_of_calls_runs_once_with_the_last_arguments(qtbot: QtBot, mode: Mode) -> None:
    log = Log()
    throttle = Throttle(log.func, 50, mode=mode)
    for n in range(5):
        throttle(n, key=f"k{n}")
    assert throttle.pending() and log.runs() == []  # never at once: on the trailing edge
    qtbot.waitUntil(lambda: bool(log.runs()), timeout=DEADLINE)
    assert log.runs() == [("run", (4,), {"key": "k4"})]
    assert not throttle.pending()


def test_debounce_waits_again_at_every_call(qtbot: QtBot) -> None:
    log = Log()
    debounce = Throttle(log.func, D, mode="debounce")
    debounce("first")
    QTimer.singleShot(D // 2, lambda: debounce("second"))  # due at 1.5 D now, not at D
    log.witness("1.2 D", D * 6 // 5)
    qtbot.waitUntil(lambda: bool(log.runs()), timeout=DEADLINE)
    assert log.events == ["1.2 D", ("run", ("second",), {})]


def test_throttle_runs_once_per_delay_while_calls_keep_coming(qtbot: QtBot) -> None:
    log = Log()
    throttle = Throttle(log.func, D, mode="throttle")
    throttle("first")
    QTimer.singleShot(D // 2, lambda: throttle("second"))  # still due at D
    log.witness("1.2 D", D * 6 // 5)
    qtbot.waitUntil(lambda: "1.2 D" in log.events, timeout=DEADLINE)
    assert log.events == [("run", ("second",), {}), "1.2 D"]
    assert not throttle.pending()
    throttle("third")  # a call after the run: the next delay starts
    assert throttle.pending()
    qtbot.waitUntil(lambda: len(log.runs()) == 2, timeout=DEADLINE)
    assert log.runs()[1] == ("run", ("third",), {})


@pytest.mark.parametrize("mode", ["debounce", "throttle"])
def test_cancel_forgets_the_call_asked_for(qtbot: QtBot, mode: Mode) -> None:
    log = Log()
    throttle = Throttle(log.func, D, mode=mode)
    throttle("forgotten")
    throttle.cancel()
    assert not throttle.pending()
    log.witness("2 D", 2 * D)  # well after the call would have run
    qtbot.waitUntil(lambda: "2 D" in log.events, timeout=DEADLINE)
    assert log.events == ["2 D"]
    throttle("again")  # a cancelled Throttle still works
    qtbot.waitUntil(lambda: bool(log.runs()), timeout=DEADLINE)
    assert log.runs() == [("run", ("again",), {})]


def test_the_function_may_ask_for_its_next_run(qtbot: QtBot) -> None:
    runs: list[int] = []

    def again() -> None:
        runs.append(len(runs))
        if len(runs) < 3:
            throttle()

    throttle = Throttle(again, 10, mode="throttle")
    throttle()
    qtbot.waitUntil(lambda: len(runs) == 3, timeout=DEADLINE)
    assert not throttle.pending()


def test_the_mode_is_one_of_the_two(qapp: QApplication) -> None:
    with pytest.raises(ValueError, match="debounce"):
        Throttle(print, 10, mode="leading")  # type: ignore[arg-type]
    assert Throttle(print, 10, mode="debounce").delay_ms == 10
