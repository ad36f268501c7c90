"""The Help menu: the keyboard shortcuts (read from the window's own actions, so the list never
drifts from what the keys do), where the data lives, and About. The last two are written by
the app (paths and versions are not the window's to know): the window asks with
`help_requested` and shows what it is given with `show_help`."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QAbstractButton, QDockWidget, QMessageBox, QWidget

from ui.window_base import WindowBase

# Keys handled by a widget rather than a menu action (so not in any menu).
WIDGET_KEYS = [
    ("Ctrl+Enter", "Send the message"),
    ("Esc", "Stop the answer; while editing an earlier message, give up the edit"),
    ("@", "Attach a project file (in the message box)"),
    ("Double-click your message", "Edit it and send it again, as a new branch"),
]


def build_help_menu(window: WindowBase) -> None:
    menu = window.menuBar().addMenu("&Help")
    window.shortcuts_action = QAction("&Keyboard shortcuts", window)
    window.shortcuts_action.setShortcut(QKeySequence(QKeySequence.StandardKey.HelpContents))
    window.shortcuts_action.triggered.connect(lambda: show_shortcuts(window))
    menu.addAction(window.shortcuts_action)
    data = QAction("&Where your data lives", window)
    data.triggered.connect(lambda: window.help_requested.emit("data"))
    menu.addAction(data)
    menu.addSeparator()
    about = QAction("&About Context Workbench", window)
    about.triggered.connect(lambda: window.help_requested.emit("about"))
    menu.addAction(about)


def shortcut_rows(window: QWidget) -> list[tuple[str, str]]:
    """(keys, what they do): every menu action and button (the modes') that has a shortcut,
    then the widgets' keys."""
    rows = []
    for action in window.findChildren(QAction):
        keys = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        if keys and action.text():
            text = action.text().replace("&", "").rstrip("…")
            if text in ("Rename", "Delete"):  # the conversation list's own
                text += " the selected conversation"
            rows.append((keys, text))
    for button in window.findChildren(QAbstractButton):
        keys = button.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        if keys and button.text():
            what = button.text().replace("&", "")
            rows.append((keys, f"{what} mode" if button.isCheckable() else what + _panel(button)))
    return sorted(set(rows), key=lambda r: r[1].lower()) + WIDGET_KEYS


def _panel(widget: QWidget) -> str:
    """" (in the Run panel)" for a side panel's button: its keys work while it is shown."""
    parent = widget.parentWidget()
    while parent is not None and not isinstance(parent, QDockWidget):
        parent = parent.parentWidget()
    return f" (in the {parent.windowTitle()} panel)" if parent is not None else ""


def show_shortcuts(window: QWidget) -> QMessageBox:
    table = "".join(f"<tr><td><b>{html.escape(k)}</b>&nbsp;&nbsp;</td><td>{html.escape(w)}</td>"
                    "</tr>" for k, w in shortcut_rows(window))
    return show_help(window, "Keyboard shortcuts", f"<table>{table}</table>")


def show_help(parent: QWidget, title: str, text_html: str) -> QMessageBox:
    """A help text in a box that does not block the window."""
    box = QMessageBox(QMessageBox.Icon.NoIcon, title, text_html, QMessageBox.StandardButton.Ok,
                      parent)
    box.setObjectName("help")
    box.setTextFormat(Qt.TextFormat.RichText)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
    box.setWindowModality(Qt.WindowModality.NonModal)
    box.show()
    return box
