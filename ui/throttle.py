"""Calls that come in bursts (keystrokes, a file watcher's events, a running turn's entries, a
paint's new row heights) run once per burst: `Throttle` wraps the function and stands in for it.

Both of its modes call on the trailing edge, `delay_ms` after a call, never at once, with the
arguments of the last call made before then:

- `mode="debounce"`: every call starts the wait again, so the function runs once the calls
  have rested for `delay_ms` (the draft saved once typing pauses);
- `mode="throttle"`: a call during the wait only replaces the arguments, so while calls keep
  coming the function runs once every `delay_ms` (the figures follow a long turn as it goes).

Written after qutebrowser's `misc/throttle.py`, whose calls run on the leading edge; none of
ours wants that (the first keystroke of a word is no time to save the draft), so there is no
such mode here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Literal, ParamSpec

from PySide6.QtCore import QObject, QTimer

P = ParamSpec("P")
Mode = Literal["debounce", "throttle"]


class Throttle(QObject, Generic[P]):
    """`func` at most once per `delay_ms`, on the trailing edge (see the module); call the
    Throttle as you would call `func`. It lives as long as `parent` (a Qt parent, like the
    QTimer it holds): a call still waiting when that goes never runs."""

    def __init__(self, func: Callable[P, object], delay_ms: int, parent: QObject | None = None,
                 *, mode: Mode) -> None:
        if mode not in ("debounce", "throttle"):
            raise ValueError(f"mode must be 'debounce' or 'throttle', not {mode!r}")
        super().__init__(parent)
        self._func = func
        self._mode = mode
        self._args: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(delay_ms)
        self._timer.timeout.connect(self._run)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Ask for a call of `func` with these arguments (they replace any asked for before)."""
        self._args = (args, kwargs)
        if self._mode == "debounce" or not self._timer.isActive():
            self._timer.start()

    def cancel(self) -> None:
        """Forget the call asked for, if any: `func` does not run for it."""
        self._timer.stop()
        self._args = None

    def pending(self) -> bool:
        """A call was asked for and has not run yet."""
        return self._timer.isActive()

    @property
    def delay_ms(self) -> int:
        return self._timer.interval()

    def _run(self) -> None:
        if self._args is None:
            return
        args, kwargs = self._args
        self._args = None  # before the call: `func` may ask for the next one
        self._func(*args, **kwargs)
