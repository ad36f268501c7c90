"""A first start without a key: the model servers already running on this computer (Ollama,
LM Studio, llama.cpp, vLLM: core/llm/local_servers.py), looked for on the engine's thread
while the window opens, and offered in the Settings dialog that first start opens."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QObject, Signal

from app.window.settings_flow import SettingsFlow
from app.window.worker import EngineWorker
from core.llm.local_servers import LocalServer, find_local_servers
from core.settings import lookup_api_key
from ui.local_server_offer import FoundServer
from ui.settings_parts import PRESETS


class LocalServerSearch(QObject):
    """Attributes:
        searched: the search is over (whatever it found is offered).
    """

    found = Signal(object)  # emitted on the engine's thread; the window's slot runs on its own

    def __init__(self, worker: EngineWorker, settings_flow: SettingsFlow,
                 addresses: Sequence[str], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.worker, self.settings_flow = worker, settings_flow
        self.addresses = tuple(addresses)
        self.searched = False
        self.found.connect(self._on_found)

    def start(self) -> None:
        """Look, unless a provider is set up already (a model named in the environment, or
        a key for one): then there is nothing to offer."""
        if self.settings_flow.provider_configured() or any(
                lookup_api_key(p.provider) for p in PRESETS if p.key_env):
            self.searched = True
            return
        addresses = self.addresses

        async def searching() -> None:
            try:
                servers = await find_local_servers(addresses)
            except Exception:  # an offer, never a failure to show
                servers = []
            self.found.emit(servers)

        self.worker.call_soon(searching())

    def _on_found(self, servers: list[LocalServer]) -> None:
        self.searched = True
        self.settings_flow.offer_local([
            FoundServer(s.kind, s.address, s.api_base,
                        tuple((name, s.model_setting(name)) for name in s.models))
            for s in servers])
