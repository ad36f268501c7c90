"""The first start's offer of a model server already running on this computer: what was found
(which server, where, its models), each model one click away from filling Settings in."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QFrame, QLabel, QPushButton, QVBoxLayout, QWidget

from ui.flow_layout import FlowLayout

MAX_BUTTONS = 4  # models offered as buttons; the rest of a long list in a drop-down


@dataclass(frozen=True)
class FoundServer:
    """A server found, as the offer shows it.

    Attributes:
        kind: what it is ("Ollama", "LM Studio", "llama.cpp", "vLLM", …).
        address: where it answered (`http://127.0.0.1:11434`).
        api_base: the base URL that goes into Settings.
        models: (the model's name as the server gives it, the model as Settings names it).
    """

    kind: str
    address: str
    api_base: str
    models: tuple[tuple[str, str], ...]


class LocalServerOffer(QFrame):
    """Signals:
        picked(str, str): the model (as Settings names it) and the base URL the user chose.
    """

    picked = Signal(str, str)

    def __init__(self, servers: list[FoundServer], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("local_servers")
        layout = QVBoxLayout(self)
        one = len(servers) == 1
        heading = QLabel("<b>" + ("A model server is" if one else "Model servers are")
                         + " running on this computer</b>", self)
        layout.addWidget(heading)
        note = QLabel("Pick a model to use it: no key is needed, and nothing leaves this "
                      "computer. Or choose a provider below.", self)
        note.setWordWrap(True)
        layout.addWidget(note)
        self.buttons: list[QPushButton] = []
        for server in servers:
            self._add_server(layout, server)
        self.chosen = QLabel(self)  # what the pick filled in
        self.chosen.setObjectName("local_server_chosen")
        self.chosen.setWordWrap(True)
        self.chosen.hide()
        layout.addWidget(self.chosen)

    def _add_server(self, layout: QVBoxLayout, server: FoundServer) -> None:
        count = len(server.models)
        what = (f"{count} model{'s' if count != 1 else ''}" if count
                else "no model loaded yet: load one there, then open Settings again")
        title = QLabel(f"{server.kind} at {server.address} · {what}", self)
        title.setWordWrap(True)
        layout.addWidget(title)
        if not server.models:
            return
        row = QWidget(self)
        flow = FlowLayout(row)
        for name, model in server.models[:MAX_BUTTONS]:
            button = QPushButton(f"Use {name}", row)
            button.setToolTip(f"Model {model}, base URL {server.api_base}, no key")
            button.clicked.connect(lambda _=False, m=model, b=server.api_base: self._pick(m, b))
            flow.addWidget(button)
            self.buttons.append(button)
        rest = server.models[MAX_BUTTONS:]
        if rest:
            more = QComboBox(row)
            more.addItem(f"{len(rest)} more…")
            for name, model in rest:
                more.addItem(name, (model, server.api_base))
            more.activated.connect(lambda index, box=more: self._pick_from(box, index))
            flow.addWidget(more)
        layout.addWidget(row)

    def _pick_from(self, box: QComboBox, index: int) -> None:
        data = box.itemData(index)
        if isinstance(data, tuple):
            self._pick(*data)

    def _pick(self, model: str, api_base: str) -> None:
        self.chosen.setText(f"Filled in below: {model} at {api_base}, no key. Save to use it.")
        self.chosen.show()
        self.picked.emit(model, api_base)
