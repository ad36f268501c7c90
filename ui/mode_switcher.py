"""Chat | Agent | Run: which system prompt the next request gets (history never changes), and
the agent picker beside it: whose persona and which tools."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QToolButton,
    QWidget,
)

from core.model import Mode
from ui.elided_label import ElidedLabel

MODES: tuple[tuple[Mode, str, str], ...] = (
    ("chat", "Chat", "Ctrl+1"), ("agent", "Agent", "Ctrl+2"), ("run", "Run", "Ctrl+3"))


class ModeSwitcher(QWidget):
    """Signals:
        mode_changed(str): the user picked another mode.
        agent_changed(str): the user picked another agent.
        network_changed(bool): the user allowed (or took back) the network for commands.
    """

    mode_changed = Signal(str)
    agent_changed = Signal(str)
    network_changed = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        self.buttons: dict[Mode, QToolButton] = {}
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 4, 12, 0)
        layout.setSpacing(0)
        for mode, label, key in MODES:
            b = QToolButton(self)
            b.setText(label)
            b.setCheckable(True)
            b.setShortcut(QKeySequence(key))
            b.setToolTip(f"{label} mode ({key}): changes only the system prompt of the next "
                         "request; the history stays as it is")
            b.setObjectName("mode_button")  # its look: ui/palette.py's sheet
            self.group.addButton(b)
            self.buttons[mode] = b
            layout.addWidget(b)
            b.clicked.connect(lambda _=False, m=mode: self.mode_changed.emit(m))
        layout.addSpacing(8)
        self.agent_label = ElidedLabel(self, widest=60, least=0)  # cut before the window widens
        self.agent_label.setText("Agent:")
        self.agent_box = QComboBox(self)
        self.agent_box.setObjectName("agent_picker")
        self.agent_box.setToolTip("The agent: its instructions (the persona of the system "
                                  "prompt) and the tools it may use. Define more in "
                                  ".workbench/agents/.")
        self.agent_label.setBuddy(self.agent_box)
        layout.addWidget(self.agent_label)
        layout.addWidget(self.agent_box)
        self.agent_box.activated.connect(
            lambda i: self.agent_changed.emit(self.agent_box.itemText(i)))
        self.protection = ElidedLabel(self, widest=300, least=0)  # the tooltip keeps it all
        self.protection.setProperty("role", "faint")
        self.protection.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        layout.addStretch(1)
        layout.addWidget(self.protection)
        self.network = QCheckBox("network", self)
        self.network.setObjectName("network")
        self.network.setToolTip("Let the commands the agent runs in this conversation use the "
                                "network (the sandbox cuts it off otherwise)")
        self.network.toggled.connect(self.network_changed)
        layout.addSpacing(4)
        layout.addWidget(self.network)
        self.buttons["chat"].setChecked(True)

    def mode(self) -> Mode:
        return next(m for m, b in self.buttons.items() if b.isChecked())

    def set_mode(self, mode: str) -> None:
        """Show `mode` without emitting mode_changed."""
        if mode in self.buttons:
            self.buttons[mode].setChecked(True)

    def set_agents(self, names: list[str], current: str, tips: dict[str, str] | None = None
                   ) -> None:
        """Fill the picker (without emitting agent_changed)."""
        self.agent_box.blockSignals(True)
        self.agent_box.clear()
        for name in names:
            self.agent_box.addItem(name)
            if tips and name in tips:
                self.agent_box.setItemData(self.agent_box.count() - 1, tips[name],
                                           Qt.ItemDataRole.ToolTipRole)
        self.agent_box.setCurrentIndex(max(0, self.agent_box.findText(current)))
        self.agent_box.blockSignals(False)

    def agent(self) -> str:
        return self.agent_box.currentText()

    def set_protection(self, short: str, full: str, sandboxed: bool) -> None:
        """What contains the agent's commands (bubblewrap, or none), shown beside the picker;
        the network switch only means something inside a sandbox."""
        self.protection.hint = full
        self.protection.setText(short)
        self.network.setVisible(sandboxed)

    def set_network(self, allowed: bool) -> None:
        """Show the conversation's choice (without emitting network_changed)."""
        self.network.blockSignals(True)
        self.network.setChecked(allowed)
        self.network.blockSignals(False)
