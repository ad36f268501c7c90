"""Settings: which provider and model, where the server is, how long answers may be, the key."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from core.settings import ENV_API_KEY, ProviderEntry
from ui.local_server_offer import FoundServer, LocalServerOffer
from ui.settings_parts import PRESETS, Preset, SettingsChoice, cap_box


class SettingsDialog(QDialog):
    """Modal-less settings dialog; read `choice()` after it is accepted.

    Signals:
        forget_window_requested(str): the user reset the context limit remembered for a model.
    """

    forget_window_requested = Signal(str)
    restart_requested = Signal(str)  # an MCP server's name
    draft_changed = Signal()  # the provider, model, address or window shown changed
    local_offer: LocalServerOffer | None = None  # model servers found on this computer

    def __init__(
        self,
        parent: QWidget | None,
        *,
        preset_name: str | None,
        model: str,
        api_base: str | None,
        max_output_tokens: int,
        keyring_available: bool,
        keys_present: dict[str, bool],
        remembered_windows: dict[str, int] | None = None,
        context_window: int | None = None,
        window_applied: str | None = None,
        summary_model: str | None = None,
        auto_summary: bool = True,
        auto_title: bool = True,
        saved: dict[str, ProviderEntry] | None = None,
        images: bool = False,
        cost_cap: float | None = None,
        project_cost_cap: float | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings — provider and model")
        self.setMinimumWidth(600)
        self._keyring = keyring_available
        self._keys_present = keys_present
        self._saved = dict(saved or {})  # provider entries saved before, by preset name
        self._make_model_fields(model, api_base, max_output_tokens, context_window,
                                window_applied)
        self._make_option_fields(summary_model, auto_summary, auto_title, images, cost_cap,
                                 project_cost_cap)
        intro = QLabel(
            "Pick a provider, check the model name (OpenAI-compatible servers are spoken to "
            "directly, other providers through litellm), and give an API key if the provider "
            "needs one. Keys never go into your project folder.", self)
        intro.setWordWrap(True)
        form = self._form()
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        # The form scrolls inside the dialog: every note gets the lines it needs (a squeezed
        # layout cut them and drew one over the next), and on a small screen it scrolls.
        content = QWidget(self)
        layout = QVBoxLayout(content)
        layout.addWidget(intro)
        layout.addLayout(form)
        self._add_remembered_windows(layout, remembered_windows)
        self._add_mcp_servers(layout)
        layout.addStretch(1)  # room left over goes below: the form never moves
        self.form_area = QScrollArea(self)
        self.form_area.setWidgetResizable(True)
        self.form_area.setFrameShape(QFrame.Shape.NoFrame)
        self.form_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.form_area.setWidget(content)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 9)
        outer.addWidget(self.form_area, 1)
        outer.addWidget(buttons)
        buttons.setContentsMargins(9, 0, 9, 0)
        self._follow_the_form(preset_name)
        self._fit_to_screen(layout, content, buttons)

    def _make_model_fields(self, model: str, api_base: str | None, max_output_tokens: int,
                           context_window: int | None, window_applied: str | None) -> None:
        """Provider, model, address, output limit and context window."""
        self.preset = QComboBox(self)
        for p in PRESETS:
            self.preset.addItem(p.name)
        self.model = QLineEdit(model, self)
        self.model.setPlaceholderText("litellm model string, e.g. gpt-4o-mini or ollama/llama3.1")
        self.api_base = QLineEdit(api_base or "", self)
        self.api_base.setPlaceholderText("leave empty for the provider's own address")
        self.max_tokens = QSpinBox(self)
        self.max_tokens.setRange(16, 1_000_000)
        self.max_tokens.setValue(max_output_tokens)
        self.context_window = QSpinBox(self)
        self.context_window.setRange(0, 10_000_000)
        self.context_window.setSingleStep(1024)
        self.context_window.setSpecialValueText("automatic (the server's or litellm's figure)")
        self.context_window.setValue(context_window or 0)
        self.context_window.setToolTip(
            "The model's input window in tokens. Automatic asks a local server (vLLM, "
            "llama.cpp, LM Studio, Ollama) or uses litellm's map; set it when those are wrong. "
            "A smaller limit the server states wins: a request built for more would be "
            "refused. A limit a server stated when it refused a request is remembered for that "
            "server; the window set here wins over it.")
        self.window_applied = QLabel(window_applied or "", self)
        self.window_applied.setObjectName("window_applied")
        self.window_applied.setWordWrap(True)
        self.window_applied.setProperty("role", "muted")
        self.window_applied.setVisible(bool(window_applied))

    def _make_option_fields(self, summary_model: str | None, auto_summary: bool,
                            auto_title: bool, images: bool, cost_cap: float | None,
                            project_cost_cap: float | None) -> None:
        """Summaries and titles, images, the cost caps, the key."""
        self.summary_model = QLineEdit(summary_model or "", self)
        self.summary_model.setPlaceholderText("the model above")
        self.summary_model.setToolTip(
            "The model that writes compaction summaries, e.g. a cheaper one of the same "
            "provider. Empty: the conversation's model.")
        self.auto_summary = QCheckBox("Summarize older history when it fills the window", self)
        self.auto_summary.setToolTip("In the background, after a turn that fills most of the "
                                     "window (only when it frees enough to be worth a request)")
        self.auto_summary.setChecked(auto_summary)
        self.auto_title = QCheckBox("Title new conversations with the summary model", self)
        self.auto_title.setToolTip("After their first answer; unticked, a conversation is "
                                   "titled with its first words")
        self.auto_title.setChecked(auto_title)
        self.images = QCheckBox("This model reads images (pasted or attached screenshots)",
                                self)
        self.images.setObjectName("images")
        self.images.setChecked(images)
        self.images.setToolTip(
            "litellm knows which hosted models take images; tick this for a model it does not "
            "know that does (a local vision model). Unticked: as litellm says.")
        self.cost_cap = cap_box(self, cost_cap, "A send whose conversation has spent this "
                                 "much, or whose next request would pass it, is not sent "
                                 "(WORKBENCH_COST_CAP on the command line)")
        self.project_cost_cap = cap_box(self, project_cost_cap, "The same, for all the "
                                         "conversations of the open project together")
        self.api_key = QLineEdit(self)
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_note = QLabel(self)
        self.key_note.setWordWrap(True)
        self.key_note.setProperty("role", "muted")

    def _form(self) -> QFormLayout:
        """The fields in rows, with the note on what contains the agent's commands last."""
        form = QFormLayout()
        form.addRow("Provider", self.preset)
        form.addRow("Model", self.model)
        form.addRow("Base URL", self.api_base)
        form.addRow("Max output tokens", self.max_tokens)
        form.addRow("Context window", self.context_window)
        form.addRow("", self.window_applied)
        form.addRow("Images", self.images)
        form.addRow("Summary model", self.summary_model)
        form.addRow("", self.auto_summary)
        form.addRow("", self.auto_title)
        caps = QHBoxLayout()
        caps.addWidget(QLabel("per conversation", self))
        caps.addWidget(self.cost_cap)
        caps.addWidget(QLabel("per project", self))
        caps.addWidget(self.project_cost_cap)
        caps.addStretch(1)
        form.addRow("Cost cap", caps)
        form.addRow("API key", self.api_key)
        form.addRow("", self.key_note)
        self.protection = QLabel(self)
        self.protection.setObjectName("protection")
        self.protection.setWordWrap(True)
        self.protection.setProperty("role", "muted")
        form.addRow("Agent commands", self.protection)
        return form

    def _add_remembered_windows(self, layout: QVBoxLayout,
                                remembered_windows: dict[str, int] | None) -> None:
        """The context limits servers stated, each to forget (hidden when there are none)."""
        self.windows = QListWidget(self)
        self.forget_button = QPushButton("Forget the selected limit", self)
        self.forget_button.clicked.connect(self._on_forget_clicked)
        if not remembered_windows:
            self.windows.hide()
            self.forget_button.hide()
            return
        note = QLabel(
            "Context limits providers stated when they refused a request as too long. "
            "Requests to these models are built to fit them; forget one that was wrong.",
            self)
        note.setWordWrap(True)
        layout.addWidget(note)
        for model_name, limit in sorted(remembered_windows.items()):
            address, _, model = model_name.rpartition("|")  # "<address>|<model>"
            where = f"{model} at {address}" if address else model
            item = QListWidgetItem(f"{where}: {limit:,} tokens")
            item.setData(Qt.ItemDataRole.UserRole, model_name)
            self.windows.addItem(item)
        self.windows.setMaximumHeight(90)
        self.windows.setCurrentRow(0)
        layout.addWidget(self.windows)
        layout.addWidget(self.forget_button)

    def _add_mcp_servers(self, layout: QVBoxLayout) -> None:
        """The MCP servers' list and its Restart, hidden until `set_mcp` gives servers."""
        self.mcp_note = QLabel(
            "MCP servers (.workbench/mcp.json, or mcp.json in the config folder). A command "
            "server runs with your rights: Context Workbench does not sandbox it, and asks "
            "before each of its tools runs.", self)
        self.mcp_note.setWordWrap(True)
        self.mcp_servers = QListWidget(self)
        self.mcp_servers.setObjectName("mcp_servers")
        self.mcp_servers.setMaximumHeight(110)
        self.mcp_restart = QPushButton("Restart the selected server", self)
        self.mcp_restart.clicked.connect(self._on_restart_clicked)
        for widget in (self.mcp_note, self.mcp_servers, self.mcp_restart):
            layout.addWidget(widget)
            widget.hide()

    def _follow_the_form(self, preset_name: str | None) -> None:
        """The preset shown, and the notes that follow what the form says."""
        index = next((i for i, p in enumerate(PRESETS) if p.name == preset_name), 0)
        self.preset.setCurrentIndex(index)
        self._update_key_note()
        self.preset.currentIndexChanged.connect(self._on_preset_changed)
        self.api_base.textChanged.connect(self._update_key_note)
        # "Requests are built for …" follows what the form says now (the owner works it out)
        for changed in (self.preset.currentIndexChanged, self.model.textChanged,
                        self.api_base.textChanged, self.context_window.valueChanged,
                        self.max_tokens.valueChanged):
            changed.connect(self.draft_changed)

    def _fit_to_screen(self, layout: QVBoxLayout, content: QWidget,
                       buttons: QDialogButtonBox) -> None:
        """Tall enough to read it all without scrolling, within the screen."""
        screen = self.screen().availableGeometry() if self.screen() else None
        width = max(self.minimumWidth(), self.sizeHint().width())
        inner = layout.totalHeightForWidth(width - 24) if layout.hasHeightForWidth() else \
            content.sizeHint().height()
        for note in (self.window_applied, self.key_note, self.protection):  # from their top
            note.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.resize(width, min(max(inner, 600) + buttons.sizeHint().height() + 40,
                               screen.height() * 9 // 10 if screen else 760))

    def set_mcp(self, servers: list[tuple[str, str, str]]) -> None:
        """The project's MCP servers: (name, command or URL, state) each."""
        current = self.mcp_servers.currentItem()
        keep = current.data(Qt.ItemDataRole.UserRole) if current is not None else None
        self.mcp_servers.clear()
        for name, where, state in servers:
            item = QListWidgetItem(f"{name} — {state}")
            item.setToolTip(f"{name}: {where}\n{state}")
            item.setData(Qt.ItemDataRole.UserRole, name)
            self.mcp_servers.addItem(item)
            if name == keep or keep is None and self.mcp_servers.count() == 1:
                self.mcp_servers.setCurrentItem(item)
        for widget in (self.mcp_note, self.mcp_servers, self.mcp_restart):
            widget.setVisible(bool(servers))

    def _on_restart_clicked(self) -> None:
        item = self.mcp_servers.currentItem()
        if item is not None:
            self.restart_requested.emit(str(item.data(Qt.ItemDataRole.UserRole)))

    def _on_forget_clicked(self) -> None:
        item = self.windows.currentItem()
        if item is None:
            return
        self.forget_window_requested.emit(str(item.data(Qt.ItemDataRole.UserRole)))
        self.windows.takeItem(self.windows.row(item))
        self.forget_button.setEnabled(self.windows.count() > 0)
        self.draft_changed.emit()  # the limit forgotten no longer shapes requests

    def set_window_applied(self, text: str | None) -> None:
        """The sentence under Context window: the window requests are built for, as set now."""
        self.window_applied.setText(text or "")
        self.window_applied.setVisible(bool(text))

    def current_preset(self) -> Preset:
        return PRESETS[self.preset.currentIndex()]

    def choice(self) -> SettingsChoice:
        key = self.api_key.text().strip() or None
        return SettingsChoice(
            preset=self.current_preset(),
            model=self.model.text().strip() or self.current_preset().model,
            api_base=self.api_base.text().strip() or None,
            max_output_tokens=self.max_tokens.value(),
            api_key=key,
            context_window=self.context_window.value() or None,
            summary_model=self.summary_model.text().strip() or None,
            auto_summary=self.auto_summary.isChecked(),
            auto_title=self.auto_title.isChecked(),
            images=self.images.isChecked(),
            cost_cap=self.cost_cap.value() or None,
            project_cost_cap=self.project_cost_cap.value() or None,
        )

    def _on_preset_changed(self, _index: int) -> None:
        """Another provider: what was saved for it (model, address, limits), else its
        defaults; the context window set belongs to the provider it was set for."""
        p = self.current_preset()
        entry = self._saved.get(p.name)
        self.model.setText(entry.model if entry is not None else p.model)
        self.api_base.setText((entry.api_base if entry is not None else p.api_base) or "")
        if entry is not None and entry.max_output_tokens:
            self.max_tokens.setValue(entry.max_output_tokens)
        self.context_window.setValue(entry.context_window or 0 if entry is not None else 0)
        self.images.setChecked(bool(entry is not None and entry.images))
        self._update_key_note()

    def _update_key_note(self) -> None:
        p = self.current_preset()
        self.api_key.setEnabled(True)
        if self.api_base.text().strip():
            # A custom address never gets a provider's own key (OPENAI_API_KEY, ...): only the
            # key saved here, or WORKBENCH_API_KEY.
            never = f" (never {p.key_env})" if p.key_env else ""
            saved = ("a key typed here is stored in your system keyring" if self._keyring else
                     "no system keyring works here, so a key typed here cannot be saved")
            note = (f"A custom base URL gets only its own key{never}: {saved}; or set "
                    f"{ENV_API_KEY} before starting Context Workbench. Leave it empty if the "
                    "server needs none.")
        elif p.key_env is None:
            note = ("This provider usually needs no key; fill it in only if your server asks "
                    "for one.")
        elif self._keys_present.get(p.provider):
            note = f"A key for {p.name} is already available; type a new one to replace it."
        elif self._keyring:
            note = f"The key is stored in your system keyring (or set {p.key_env} instead)."
        else:
            note = (f"No system keyring works here, so a key typed here cannot be saved. Set the "
                    f"environment variable {p.key_env} before starting Context Workbench.")
        self.key_note.setText(note)

    def offer_servers(self, servers: list[FoundServer]) -> None:
        """Model servers found running on this computer, shown above the form: a model picked
        there fills the provider in (none found: the dialog as it is)."""
        if self.local_offer is not None:
            self.local_offer.deleteLater()
            self.local_offer = None
        content = self.form_area.widget()
        layout = content.layout() if content is not None else None
        if not servers or not isinstance(layout, QVBoxLayout):
            return
        self.local_offer = LocalServerOffer(servers, content)
        self.local_offer.picked.connect(self._use_server)
        layout.insertWidget(0, self.local_offer)
        screen = self.screen().availableGeometry() if self.screen() else None
        taller = self.height() + self.local_offer.sizeHint().height()  # (scrolls past that)
        self.resize(self.width(), min(taller, screen.height() * 9 // 10) if screen else taller)

    def _use_server(self, model: str, api_base: str) -> None:
        """A server picked in the offer: an OpenAI-compatible one, its address, no key, and
        the window its server states."""
        self.preset.setCurrentIndex(next(i for i, p in enumerate(PRESETS)
                                         if p.provider == "openai-compatible"))
        self.model.setText(model)
        self.api_base.setText(api_base)
        self.api_key.clear()
        self.context_window.setValue(0)

    def set_protection(self, text: str) -> None:
        """What contains the commands the agent runs (bubblewrap, or none and why)."""
        self.protection.setText(text[:1].upper() + text[1:] + ".")
