"""The context-usage meter in the status bar: used / usable tokens, %, colour by state."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget

from ui.palette import current


def short(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else f"{n:,}"


class UsageIndicator(QLabel):
    """Attributes:
    state: "normal", "warning" (above the compaction trigger), "over", or "pending".
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("usage")
        self.state = "pending"
        self.set_pending("context: counting…")

    def set_usage(self, used: int, usable: int, state: str, tooltip: str) -> None:
        percent = 100.0 * used / usable if usable else 100.0
        self.state = state
        self.setText(f"  {short(used)} / {short(usable)} tokens · {percent:.0f}%  ")
        self.setToolTip(tooltip)
        self._paint(state)

    def set_problem(self, text: str, tooltip: str) -> None:
        """No request can be built (it cannot fit, or the settings are invalid): say so."""
        self.state = "over"
        self.setText(f"  {text}  ")
        self.setToolTip(tooltip)
        self._paint("over")

    def set_pending(self, text: str) -> None:
        self.state = "pending"
        self.setText(f"  {text}  ")
        self.setToolTip("")
        self._paint("pending")

    def _paint(self, state: str) -> None:
        bold = "font-weight: bold;" if state != "normal" else ""
        self.setStyleSheet(f"color: {current().meter[state]}; {bold}")

    def restyle(self) -> None:
        """The palette changed: the state's colour in the new one."""
        self._paint(self.state)
