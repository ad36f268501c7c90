"""Which settings the next request uses, and the Settings dialog's round trip.

One place resolves settings for the window: every layer (environment, the project's
`project.json`, the global `settings.json`) is merged by `core.settings.resolve_llm_settings`,
and a broken layer is an error to show, never a silent fallback to another provider.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from core.context.budget import Budget
from core.context.calibration import Calibration
from core.context.report_text import window_applied
from core.settings import (
    ENV_API_KEY,
    LLMSettings,
    ProviderEntry,
    SettingsError,
    SettingsStore,
    key_env_var,
    keyring_set,
    keyring_works,
    lookup_api_key,
    resolve_llm_settings,
)
from ui import palette
from ui.local_server_offer import FoundServer
from ui.main_window import MainWindow
from ui.settings_dialog import SettingsDialog
from ui.settings_parts import PRESETS


class SettingsFlow(QObject):
    """Signals:
        changed(): the user saved Settings or reset a remembered limit.
    Attributes:
        store: the global settings file.
        calibration: per-model calibration and the limits providers stated.
        dialog: the Settings dialog while it is open.
    """

    changed = Signal()

    def __init__(self, window: MainWindow, store: SettingsStore, calibration: Calibration,
                 overrides: Callable[[], Mapping[str, Any]],
                 budget: Callable[[LLMSettings], Budget | None] = lambda s: None) -> None:
        super().__init__(window)
        self.window = window
        self.store = store
        self.calibration = calibration
        self._overrides = overrides
        self._budget = budget  # the window the current conversation's requests are built for
        self.dialog: SettingsDialog | None = None
        self.local_servers: list[FoundServer] = []  # offered until Settings are saved
        # The project's MCP servers, as app/tools_flow.py gives them: (name, where, state)
        # each, and how one is restarted.
        self.mcp_states: Callable[[], list[tuple[str, str, str]]] = list
        self.restart_mcp: Callable[[str], None] = lambda _name: None
        self._mcp_timer = QTimer(self)
        self._mcp_timer.setInterval(500)
        self._mcp_timer.timeout.connect(self._follow_mcp)
        window.theme_chosen.connect(self.set_theme)
        theme = self.store.load().theme
        window.theme_actions[theme or "system"].setChecked(True)
        self._apply_theme(theme)
        hints = QGuiApplication.styleHints()
        if hints is not None:  # the desktop switched between light and dark
            hints.colorSchemeChanged.connect(lambda _scheme: self._follow_desktop())

    def llm_settings(self, provider: str | None = None) -> LLMSettings:
        """The settings the next request uses (with `provider`, a saved provider's model and
        base URL for one request, as Regenerate with … asks).

        Raises:
            SettingsError: a layer (environment, project.json, settings.json) is invalid. Never a
                silent fallback to defaults: that would send to a provider the user did not choose.
        """
        g = self.store.load()
        if self.store.problem:
            raise SettingsError(
                f"{self.store.problem}. Fix that file, or save Settings to start over "
                "(the unreadable file is kept beside it as settings.json.bad)")
        entry = g.provider(provider) if provider else None
        if entry is None:
            return resolve_llm_settings(project=self._overrides(), global_settings=g)
        return resolve_llm_settings(
            cli={"model": entry.model, "api_base": entry.api_base}, project=self._overrides(),
            global_settings=g.model_copy(update={"active_provider": entry.name}))

    def set_theme(self, scheme: str) -> None:
        """View → Theme: use it now and remember it ("system" follows the desktop)."""
        g = self.store.load()
        g.theme = scheme if scheme in ("light", "dark") else None
        try:
            self.store.save(g)  # (an unreadable settings file is left alone: this session only)
        except OSError:
            pass  # a preference: it applies now all the same
        self._apply_theme(g.theme)
        self.window.theme_actions[scheme if g.theme else "system"].setChecked(True)

    def _follow_desktop(self) -> None:
        if self.store.load().theme is None:
            self._apply_theme(None)

    def _apply_theme(self, theme: str | None) -> None:
        app = QApplication.instance()
        if isinstance(app, QApplication):
            palette.apply(app, theme)
            self.window.use_palette()

    def other_providers(self) -> list[tuple[str, str]]:
        """(label, name) of the saved providers besides the one in use."""
        g = self.store.load()
        return [(f"{p.name}: {p.model}", p.name) for p in g.providers
                if p.name != g.active_provider]

    def problem(self) -> str | None:
        """Why no request can be sent with the current settings, or None."""
        try:
            self.llm_settings()
        except SettingsError as e:
            return str(e)
        return None

    def model_label(self, model: str | None = None) -> str:
        """How the status bar names the model: `model @ base URL` (the one in use, or `model`
        when a request goes to another one)."""
        try:
            s = self.llm_settings()
        except SettingsError:
            return model or "settings problem"
        if model is not None and model != s.model:
            return model
        return s.model + (f" @ {s.api_base}" if s.api_base else "")

    def provider_configured(self) -> bool:
        g = self.store.load()
        if g.active_provider or g.model:
            return True
        try:
            s = self.llm_settings()
        except SettingsError:
            return True  # configured, if wrongly: the problem is shown, not the welcome text
        return s.sources.get("model") != "default" or bool(lookup_api_key("openai"))

    def open(self) -> None:
        g = self.store.load()
        try:
            s = self.llm_settings()
        except SettingsError:  # show what the saved provider says; the problem is on screen
            try:
                s = resolve_llm_settings(env={}, global_settings=g)
            except SettingsError:
                s = LLMSettings()
        keys = {p.provider: bool(lookup_api_key(p.provider)) for p in PRESETS if p.key_env}
        budget = self._budget(s)
        active = g.provider(g.active_provider)
        self.dialog = SettingsDialog(
            self.window, preset_name=g.active_provider, model=s.model, api_base=s.api_base,
            max_output_tokens=s.max_output_tokens, keyring_available=keyring_works(),
            keys_present=keys, remembered_windows=self.calibration.remembered_windows(),
            context_window=s.context_window if s.sources.get("context_window") == "global"
            else None, summary_model=g.summary_model,
            window_applied=window_applied(budget.window, budget.source, budget.note)
            if budget is not None else None,
            auto_summary=g.auto_summary if g.auto_summary is not None else True,
            auto_title=g.auto_title if g.auto_title is not None else True,
            saved={p.name: p for p in g.providers}, images=bool(active and active.images),
            cost_cap=g.cost_cap, project_cost_cap=g.project_cost_cap)
        from core.tools.sandbox import detect_sandbox

        self.dialog.set_protection(detect_sandbox().describe())
        self.dialog.accepted.connect(self._on_dialog_accepted)
        self.dialog.forget_window_requested.connect(self._on_dialog_forget_window_requested)
        self.dialog.restart_requested.connect(self.restart_mcp)
        self.dialog.draft_changed.connect(self._on_dialog_draft_changed)
        self.dialog.set_mcp(self.mcp_states())
        self.dialog.offer_servers(self.local_servers)
        self._mcp_timer.start()  # the states follow while the dialog is open
        self.dialog.open()

    def offer_local(self, servers: list[FoundServer]) -> None:
        """Model servers found running on this computer (app/window/local_server_flow.py):
        offered in the dialog, the one open now included."""
        self.local_servers = servers
        if self.dialog is not None and self.dialog.isVisible():
            self.dialog.offer_servers(servers)

    def _follow_mcp(self) -> None:
        if self.dialog is None or not self.dialog.isVisible():
            self._mcp_timer.stop()
            return
        self.dialog.set_mcp(self.mcp_states())

    def _on_dialog_draft_changed(self) -> None:
        """The window the form as it stands would build requests for."""
        if self.dialog is None:
            return
        choice = self.dialog.choice()
        try:
            s = self.llm_settings()
        except SettingsError:
            s = LLMSettings()
        sources = dict(s.sources)
        window = choice.context_window
        if window is not None:
            sources["context_window"] = "global"
        elif sources.get("context_window") in ("global", None):  # "automatic" chosen here
            sources.pop("context_window", None)
        else:
            window = s.context_window  # the project's or the environment's stays
        draft = s.model_copy(update={"model": choice.model, "api_base": choice.api_base,
                                     "max_output_tokens": choice.max_output_tokens,
                                     "context_window": window, "sources": sources})
        budget = self._budget(draft)
        self.dialog.set_window_applied(window_applied(budget.window, budget.source, budget.note)
                                       if budget is not None else None)

    def _on_dialog_forget_window_requested(self, model: str) -> None:
        """`model`: a name Settings listed (`<address>|<model>` for a server's)."""
        from core.llm import compat

        self.calibration.forget_window(model)
        address, _, name = model.rpartition("|")
        if address:  # what the server was found to need is learned again too
            compat.forget(address, name)
        self.changed.emit()

    def _on_dialog_accepted(self) -> None:
        assert self.dialog is not None
        choice = self.dialog.choice()
        g = self.store.load()
        entry = ProviderEntry(name=choice.preset.name, model=choice.model,
                              api_base=choice.api_base, max_output_tokens=choice.max_output_tokens,
                              context_window=choice.context_window,
                              key_name=choice.preset.provider,
                              images=True if choice.images else None)
        g.providers = [p for p in g.providers if p.name != entry.name] + [entry]
        g.active_provider = entry.name
        g.model = g.api_base = g.max_output_tokens = None  # the provider entry decides now
        g.summary_model = choice.summary_model
        g.auto_summary = None if choice.auto_summary else False
        g.auto_title = None if choice.auto_title else False
        g.cost_cap, g.project_cost_cap = choice.cost_cap, choice.project_cost_cap
        self.store.save(g, replace_unreadable=True)
        self.local_servers = []  # a provider is chosen: nothing more to offer
        if choice.api_key and not keyring_set(choice.preset.provider, choice.api_key):
            # The variable the key will actually be read from: a custom base URL never gets a
            # provider's own key (see core.settings.key_for_request).
            env = ENV_API_KEY if choice.api_base else key_env_var(choice.preset.provider)
            self.window.show_warning(
                "Key not saved",
                f"No system keyring works on this machine, so the key was not saved. Set "
                f"{env} in your environment and restart Context Workbench.")
        self.changed.emit()
