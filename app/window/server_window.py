"""A local server's stated window (or, where it states none, what one count over the window
assumed tells: ProjectContext.counted_window), asked for as soon as the window shows a
conversation for it (in the background, on the engine's thread), not at the first send: until
then the meter and the Inspector would count against a guess."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from app.window.meter import UsageMeter
from app.window.settings_flow import SettingsFlow
from app.window.worker import EngineWorker
from core.llm.compat import is_local
from core.settings import SettingsError
from core.store.errors import ConversationNotFound


class ServerWindow(QObject):
    answered = Signal()  # emitted on the engine's thread; the window's slot runs on its own

    def __init__(self, worker: EngineWorker, meter: UsageMeter, settings_flow: SettingsFlow,
                 refresh: Callable[[], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.worker, self.meter, self.settings_flow = worker, meter, settings_flow
        self._asked: set[tuple[str, str]] = set()
        self.answered.connect(refresh)

    def ask(self, conv_id: str | None = None) -> None:
        """Ask the settings' server once, unless what it states is known already (or the
        conversation shown, `conv_id`, states its own window: no count for it)."""
        try:
            settings = self.settings_flow.llm_settings()
        except SettingsError:
            return
        context = self.meter.context
        base = settings.api_base
        if context is None or not base or settings.context_window:
            return
        key = (base, settings.model)
        if key in self._asked or context.calibration is None or \
                context.calibration.probed(*key)[0] and (
                    context.calibration.window_count(*key)[0] or not is_local(base)):
            return
        self._asked.add(key)

        async def asking() -> None:  # what a build asks: the stated window, else the count
            try:
                await asyncio.to_thread(context.budget, conv_id, settings)
            except ConversationNotFound:  # removed meanwhile: the server is asked all the same
                await asyncio.to_thread(context.budget, None, settings)
            self.answered.emit()

        self.worker.call_soon(asking())
