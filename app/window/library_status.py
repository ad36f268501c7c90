"""The status bar's word on the model library: "Ready" when a message sent now leaves at once
(its model speaks the OpenAI protocol, the openai SDK's path, or litellm is in), else "Loading
the model library…" while litellm imports in the background, followed until it is in."""

from __future__ import annotations

import gc
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

from app.window import process
from app.window.notices import Notices
from app.window.settings_flow import SettingsFlow
from core.llm import runtime
from core.settings import SettingsError

POLL_MS = 150  # how often the background import is looked at while it runs


class LibraryStatus(QObject):
    """Follows litellm's background import for the model in use and says where it stands."""

    def __init__(self, notices: Notices, settings_flow: SettingsFlow, busy: Callable[[], bool],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.notices = notices
        self.settings_flow = settings_flow
        self._busy = busy  # a turn's own state is on the status bar meanwhile
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)

    def model_in_use(self) -> str | None:
        """The model the next request goes to (None: the settings cannot be read)."""
        try:
            return self.settings_flow.llm_settings().model
        except SettingsError:
            return None

    def ready(self) -> bool:
        """A message sent now leaves at once."""
        model = self.model_in_use()
        return runtime.ready_for(model) if model is not None else runtime.is_loaded()

    def watch(self) -> None:
        """Say where it stands, and follow the import until a message would leave at once."""
        self.refresh()
        if not self.ready():
            self._timer.start()

    def settings_changed(self) -> None:
        """Another provider may need litellm: it warms in the background, followed."""
        model = self.model_in_use()
        if model is not None and not runtime.ready_for(model):
            process.warm_up_library(model)
            self._timer.start()
        self.refresh()

    def _poll(self) -> None:
        if self.ready():
            self._timer.stop()
            if runtime.is_loaded():
                gc.freeze()  # litellm's many long-lived objects: never rescan them
        self.refresh()

    def refresh(self) -> None:
        if self._busy():
            return
        problem = self.settings_flow.problem()
        if problem:
            self.notices.state("settings problem", f"{problem}. Open Settings (Ctrl+,).")
            return
        state = "Ready" if self.ready() else (
            "Loading the model library… a message sent now leaves as soon as it is in")
        self.notices.state(self.settings_flow.model_label(), state)
