"""The one channel from the app to the window for telling the user something.

Flows never reach into the window's widgets to say what happened: they call this channel (info,
warning, error, the status bar's state, why the message in the box was not sent), and the window,
connected once by `attach`, decides where each kind shows. What is said before the window is
connected (a crash while it is being made) is kept and said once it is.

Questions do not come this way: the user's answer has to go back to whoever asked, and a turn's
questions already take their own path (core.questions, answered from the window's thread).
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol

from PySide6.QtCore import QObject, Signal, SignalInstance

from core.store.errors import StoreError, describe_os_error


class NoticeWindow(Protocol):
    """What the channel needs of the window (ui.main_window.MainWindow)."""

    def show_notice(self, level: str, text: str, action: str | None = None) -> None: ...
    def clear_notice(self) -> None: ...
    def set_status(self, model: str, state: str) -> None: ...
    def show_unsent(self, text: str | None) -> None: ...


class Notices(QObject):
    """Signals (delivered in order, held until `attach`):
        posted(str, str, object): a notice to show: its level, its text, and the label of its
            action button or None (the button's press is the window's notice_action).
        cleared(): the notice shown is no longer true.
        status(str, str): the model and what is under way, for the status bar.
        unsent(object): why the message in the box was not sent (str), or None once it is.
    """

    posted = Signal(str, str, object)
    cleared = Signal()
    status = Signal(str, str)
    unsent = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._held: list[tuple[SignalInstance, tuple[object, ...]]] | None = []

    def attach(self, window: NoticeWindow) -> None:
        """Connect the window (once; to its methods, so nothing is said to a window that is
        gone), then say what was held for it."""
        if self._held is None:
            return
        self.posted.connect(window.show_notice)
        self.cleared.connect(window.clear_notice)
        self.status.connect(window.set_status)
        self.unsent.connect(window.show_unsent)
        held, self._held = self._held, None
        for signal, args in held:
            signal.emit(*args)

    def _say(self, signal: SignalInstance, *args: object) -> None:
        if self._held is not None:
            self._held.append((signal, args))
        else:
            signal.emit(*args)

    def info(self, text: str, action: str | None = None) -> None:
        """Something under way, or done as asked."""
        self._say(self.posted, "info", text, action)

    def warning(self, text: str, action: str | None = None) -> None:
        """Something found, repaired or refused, that the user may want to act on."""
        self._say(self.posted, "warning", text, action)

    def error(self, text: str, action: str | None = None) -> None:
        """Something failed."""
        self._say(self.posted, "error", text, action)

    def clear(self) -> None:
        self._say(self.cleared)

    def state(self, model: str, text: str) -> None:
        """The status bar: the model in use and what is under way."""
        self._say(self.status, model, text)

    def not_sent(self, why: str | None) -> None:
        """Why the message in the box was not sent (None: it was)."""
        self._say(self.unsent, why)

    def saving(self, what: str) -> Saving:
        """Around a write made from a Qt slot: a store that cannot write (a full disk, a
        read-only folder) becomes a warning beginning with `what`, instead of a traceback out
        of the slot; the block's `ok` says whether it went through."""
        return Saving(self, what)

    def store_failed(self, what: str, e: StoreError | OSError) -> None:
        """A write that failed, said as a warning beginning with `what`."""
        self.warning(f"{what}: {e}" if isinstance(e, StoreError)
                     else f"{what}: {describe_os_error(e)}.")


class Saving:
    """See `Notices.saving`."""

    def __init__(self, notices: Notices, what: str) -> None:
        self.notices = notices
        self.what = what
        self.ok = True

    def __enter__(self) -> Saving:
        return self

    def __exit__(self, kind: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if isinstance(e, StoreError | OSError):
            self.ok = False
            self.notices.store_failed(self.what, e)
            return True
        return False
