"""The agent's todo list, shown above the composer while it has items."""

from __future__ import annotations

from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget

from ui.palette import current

MARKS = {"pending": "☐", "in_progress": "◐", "done": "☑"}


class TodoPanel(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("todo")  # its colours: ui/palette.py's sheet
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 6, 14, 6)
        layout.setSpacing(2)
        self.title = QLabel(self)
        bold = self.title.font()
        bold.setBold(True)
        self.title.setFont(bold)
        self.items = QLabel(self)
        self.items.setWordWrap(True)
        layout.addWidget(self.title)
        layout.addWidget(self.items)
        self.setVisible(False)

    def set_items(self, items: list[tuple[str, str]]) -> None:
        """(text, status) pairs; an empty list hides the panel."""
        if not items:
            self.setVisible(False)
            return
        done = sum(1 for _, status in items if status == "done")
        self.title.setText(f"Agent's plan · {done} of {len(items)} done")
        lines = []
        for text, status in items[:12]:
            line = f"{MARKS.get(status, '☐')} {text}"
            lines.append(f"<span style='color:{current().faint}'>{_esc(line)}</span>"
                         if status == "done"
                         else f"<b>{_esc(line)}</b>" if status == "in_progress" else _esc(line))
        if len(items) > 12:
            lines.append(f"… {len(items) - 12} more")
        self.items.setText("<br>".join(lines))
        self.setVisible(True)

    def text(self) -> str:
        return self.title.text() + "\n" + self.items.text()


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
